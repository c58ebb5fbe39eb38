"""What every engine does for a run's job: submit it, find it by name, say its state, stop it, read its log. A
cluster's engine (Slurm, Ray) runs the job apart from the worker; the local one (engines/local.py) as its child."""
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

LOG_TAIL_CHARS = 4000
# a terminal's colour and cursor codes (Ray colours its log): shown as text on the run page they are noise
TERMINAL_CODES = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


class EngineError(Exception):
    """The engine refused or could not be reached; the message says which and why."""


@dataclass
class JobSpec:
    """One submission of a run: its job's name (evolab-run-{id}-{attempt}), what to run and where it writes."""

    name: str
    run_id: int
    run_dir: Path
    config_path: Path
    code_dir: Path
    python: str
    nodes: int
    gpus: int
    resume: bool
    options: dict = field(default_factory=dict)  # Slurm's partition, account, time_limit, sbatch
    environment: dict = field(default_factory=dict)
    accelerate_config: str | None = None
    # how long a stopped job's trainer may take to finish its step and checkpoint before it is killed
    stop_grace_seconds: float = 120.0
    # called while a submit waits (the local engine for an earlier trainer to let go of the run's lock): the
    # supervisor keeps its lease
    keep_alive: Callable[[], object] = lambda: None

    @property
    def log_path(self) -> Path:
        """Where the job's output goes (Slurm's --output): the run directory, on storage the workers share."""
        return self.run_dir / "engine.log"


@dataclass
class JobState:
    """The engine's word on a job. `phase`: pending (in its queue; `reason` says why), running, ended (`end`
    says how: completed, failed, cancelled, timeout, node_fail, preempted, out_of_memory), or unknown (the
    engine no longer knows the job)."""

    phase: str
    reason: str = ""
    end: str | None = None
    exit_code: int | None = None


class Engine:
    name = ""
    title = ""
    # A cluster's job trains on when its worker goes: the worker hands the run back at once when it shuts down, and
    # a worker that lost the lease leaves the job to the run's next supervisor, which re-attaches by its id. A job
    # that does not (the local trainer) is stopped in both cases, and its id is not recorded.
    outlives_worker = True
    state_every_s = 2.0  # how often the engine is asked about the job (a command or an HTTP call)
    # how often the job's log tail is copied to the run for its page (None: only once the job has ended)
    log_every_s: float | None = 5.0

    def submit(self, spec: JobSpec) -> str:
        raise NotImplementedError

    def find(self, name: str) -> str | None:
        """The id of the job of that name, if the engine knows one (a worker that died between submitting and
        recording the id)."""
        raise NotImplementedError

    def state(self, job_id: str) -> JobState:
        raise NotImplementedError

    def stop(self, job_id: str) -> None:
        """Ask the trainer to checkpoint and end (SIGTERM to it), or take a job out of the queue."""
        raise NotImplementedError

    def kill(self, job_id: str) -> None:
        """End the job now (a trainer that outlived the grace period)."""
        raise NotImplementedError

    def log_tail(self, job_id: str, spec_log: Path) -> str:
        raise NotImplementedError

    def stopped_text(self, job_id: str, state: "JobState") -> str:
        """How a job stopped for a cancel ended, as the run's message says it after "cancelled; "."""
        return f"{self.title} stopped job {job_id}" + (f" ({state.reason})" if state.reason else "")

    def failed_text(self, job_id: str, state: "JobState") -> str:
        """How a job failed, when neither the engine's end nor the trainer says more."""
        code = f" (exit code {state.exit_code})" if state.exit_code else ""
        return f"its {self.title} job {job_id} failed{code}" + (f": {state.reason}" if state.reason else "")


def log_tail(text: str, chars: int = LOG_TAIL_CHARS) -> str:
    """The end of a job's log as the run page shows it: plain text, its last `chars` characters."""
    return TERMINAL_CODES.sub("", text)[-chars:]


def file_tail(path: Path, chars: int = LOG_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - 2 * chars))  # room for the codes log_tail drops
            return log_tail(f.read().decode("utf-8", "replace"), chars)
    except OSError:
        return ""
