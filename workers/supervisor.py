"""The run supervisor: claims a queued run, hands it to an engine as one job and watches the job to its end,
ingesting the trainer's event log into the database as it is written.

The engine (workers/engines/): `local`, the default, runs the trainer as this worker's child; `slurm` and `ray`
submit it to a cluster. One loop watches them all: it ingests and indexes at each poll, asks the engine about the
job (pending in its queue, with the engine's reason; running; ended), heartbeats the run's lease, and relays a
cancel (the engine's stop, SIGTERM to the trainer, which checkpoints; its kill after the grace period). When the
job ends it ingests the rest and records how the run ended, from the job's end and the trainer's last status
event. A crash of the trainer never reaches the worker: the trainer is another process, and how it ended is on
the run.

A cluster's job outlives its worker (Engine.outlives_worker): its id is recorded on the run before anything
else, so a worker that takes the run over (the lease sweeper re-queued it when this one died) re-attaches to
the same job and goes on ingesting from the run's last_seq, and a worker that shuts down hands the run back with
its job still training. The local trainer does not: a lost lease stops it, and a worker that shuts down asks it
to checkpoint, then hands the run back to resume on the next worker."""
import logging
import os
import socket
import time
import uuid

from django.conf import settings

from webapp.alerts import failures
from webapp.explorer import text_search
from webapp.runs import lifecycle
from webapp.runs.model_names import ModelNameError
from webapp.runs.models import Run, RunEvent

from . import engines
from .engines import Engine, EngineError, JobSpec, JobState
from .event_tail import LogIngestion
from .run_io import (POLL_SECONDS, cancel_requested, index_texts, index_the_rest, once, prepare_run_dir,
                     set_aside_stale_run_dir, until_stored)
from .shutdown import WORKER_SHUTTING_DOWN
from .watched import Polled

log = logging.getLogger(__name__)


def supervise(run_id: int) -> str | None:
    """Claim the run and see its job through: the run's final state; None when the run was not queued or the
    lease was lost; `queued` when the worker shut down and handed the run back."""
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    # pending until a cluster engine says the job runs (a local trainer runs at once)
    run = lifecycle.claim(run_id, owner, Run.RUNNING if settings.TRAINER_LAUNCHER == "local" else Run.PENDING)
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return None
    try:
        # a job an engine runs already is watched with that engine, whatever this worker would submit to
        engine = engines.engine_named(run.job.engine) if run.job and run.job.job_id else engines.configured()
    except EngineError as exc:
        lifecycle.finish(run, Run.FAILED, str(exc), None, "", owner=owner)
        return Run.FAILED
    return supervise_job(run, owner, engine)


def job_name(run: Run, attempt: int) -> str:
    return f"evolab-run-{run.pk}-{attempt}"


def supervise_job(run: Run, owner: str, engine: Engine) -> str | None:
    """Submit the run's job (or find the one it has) and watch it to its end."""
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
    try:
        return _watch(run, owner, engine, *job)
    except Exception as exc:
        # The supervisor itself failed (a corrupt log line, a lost database). A cluster's job trains on and the
        # run's next supervisor re-attaches to it once the lease expires; a local trainer would train unwatched,
        # so it is stopped and the run fails saying why.
        if not engine.outlives_worker:
            job_id, spec = job
            _ask(engine.kill, job_id)
            state = _ask(engine.state, job_id) or JobState("unknown")
            lifecycle.finish(run, Run.FAILED, f"the run supervisor stopped: {exc}", state.exit_code,
                             _ask(engine.log_tail, job_id, spec.log_path) or "", owner=owner)
        raise


def _job_of(run: Run, owner: str, engine: Engine, resume: bool) -> tuple[str, JobSpec] | None:
    """The job the run has in this engine and the engine still knows (a re-attach: its log is read to the end),
    else a new one; None for a cancelled run whose job the engine no longer knows (nothing to stop)."""
    job = run.job if run.job is not None and run.job.engine == engine.name else None
    known = job.job_id if job else ""
    if not known and job and job.attempt:
        known = engine.find(job_name(run, job.attempt)) or ""  # submitted, not recorded: its worker died
    if known and engine.state(known).phase != "unknown":
        lifecycle.engine_job(run, owner, engine.name, known)
        log.info("run %s: re-attached to %s job %s", run.pk, engine.title, known)
        return known, job_spec(run, owner, job.attempt, resume)
    if Run.objects.filter(pk=run.pk, cancel_requested=True).exists():
        return None
    # a new job: a run that trained before resumes from its checkpoint
    resume = resume or RunEvent.objects.filter(run=run).exists()
    if not resume:
        set_aside_stale_run_dir(run)
    attempt = (run.job.attempt if run.job else 0) + 1
    lifecycle.engine_job(run, owner, engine.name, "", attempt)  # the name is known before the job exists
    spec = job_spec(run, owner, attempt, resume)
    spec.config_path = prepare_run_dir(run)
    job_id = engine.submit(spec)
    if engine.outlives_worker:  # the id of a job that dies with its worker is of no use to the next one
        lifecycle.engine_job(run, owner, engine.name, job_id)
    log.info("run %s: submitted as %s job %s (%s)", run.pk, engine.title, job_id, spec.name)
    return job_id, spec


def job_spec(run: Run, owner: str, attempt: int, resume: bool) -> JobSpec:
    return JobSpec(
        name=job_name(run, attempt), run_id=run.pk, run_dir=run.run_dir, config_path=run.run_dir / "config.json",
        code_dir=settings.ENGINE_CODE_DIR, python=settings.TRAINER_PYTHON or settings.ENGINE_PYTHON, nodes=run.nodes,
        gpus=run.gpus, resume=resume, options={**settings.SLURM_OPTIONS, **(run.engine_options or {})},
        environment={"HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"},
        accelerate_config=settings.TRAINER_ACCELERATE_CONFIG or None, stop_grace_seconds=settings.RUN_CANCEL_GRACE_SECONDS,
        keep_alive=lambda: once(lifecycle.heartbeat, run.pk, owner))


def _watch(run: Run, owner: str, engine: Engine, job_id: str, spec: JobSpec) -> str | None:
    events, texts = LogIngestion(run), Polled(run.pk, failures.TEXT_INDEX)
    state, shown = JobState("pending"), (None, None, None)  # the phase, reason and log tail last written
    stop_sent_at, shutting_down = None, False
    next_state = next_log = next_heartbeat = 0.0
    while True:
        events.poll()  # a batch that fails is on the run and tried again after a backoff: the job trains on
        index_texts(run, text_search.catch_up, texts)  # a bounded batch per poll
        now = time.monotonic()
        if now >= next_state:
            next_state = now + engine.state_every_s
            state = _ask(engine.state, job_id) or state
            if state.phase in ("ended", "unknown"):
                break
            if stop_sent_at is not None and state.phase == "pending":
                # taken out of the queue: Slurm forgets it at once; Ray keeps a stopped job `pending` until it
                # would start, and then stops it before its entrypoint runs
                state = JobState("ended", reason=f"stopped while waiting in {engine.title}'s queue", end="cancelled")
                break
            phase = Run.PENDING if state.phase == "pending" else Run.RUNNING
            reason = f"pending in {engine.title}: {state.reason or 'waiting'}" if phase == Run.PENDING else ""
            log_tail = None
            if engine.log_every_s is not None and now >= next_log:
                next_log = now + engine.log_every_s
                log_tail = _ask(engine.log_tail, job_id, spec.log_path)
            # written when the job's state, its reason or its log changed (the local engine is asked at each poll)
            now_shown = (phase, reason, shown[2] if log_tail is None else log_tail)
            if now_shown != shown:
                if once(lifecycle.engine_state, run, owner, phase, reason, log_tail) is False:
                    return _lease_lost(run, engine, job_id, spec)
                shown = now_shown
        if now >= next_heartbeat:
            next_heartbeat = now + settings.RUN_HEARTBEAT_SECONDS
            if once(lifecycle.heartbeat, run.pk, owner) is False:  # None: the database is away; try next time
                return _lease_lost(run, engine, job_id, spec)
        if stop_sent_at is None and WORKER_SHUTTING_DOWN.is_set() and engine.outlives_worker:
            message = (f"the worker shut down; its {engine.title} job {job_id} trains on and the next worker watches "
                       f"it")
            if until_stored(lifecycle.hand_back, run, owner, message):
                log.info("run %s handed back, its %s job %s left training", run.pk, engine.title, job_id)
                return Run.QUEUED
        elif stop_sent_at is None and (WORKER_SHUTTING_DOWN.is_set() or once(cancel_requested, run)):
            # a local trainer checkpoints and ends, and the run is handed back below
            shutting_down = WORKER_SHUTTING_DOWN.is_set()
            _ask(engine.stop, job_id)
            stop_sent_at = now
        elif stop_sent_at is not None and now - stop_sent_at > spec.stop_grace_seconds:
            _ask(engine.kill, job_id)
            stop_sent_at = float("inf")  # killed once
        time.sleep(POLL_SECONDS)
    events.drain(lambda: once(lifecycle.heartbeat, run.pk, owner))  # still failing: the run fails, saying why
    index_the_rest(run, text_search.catch_up_fully, texts)
    log_tail = _ask(engine.log_tail, job_id, spec.log_path) or ""
    cancel_asked = until_stored(cancel_requested, run)
    final, message = until_stored(final_state, run, engine, job_id, state, stop_sent_at is not None or cancel_asked)
    if shutting_down and not cancel_asked and final == Run.CANCELLED:
        shut_down = f"the worker shut down at step {run.last_step}; resuming from its last checkpoint on the next worker"
        if until_stored(lifecycle.hand_back, run, owner, shut_down):
            log.info("run %s handed back to the queue (worker shutting down)", run.pk)
            return Run.QUEUED
    lifecycle.job_ended(run, state.reason, log_tail)
    until_stored(lifecycle.finish, run, final, message, state.exit_code, log_tail if final == Run.FAILED else "", owner)
    log.info("run %s ended %s (%s job %s: %s)", run.pk, final, engine.name, job_id, state.end or state.phase)
    return final


def _lease_lost(run: Run, engine: Engine, job_id: str, spec: JobSpec) -> None:
    """Another supervisor holds the run now (or it was re-queued): write nothing more. A cluster's job is left to
    that supervisor; a local trainer is asked to stop (it checkpoints), and killed after the grace period."""
    if engine.outlives_worker:
        log.warning("run %s: lease lost; %s job %s is left to the run's new supervisor", run.pk, engine.title, job_id)
        return None
    log.warning("run %s: lease lost; stopping its trainer, the run is left to its new owner", run.pk)
    _ask(engine.stop, job_id)
    deadline = time.monotonic() + spec.stop_grace_seconds
    while time.monotonic() < deadline and (_ask(engine.state, job_id) or JobState("running")).phase == "running":
        time.sleep(POLL_SECONDS)
    _ask(engine.kill, job_id)
    return None


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
    if state.end == "completed":
        if reported in (Run.SUCCEEDED, Run.CANCELLED):
            return reported, said
        return (Run.CANCELLED, said or "cancelled") if cancelled else (Run.SUCCEEDED, said)
    if cancelled and state.end in ("cancelled", "failed", None):
        if reported == Run.CANCELLED:
            return Run.CANCELLED, said
        return Run.CANCELLED, f"cancelled; {engine.stopped_text(job_id, state)}"
    if state.end == "cancelled":
        return Run.CANCELLED, f"its {engine.title} job {job_id} was cancelled outside Evolab"
    if state.end in ENDS:
        return Run.FAILED, ENDS[state.end].format(engine=engine.title, job=job_id) + (
            f" ({state.reason})" if state.reason else "")
    if reported == Run.FAILED and said:
        return Run.FAILED, said
    if state.phase == "unknown":
        return Run.FAILED, state.reason or f"{engine.title} no longer knows job {job_id}"
    return Run.FAILED, engine.failed_text(job_id, state)
