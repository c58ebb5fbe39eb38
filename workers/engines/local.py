"""The `local` engine, the default: the run's job is its trainer, started as a child of this worker
(`python -m rl.train`, or `accelerate launch` for more than one GPU). Unlike a cluster's job it does not
outlive its worker (`outlives_worker`): the supervisor stops it when the run's lease is lost and asks it to
checkpoint when the worker shuts down, and the job's id, its process id, is never recorded on the run.

The trainer runs in a process group of its own (an `accelerate launch` and its rank processes together), so a
stop past its grace period kills every one of them; it holds the run's lock (RUN_DIR/trainer.lock) for as long
as it lives, and a submit that finds the lock held stops the trainer left behind by a lost supervisor before it
starts another. A trainer whose supervisor's process is gone stops itself
(rl/driver.py::stop_when_supervisor_is_gone)."""
import fcntl
import logging
import os
import signal
import socket
import subprocess
import sys
import time

from django.conf import settings

from rl import launch

from .base import Engine, EngineError, JobSpec, JobState, file_tail

log = logging.getLogger(__name__)

LOCK_FILE, PID_FILE = "trainer.lock", "trainer.pid"
STDOUT, STDERR = "stdout.log", "stderr.log"


class LocalTrainer(Engine):
    name, title = "local", "The local launcher"
    outlives_worker = False
    state_every_s = 0.0  # a child's exit code is one system call away: asked at each poll
    log_every_s = None  # its stderr is the run's stderr tail once it has ended; the page shows no live job log

    def __init__(self):
        self._children: dict[str, tuple[subprocess.Popen, JobSpec]] = {}
        self._stopped: set[str] = set()

    def submit(self, spec: JobSpec) -> str:
        if spec.nodes > 1:
            raise EngineError(f"a run on {spec.nodes} nodes needs a cluster engine: start its worker with "
                              f"EVOLAB_TRAINER_LAUNCHER=slurm or ray")
        lock = take_run_lock(spec)
        command = self.command(spec)
        # the trainer stops itself if this process dies (rl/driver.py::stop_when_supervisor_is_gone)
        env = {**os.environ, **spec.environment, "EVOLAB_SUPERVISOR_PID": str(os.getpid()),
               "EVOLAB_SUPERVISOR_HOST": socket.gethostname()}
        try:
            with open(spec.run_dir / STDOUT, "ab") as out, open(spec.run_dir / STDERR, "ab") as err:
                child = subprocess.Popen(
                    command, cwd=settings.BASE_DIR, stdout=out, stderr=err, env=env,
                    # A process group of its own: a stop's kill reaches accelerate's rank processes too, and
                    # stopping the worker's group does not kill the trainer mid-step (the worker's shutdown
                    # asks it to checkpoint instead).
                    start_new_session=True,
                    pass_fds=(lock.fileno(),),  # the trainer holds the run's lock for as long as it lives
                )
            (spec.run_dir / PID_FILE).write_text(f"{child.pid} {spec.name}\n")
        finally:
            lock.close()  # the child's copy holds it now
        job_id = str(child.pid)
        self._children[job_id] = (child, spec)
        return job_id

    @staticmethod
    def command(spec: JobSpec) -> list[str]:
        """`python -m rl.train ...` for 0 or 1 GPU, `accelerate launch ...` for more (rl/launch.py), with the
        worker's own Python (a cluster job's, spec.python, is its nodes')."""
        return launch.trainer_command(spec.config_path, spec.run_dir, resume=spec.resume, gpus=spec.gpus,
                                      python=settings.TRAINER_PYTHON or sys.executable,
                                      accelerate_config=spec.accelerate_config)

    def find(self, name: str) -> str | None:
        return None  # a trainer is never left to a later supervisor: none to find

    def state(self, job_id: str) -> JobState:
        if job_id not in self._children:
            return JobState("unknown", reason=f"process {job_id} is not a trainer of this worker")
        code = self._children[job_id][0].poll()
        if code is None:
            return JobState("running")
        if code == 0:
            return JobState("ended", end="completed", exit_code=0)
        if code < 0 and job_id in self._stopped:
            return JobState("ended", reason=f"the trainer was stopped by signal {-code}", end="cancelled",
                            exit_code=code)
        if code < 0:
            return JobState("ended", reason=f"the trainer was killed by signal {-code}", end="failed", exit_code=code)
        return JobState("ended", reason=f"the trainer exited with code {code}", end="failed", exit_code=code)

    def stop(self, job_id: str) -> None:
        """SIGTERM to the trainer's group: it checkpoints after its step and exits."""
        self._stopped.add(job_id)
        kill_group(int(job_id), signal.SIGTERM)

    def kill(self, job_id: str) -> None:
        self._stopped.add(job_id)
        kill_group(int(job_id), signal.SIGKILL)  # whatever of its group is left (rank processes) too
        if job_id in self._children:
            self._children[job_id][0].wait()

    def log_tail(self, job_id: str, spec_log) -> str:
        """The trainer's stderr (a traceback ends there)."""
        return file_tail(spec_log.parent / STDERR)

    def stopped_text(self, job_id: str, state: JobState) -> str:
        return state.reason or "the trainer was stopped"

    def failed_text(self, job_id: str, state: JobState) -> str:
        return state.reason or f"the trainer (process {job_id}) failed"


def kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass  # already gone


def take_run_lock(spec: JobSpec):
    """The run's lock, held from here by this supervisor and then by its trainer. Held already means a
    trainer of an earlier supervisor of this run still lives (its supervisor lost the lease): it is
    asked to stop (SIGTERM to its process group, which checkpoints), then killed after the grace period,
    so two trainers never write one run directory. The supervisor's lease is kept (`spec.keep_alive`) while
    it waits."""
    spec.run_dir.mkdir(parents=True, exist_ok=True)
    lock = open(spec.run_dir / LOCK_FILE, "a+b")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return lock
    except BlockingIOError:
        pass
    pgid = _recorded_trainer(spec)
    log.warning("run %s: a trainer of an earlier supervisor still runs (process group %s); stopping it", spec.run_id,
                pgid)
    started, sig = time.monotonic(), signal.SIGTERM
    while True:
        if pgid:
            kill_group(pgid, sig)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if pgid:
                kill_group(pgid, signal.SIGKILL)  # the trainer is gone; none of its rank processes may stay
            return lock
        except BlockingIOError:
            pass
        waited = time.monotonic() - started
        if waited > spec.stop_grace_seconds:
            sig = signal.SIGKILL
        if waited > spec.stop_grace_seconds + 30:
            lock.close()
            raise EngineError(f"another trainer of this run (process group {pgid or 'unknown'}, on a host that shares "
                              f"its directory?) still holds {spec.run_dir / LOCK_FILE}; stop it, then resume the run")
        spec.keep_alive()
        time.sleep(0.5)


def _recorded_trainer(spec: JobSpec) -> int | None:
    try:
        return int((spec.run_dir / PID_FILE).read_text().split()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None
