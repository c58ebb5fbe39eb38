"""Background work that failed on a run, as its `processing_failed` alert says it (DESIGN §4.5: "a background task
that fails on a run shows on that run"). The alert's bookkeeping, which it never writes: the engine
(engine.record_failure, clear_failure) writes the alert, the workers (workers/watched.py) catch the failures and retry
the work.

A run's work goes on beside its training: grouping a run trained elsewhere's reported rollouts, its similarity
heatmaps, ingesting a trainer's log, indexing its rollouts' text, and each alert rule judging its steps. When one
fails (a bug, a corrupt row, a database away) nothing may fail silently: the run's one `processing_failed` alert
holds every task failing on it, in its values,

    {"failures": {"grouping": {"step": 7, "error": "TypeError: '<' not supported ...", "attempts": 2, "at": ...}}}

and its message names each task, its step and its error, short and on one line (the traceback goes to the worker's
log). The task is retried with backoff; an attempt that succeeds takes it off the alert, which resolves when no task
is left failing. The run page shows the alert's message as a banner while it is open or acknowledged."""
import contextvars
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from .models import Alert
from .rules import Finding

KIND = "processing_failed"
MAX_ERROR_CHARS = 300

# The tasks' names, as messages say them. A rule's judgement is a task of its own, "rule <kind>" (rule_task).
GROUPING, HEATMAPS, LOG, TEXT_INDEX, CHARTS = "grouping", "heatmaps", "log", "text index", "charts"
BACKLOG = "backlog"
TITLES = {
    BACKLOG: "judging a backlog of steps",
    CHARTS: "charting of logged metrics",
    GROUPING: "grouping of reported rollouts",
    HEATMAPS: "similarity heatmaps",
    LOG: "ingestion of the trainer's log",
    TEXT_INDEX: "text indexing",
}
RULE_PREFIX = "rule "


def rule_task(kind: str) -> str:
    return RULE_PREFIX + kind


def rules_of(failures: dict) -> list[str]:
    """The rule kinds among the failing tasks."""
    return sorted(task[len(RULE_PREFIX):] for task in failures if task.startswith(RULE_PREFIX))


def title(task: str) -> str:
    return TITLES.get(task, task)


def describe(error: BaseException | str) -> str:
    """An error as the alert says it: its type and message on one line, at most MAX_ERROR_CHARS characters."""
    if isinstance(error, BaseException):
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    else:
        text = str(error)
    text = " ".join(text.split())
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def failures_of(alert) -> dict:
    """{task: failure} of a `processing_failed` alert (a copy), {} without one."""
    return dict(((alert.values or {}).get("failures") or {}) if alert is not None else {})


def with_failure(failures: dict, task: str, step: int | None, error: BaseException | str) -> dict:
    """The failures with `task` failing (again) at `step`, its attempts counted."""
    earlier = failures.get(task) or {}
    return {**failures, task: {"step": step, "error": describe(error), "attempts": earlier.get("attempts", 0) + 1,
                               "at": timezone.now().isoformat()}}


def not_retrying(run_ids: list[int], task: str, now: datetime) -> list[int]:
    """The runs among `run_ids` that a periodic resend of `task` should send again: not those on which it failed
    lately, whose own retries are under way (Celery's backoff, workers/watched.py): one more chain of retries a
    minute would multiply them. Once the retries have given up (past the longest backoff), the resend starts again."""
    lately = now - timedelta(seconds=settings.TASK_RETRY_MAX_SECONDS + 60)
    found = Alert.objects.filter(run_id__in=run_ids, rule=KIND, state__in=Alert.ACTIVE).values_list("run_id", "values")
    failed_at = {run_id: (((values or {}).get("failures") or {}).get(task) or {}).get("at") for run_id, values in found}
    retrying = {run_id for run_id, at in failed_at.items() if at and datetime.fromisoformat(at) > lately}
    return [run_id for run_id in run_ids if run_id not in retrying]


def message(failures: dict) -> str:
    """"grouping of reported rollouts failed at step 7: TypeError: ... (2 attempts)", or each failing task's."""
    def one(task, failure, verb):
        at = f" at step {failure['step']}" if failure.get("step") is not None else ""
        tries = f" ({failure['attempts']} attempts)" if failure.get("attempts", 1) > 1 else ""
        return f"{title(task)}{verb}{at}: {failure['error']}{tries}"

    if len(failures) == 1:
        ((task, failure),) = failures.items()
        return one(task, failure, " failed")
    return f"{len(failures)} background tasks fail on this run: " + "; ".join(
        one(task, failures[task], "") for task in sorted(failures))


def finding(failures: dict, severity: str) -> Finding:
    """The alert's finding for these (non-empty) failures, at the step of the latest."""
    latest = max(failures.values(), key=lambda f: f.get("at") or "")
    return Finding(KIND, severity, latest.get("step"), message(failures), {"failures": failures})


# The step the work in hand is on, for the failure's record: set by the work as it goes (at_step), read by whoever
# records its failure (workers/watched.py). A context variable: each worker thread has its own.
@dataclass
class Work:
    run_id: int
    task: str
    step: int | None = None


CURRENT = contextvars.ContextVar("evolab_work", default=None)


def at_step(step: int | None) -> None:
    """The work in hand is now on `step` (a failure from here on is recorded at it); nothing outside watched work."""
    work = CURRENT.get()
    if work is not None:
        work.step = step
