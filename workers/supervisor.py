"""The run supervisor: starts the trainer as a child process, tails its event log into
the database, relays cancel requests as SIGTERM, and records how the child ended.

A crash of the child never reaches the worker: the child is a separate process and its
exit code and stderr tail are recorded on the run.

The supervisor holds the run under a lease (webapp/runs/lifecycle.py): it heartbeats the run each
RUN_HEARTBEAT_SECONDS and stops its trainer as soon as a heartbeat finds the lease lost. The trainer
runs in a process group of its own (an `accelerate launch` and its rank processes together), so a
cancel past its grace period kills every one of them; it holds the run's lock (RUN_DIR/trainer.lock)
for as long as it lives, and a supervisor that finds the lock held stops the trainer left behind by
a lost supervisor before it starts another. A trainer whose supervisor's process is gone stops
itself (rl/driver.py::stop_when_supervisor_is_gone). When the worker shuts down, the trainer is
asked to checkpoint and the run is queued again to resume on the next worker.
"""
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid

from django.conf import settings
from rl import launch
from webapp.explorer import text_search
from webapp.runs import lifecycle
from webapp.runs.model_names import ModelNameError
from webapp.alerts import failures
from webapp.runs.models import Run, RunEvent

from .event_tail import LogIngestion
from . import engines
from .engine_jobs import supervise_job
from .engines.base import file_tail
from .run_io import (POLL_SECONDS, cancel_requested, index_texts, index_the_rest, once,
                     prepare_run_dir, set_aside_stale_run_dir, until_stored)
from .shutdown import WORKER_SHUTTING_DOWN
from .watched import Polled

log = logging.getLogger(__name__)

LOCK_FILE, PID_FILE = "trainer.lock", "trainer.pid"


def trainer_command(run: Run, config_path, resume: bool) -> list[str]:
    """`python -m rl.train ...` for 0 or 1 GPU, `accelerate launch ...` for more (rl/launch.py)."""
    return launch.trainer_command(
        config_path, run.run_dir, resume=resume, gpus=run.gpus, python=settings.TRAINER_PYTHON or sys.executable,
        accelerate_config=settings.TRAINER_ACCELERATE_CONFIG or None,
    )



def _final_state(run: Run, exit_code: int, cancel_sent: bool) -> tuple[str, str]:
    last_status = RunEvent.objects.filter(run=run, type="status").order_by("-seq").first()
    reported = last_status.payload.get("state") if last_status else None
    reported_message = last_status.payload.get("message", "") if last_status else ""
    if exit_code == 0 and reported in (Run.SUCCEEDED, Run.CANCELLED):
        return reported, reported_message
    if exit_code == 0 and cancel_sent:
        return Run.CANCELLED, reported_message or "cancelled"
    if exit_code == 0:
        return Run.SUCCEEDED, reported_message
    if cancel_sent and exit_code in (-signal.SIGTERM, -signal.SIGKILL):
        return Run.CANCELLED, f"cancelled; the trainer was stopped by signal {-exit_code}"
    if reported == Run.FAILED and reported_message:
        return Run.FAILED, reported_message
    if exit_code < 0:
        return Run.FAILED, f"the trainer was killed by signal {-exit_code}"
    return Run.FAILED, f"the trainer exited with code {exit_code}"


def supervise(run_id: int) -> str | None:
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    # pending until the cluster engine says the job runs (a local trainer runs at once)
    run = lifecycle.claim(run_id, owner, Run.RUNNING if settings.TRAINER_LAUNCHER == "local" else Run.PENDING)
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return None
    try:
        # a job an engine runs already is watched with that engine, whatever this worker would submit to
        engine = engines.engine_named(run.engine) if run.engine_job_id else engines.configured()
    except engines.EngineError as exc:
        lifecycle.finish(run, Run.FAILED, str(exc), None, "", owner=owner)
        return Run.FAILED
    if engine is not None:
        return supervise_job(run, owner, engine)
    if run.nodes > 1:
        lifecycle.finish(run, Run.FAILED, f"a run on {run.nodes} nodes needs a cluster engine: start its worker with "
                                          f"EVOLAB_TRAINER_LAUNCHER=slurm or ray", None, "", owner=owner)
        return Run.FAILED
    lifecycle.engine_job(run, owner, "local", "")
    resume = run.resume_requested
    Run.objects.filter(pk=run.pk).update(resume_requested=False)

    if not resume:
        set_aside_stale_run_dir(run)
    run.run_dir.mkdir(parents=True, exist_ok=True)
    try:
        lock = _take_run_lock(run, owner)
    except RunLocked as exc:
        lifecycle.finish(run, Run.FAILED, str(exc), None, "", owner=owner)
        return Run.FAILED
    try:
        config_path = prepare_run_dir(run)
    except ModelNameError as exc:
        lock.close()
        lifecycle.finish(run, Run.FAILED, exc.run_message, None, "", owner=owner)
        return Run.FAILED
    stdout_path, stderr_path = run.run_dir / "stdout.log", run.run_dir / "stderr.log"
    # the trainer stops itself if this process dies (rl/driver.py::stop_when_supervisor_is_gone)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1", "EVOLAB_SUPERVISOR_PID": str(os.getpid()),
           "EVOLAB_SUPERVISOR_HOST": socket.gethostname()}
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        child = subprocess.Popen(
            trainer_command(run, config_path, resume),
            cwd=settings.BASE_DIR,
            stdout=out,
            stderr=err,
            env=env,
            # A process group of its own: a cancel's kill reaches accelerate's rank processes too, and
            # stopping the worker's group does not kill the trainer mid-step (the worker's shutdown
            # signal asks it to checkpoint instead, see _watch).
            start_new_session=True,
            # the trainer holds the run's lock for as long as it lives
            pass_fds=(lock.fileno(),),
        )
    (run.run_dir / PID_FILE).write_text(f"{child.pid} {owner}\n")
    lock.close()  # the child's copy holds it now
    try:
        exit_code, cancel_sent, handed_back = _watch(run, child, owner)
    except Exception as exc:
        # The supervisor itself failed (a corrupt log line, a lost database): stop the
        # trainer rather than leave it training unwatched, and say why on the run.
        _kill_group(child.pid, signal.SIGKILL)
        child.wait()
        lifecycle.finish(run, Run.FAILED, f"the run supervisor stopped: {exc}", child.returncode, file_tail(stderr_path),
                         owner=owner)
        raise
    if exit_code is None:
        log.warning("run %s: lease lost; its trainer was stopped and the run left to its new owner", run.pk)
        return None
    state, message = until_stored(_final_state, run, exit_code, cancel_sent)
    shut_down = f"the worker shut down at step {run.last_step}; resuming from its last checkpoint on the next worker"
    if handed_back and state == Run.CANCELLED and until_stored(lifecycle.hand_back, run, owner, shut_down):
        log.info("run %s handed back to the queue (worker shutting down)", run.pk)
        return Run.QUEUED
    until_stored(lifecycle.finish, run, state, message, exit_code, file_tail(stderr_path) if state == Run.FAILED else "",
                  owner)
    log.info("run %s ended %s (exit code %s)", run.pk, state, exit_code)
    return state


def _watch(run: Run, child: subprocess.Popen, owner: str) -> tuple[int | None, bool, bool]:
    """Ingest the log until the child exits, heartbeating the run and relaying a cancel (or the
    worker's shutdown) as SIGTERM. Returns the exit code (None: the lease was lost and the trainer
    stopped), whether a cancel was sent, and whether the worker's shutdown was."""
    events, texts = LogIngestion(run), Polled(run.pk, failures.TEXT_INDEX)
    stop_sent_at, shutting_down = None, False
    next_heartbeat = time.monotonic() + settings.RUN_HEARTBEAT_SECONDS
    while True:
        events.poll()  # a batch that fails is on the run and tried again after a backoff: the trainer trains on
        index_texts(run, text_search.catch_up, texts)  # a bounded batch per poll
        exit_code = child.poll()
        if exit_code is not None:
            break
        if time.monotonic() >= next_heartbeat:
            next_heartbeat = time.monotonic() + settings.RUN_HEARTBEAT_SECONDS
            if once(lifecycle.heartbeat, run.pk, owner) is False:  # None: the database is away; try next time
                _stop(child)
                return None, False, False
        if stop_sent_at is None and (WORKER_SHUTTING_DOWN.is_set() or once(cancel_requested, run)):
            shutting_down = WORKER_SHUTTING_DOWN.is_set()
            _kill_group(child.pid, signal.SIGTERM)
            stop_sent_at = time.monotonic()
        elif stop_sent_at is not None and time.monotonic() - stop_sent_at > settings.RUN_CANCEL_GRACE_SECONDS:
            _kill_group(child.pid, signal.SIGKILL)
        time.sleep(POLL_SECONDS)
    events.drain(lambda: once(lifecycle.heartbeat, run.pk, owner))  # still failing: the run fails, saying why
    index_the_rest(run, text_search.catch_up_fully, texts)
    cancelled = until_stored(cancel_requested, run)
    return exit_code, stop_sent_at is not None, shutting_down and not cancelled


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def _stop(child: subprocess.Popen) -> None:
    """SIGTERM the trainer's group (it checkpoints after its step), SIGKILL it after the grace period."""
    _kill_group(child.pid, signal.SIGTERM)
    try:
        child.wait(timeout=settings.RUN_CANCEL_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        pass
    _kill_group(child.pid, signal.SIGKILL)  # whatever of its group is left (rank processes)
    child.wait()


def _take_run_lock(run: Run, owner: str):
    """The run's lock, held from here by this supervisor and then by its trainer. Held already means a
    trainer of an earlier supervisor of this run still lives (its supervisor lost the lease): it is
    asked to stop (SIGTERM to its process group, which checkpoints), then killed after the grace period,
    so two trainers never write one run directory."""
    lock = open(run.run_dir / LOCK_FILE, "a+b")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return lock
    except BlockingIOError:
        pass
    pgid = _recorded_trainer(run)
    log.warning("run %s: a trainer of an earlier supervisor still runs (process group %s); stopping it", run.pk, pgid)
    started, sig = time.monotonic(), signal.SIGTERM
    while True:
        if pgid:
            _kill_group(pgid, sig)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if pgid:
                _kill_group(pgid, signal.SIGKILL)  # the trainer is gone; none of its rank processes may stay
            return lock
        except BlockingIOError:
            pass
        waited = time.monotonic() - started
        if waited > settings.RUN_CANCEL_GRACE_SECONDS:
            sig = signal.SIGKILL
        if waited > settings.RUN_CANCEL_GRACE_SECONDS + 30:
            lock.close()
            raise RunLocked(f"another trainer of this run (process group {pgid or 'unknown'}, on a host that shares "
                            f"its directory?) still holds {run.run_dir / LOCK_FILE}; stop it, then resume the run")
        once(lifecycle.heartbeat, run.pk, owner)
        time.sleep(POLL_SECONDS)


class RunLocked(Exception):
    pass


def _recorded_trainer(run: Run) -> int | None:
    try:
        return int((run.run_dir / PID_FILE).read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


