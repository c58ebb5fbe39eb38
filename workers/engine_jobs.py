"""A run handed to a cluster engine (DESIGN §4.9): the worker submits it as one job and watches it, it is not
the trainer's parent. The job's id is recorded on the run before anything else, so a worker that takes the run
over (the lease sweeper re-queued it when this one died) re-attaches to the same job and goes on ingesting from
the run's last_seq: training never restarts because a worker did. While the engine queues the job the run is
`pending` with the engine's reason; once it trains, `running`. A cancel asks the engine to stop the job (SIGTERM
to the trainer, which checkpoints), then to end it after the grace period. How the job ended (completed, failed,
cancelled, timed out, node failure, preempted) decides the run's state, with the reason said. A worker that shuts
down hands the run back with its job still training, for the next worker to watch."""
import logging
import time

from django.conf import settings

from webapp.explorer import text_search
from webapp.runs import lifecycle
from webapp.runs.model_names import ModelNameError
from webapp.alerts import failures
from webapp.runs.models import Run, RunEvent

from .engines import Engine, EngineError, JobSpec, JobState
from .event_tail import LogIngestion
from .shutdown import WORKER_SHUTTING_DOWN
from .watched import Polled
from .run_io import (POLL_SECONDS, cancel_requested, index_texts, index_the_rest, once,
                     prepare_run_dir, set_aside_stale_run_dir, until_stored)

log = logging.getLogger(__name__)

STATE_EVERY_S = 2.0  # how often the engine is asked about the job (a command or an HTTP call)
LOG_EVERY_S = 5.0  # how often the job's log tail is copied to the run for its page


def job_name(run: Run, attempt: int) -> str:
    return f"evolab-run-{run.pk}-{attempt}"


def supervise_job(run: Run, owner: str, engine: Engine) -> str | None:
    """Submit the run's job (or find the one it has), watch it to its end; the run's final state, None when the
    lease was lost, `queued` when the worker shut down and handed the run back."""
    resume = run.resume_requested
    Run.objects.filter(pk=run.pk).update(resume_requested=False)
    try:
        job = _job_of(run, owner, engine, resume)
    except EngineError as exc:
        lifecycle.finish(run, Run.FAILED, f"{engine.title} would not take the run: {exc}", None, "", owner=owner)
        return Run.FAILED
    except ModelNameError as exc:  # found before anything is submitted
        lifecycle.finish(run, Run.FAILED, exc.run_message, None, "", owner=owner)
        return Run.FAILED
    if job is None:
        lifecycle.finish(run, Run.CANCELLED, f"cancelled; its {engine.title} job had ended", None, "", owner=owner)
        return Run.CANCELLED
    return _watch(run, owner, engine, *job)


def _job_of(run: Run, owner: str, engine: Engine, resume: bool) -> tuple[str, JobSpec] | None:
    """The job the run has in this engine and the engine still knows (a re-attach: its log is read to the end),
    else a new one; None for a cancelled run whose job the engine no longer knows (nothing to stop)."""
    known = run.engine_job_id if run.engine == engine.name else ""
    if not known and run.engine == engine.name and run.engine_attempt:
        known = engine.find(job_name(run, run.engine_attempt)) or ""  # submitted, not recorded: its worker died
    if known and engine.state(known).phase != "unknown":
        lifecycle.engine_job(run, owner, engine.name, known)
        log.info("run %s: re-attached to %s job %s", run.pk, engine.title, known)
        return known, _spec(run, engine, run.engine_attempt, resume)
    if Run.objects.filter(pk=run.pk, cancel_requested=True).exists():
        return None
    # a new job: a run that trained before resumes from its checkpoint
    resume = resume or RunEvent.objects.filter(run=run).exists()
    if not resume:
        set_aside_stale_run_dir(run)
    attempt = run.engine_attempt + 1
    lifecycle.engine_job(run, owner, engine.name, "", attempt)  # the name is known before the job exists
    spec = _spec(run, engine, attempt, resume)
    spec.config_path = prepare_run_dir(run)
    job_id = engine.submit(spec)
    lifecycle.engine_job(run, owner, engine.name, job_id)
    log.info("run %s: submitted as %s job %s (%s)", run.pk, engine.title, job_id, spec.name)
    return job_id, spec


def _spec(run: Run, engine: Engine, attempt: int, resume: bool) -> JobSpec:
    return JobSpec(
        name=job_name(run, attempt), run_id=run.pk, run_dir=run.run_dir, config_path=run.run_dir / "config.json",
        code_dir=settings.ENGINE_CODE_DIR, python=settings.TRAINER_PYTHON or settings.ENGINE_PYTHON, nodes=run.nodes,
        gpus=run.gpus, resume=resume, options={**settings.SLURM_OPTIONS, **(run.engine_options or {})},
        environment={"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
        accelerate_config=settings.TRAINER_ACCELERATE_CONFIG or None, stop_grace_seconds=settings.RUN_CANCEL_GRACE_SECONDS)


def _watch(run: Run, owner: str, engine: Engine, job_id: str, spec: JobSpec) -> str | None:
    events, texts = LogIngestion(run), Polled(run.pk, failures.TEXT_INDEX)
    state, stop_sent_at = JobState("pending"), None
    next_state = next_log = next_heartbeat = 0.0
    while True:
        events.poll()  # a batch that fails is on the run and tried again after a backoff: the job trains on
        index_texts(run, text_search.catch_up, texts)
        now = time.monotonic()
        if now >= next_state:
            next_state = now + STATE_EVERY_S
            state = _ask(engine.state, job_id) or state
            if state.phase in ("ended", "unknown"):
                break
            if stop_sent_at is not None and state.phase == "pending":
                # taken out of the queue: Slurm forgets it at once; Ray keeps a stopped job `pending` until it
                # would start, and then stops it before its entrypoint runs
                state = JobState("ended", reason=f"stopped while waiting in {engine.title}'s queue", end="cancelled")
                break
            log_tail = None
            if now >= next_log:
                next_log = now + LOG_EVERY_S
                log_tail = _ask(engine.log_tail, job_id, spec.log_path)
            phase = Run.PENDING if state.phase == "pending" else Run.RUNNING
            reason = f"pending in {engine.title}: {state.reason or 'waiting'}" if phase == Run.PENDING else ""
            if once(lifecycle.engine_state, run, owner, phase, reason, log_tail) is False:
                log.warning("run %s: lease lost; %s job %s is left to the run's new supervisor", run.pk, engine.title,
                            job_id)
                return None
        if now >= next_heartbeat:
            next_heartbeat = now + settings.RUN_HEARTBEAT_SECONDS
            if once(lifecycle.heartbeat, run.pk, owner) is False:
                return None  # re-queued meanwhile: the job trains on, and the next supervisor watches it
        if WORKER_SHUTTING_DOWN.is_set() and stop_sent_at is None:
            message = (f"the worker shut down; its {engine.title} job {job_id} trains on and the next worker watches "
                       f"it")
            if until_stored(lifecycle.hand_back, run, owner, message):
                log.info("run %s handed back, its %s job %s left training", run.pk, engine.title, job_id)
                return Run.QUEUED
        if stop_sent_at is None and once(cancel_requested, run):
            _ask(engine.stop, job_id)
            stop_sent_at = now
        elif stop_sent_at is not None and now - stop_sent_at > settings.RUN_CANCEL_GRACE_SECONDS:
            _ask(engine.kill, job_id)
            stop_sent_at = float("inf")  # killed once
        time.sleep(POLL_SECONDS)
    events.drain(lambda: once(lifecycle.heartbeat, run.pk, owner))
    index_the_rest(run, text_search.catch_up_fully, texts)
    log_tail = _ask(engine.log_tail, job_id, spec.log_path) or ""
    cancelled = stop_sent_at is not None or until_stored(cancel_requested, run)
    final, message = until_stored(final_state, run, engine, job_id, state, cancelled)
    Run.objects.filter(pk=run.pk).update(engine_reason=state.reason[:500], engine_log_tail=log_tail)
    until_stored(lifecycle.finish, run, final, message, state.exit_code, log_tail if final == Run.FAILED else "", owner)
    log.info("run %s: %s job %s ended %s (%s)", run.pk, engine.title, job_id, state.end or state.phase, final)
    return final


def _ask(call, *args):
    """An engine call, or None when the engine cannot answer now (asked again at the next poll)."""
    try:
        return call(*args)
    except EngineError as exc:
        log.warning("%s", exc)
        return None


ENDS = {
    "timeout": "its {engine} job {job} reached its time limit; resume the run to go on from its last checkpoint",
    "node_fail": "a node of its {engine} job {job} failed; resume the run to go on from its last checkpoint",
    "preempted": "its {engine} job {job} was preempted and not requeued; resume the run to go on from its last "
                 "checkpoint",
    "out_of_memory": "its {engine} job {job} ran out of memory",
}


def final_state(run: Run, engine: Engine, job_id: str, state: JobState, cancelled: bool) -> tuple[str, str]:
    """The run's end from the job's end and the trainer's last status event (the trainer knows best why it
    stopped: a graceful cancel, a refused config)."""
    last = RunEvent.objects.filter(run=run, type="status").order_by("-seq").values_list("payload", flat=True).first()
    reported, said = (last or {}).get("state"), (last or {}).get("message", "")
    words = {"engine": engine.title, "job": job_id}
    if state.end == "completed":
        if reported in (Run.SUCCEEDED, Run.CANCELLED):
            return reported, said
        return (Run.CANCELLED, said or "cancelled") if cancelled else (Run.SUCCEEDED, said)
    if cancelled and state.end in ("cancelled", "failed", None):
        if reported == Run.CANCELLED:
            return Run.CANCELLED, said
        return Run.CANCELLED, f"cancelled; {engine.title} stopped job {job_id}" + (f" ({state.reason})" if state.reason
                                                                                 else "")
    if state.end == "cancelled":
        return Run.CANCELLED, f"its {engine.title} job {job_id} was cancelled outside Evolab"
    if state.end in ENDS:
        return Run.FAILED, ENDS[state.end].format(**words) + (f" ({state.reason})" if state.reason else "")
    if reported == Run.FAILED and said:
        return Run.FAILED, said
    if state.phase == "unknown":
        return Run.FAILED, state.reason or f"{engine.title} no longer knows job {job_id}"
    code = f" (exit code {state.exit_code})" if state.exit_code else ""
    return Run.FAILED, f"its {engine.title} job {job_id} failed{code}" + (f": {state.reason}" if state.reason else "")
