"""Work a worker does on one run, watched, so that none of it fails silently (DESIGN §4.5; issue 36, item 7).

A failure is logged with its traceback and recorded on the run (its `processing_failed` alert names the task, the
step and the error; webapp/alerts/failures.py), the work is tried again with backoff, and the first attempt that
succeeds takes the failure off the run. Two shapes of work:

- a Celery task on a run (grouping its reported rollouts, its heatmaps, its text index): `watched(run_id, task)`
  around its body, and RETRIED as its options: Celery's autoretry with exponential backoff and a cap;
- work a supervisor repeats at each poll of a training run (ingesting the trainer's log, indexing its texts):
  `Polled`, which skips the polls of its backoff after a failure instead of holding up the supervisor, whose
  heartbeats and cancels go on meanwhile.
"""
import logging
import time
from contextlib import contextmanager

from django.conf import settings
from django.db import connection

from webapp.alerts import engine, failures
from webapp.runs.models import Run

from .run_io import DATABASE_AWAY

log = logging.getLogger(__name__)

# Celery's options for a task on one run: any exception retries it after TASK_RETRY_BASE_SECONDS, doubling at each
# attempt up to TASK_RETRY_MAX_SECONDS, TASK_MAX_RETRIES times (then the failure stays on the run, and the next
# delivery of the task, such as the beat's resend of waiting rollouts, starts again).
RETRIED = {
    "autoretry_for": (Exception,),
    "retry_backoff": settings.TASK_RETRY_BASE_SECONDS,
    "retry_backoff_max": settings.TASK_RETRY_MAX_SECONDS,
    "retry_jitter": False,
    "max_retries": settings.TASK_MAX_RETRIES,
}


@contextmanager
def watched(run_id: int, task: str):
    """`task`'s work on the run: an exception is recorded on the run (at the step the work said with
    failures.at_step) and raised again, for Celery to retry; a success clears the task's earlier failure."""
    work = failures.Work(run_id, task)
    token = failures.CURRENT.set(work)
    try:
        yield work
    except Exception as exc:
        failed(run_id, task, work.step, exc)
        raise
    else:
        engine.clear_failure(run_id, task)
    finally:
        failures.CURRENT.reset(token)


def failed(run_id: int, task: str, step: int | None, exc: BaseException) -> None:
    """Log the failure with its traceback and record it on the run. Recording may fail too (the database may be what
    failed): the log has it then, and the next attempt records it."""
    at = f" at step {step}" if step is not None else ""
    log.error("run %s: %s failed%s", run_id, failures.title(task), at, exc_info=exc)
    try:
        run = Run.objects.filter(pk=run_id).first()
        if run is not None:
            engine.record_failure(run, task, step, exc)
    except Exception:  # noqa: BLE001 - said in the log; the work's own exception is what matters to the caller
        log.exception("run %s: the failure of %s could not be recorded on the run", run_id, failures.title(task))


def backoff(attempt: int) -> float:
    """Seconds before attempt `attempt` + 1 of failing work, as Celery's autoretry waits (RETRIED)."""
    return float(min(settings.TASK_RETRY_BASE_SECONDS * 2 ** (attempt - 1), settings.TASK_RETRY_MAX_SECONDS))


class Polled:
    """`task`, repeated at each poll of a supervisor. After a failure the polls of its backoff skip it (`due`); a
    success clears the failure once (a failure an earlier supervisor of the run recorded included), then costs no
    query until the next failure."""

    def __init__(self, run_id: int, task: str, clock=time.monotonic):
        self.run_id, self.task, self.clock = run_id, task, clock
        self.attempts, self.next_try, self.clean = 0, 0.0, False

    def due(self) -> bool:
        return self.clock() >= self.next_try

    def failed(self, exc: BaseException, step: int | None = None) -> None:
        self.attempts += 1
        self.next_try = self.clock() + backoff(self.attempts)
        failed(self.run_id, self.task, step, exc)
        self.clean = False

    def succeeded(self) -> None:
        if self.clean:
            return
        try:
            engine.clear_failure(self.run_id, self.task)
        except DATABASE_AWAY:  # cleared at a later poll; a supervisor never stops for it
            connection.close()
            return
        self.attempts, self.next_try, self.clean = 0, 0.0, True
