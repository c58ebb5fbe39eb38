"""Cluster engines a worker hands its runs to (DESIGN §4.9): `slurm` (sbatch) and `ray` (the Ray Jobs REST API).
With one, the worker only submits the run's job and watches it (workers/engine_jobs.py); the `local` launcher, the
default, keeps the trainer as the worker's child (workers/supervisor.py)."""
from django.conf import settings

from .base import Engine, EngineError, JobSpec, JobState
from .ray import RayJobs
from .slurm import SlurmCli


def engine_named(name: str) -> Engine:
    """The engine of that name, as this worker's settings reach it."""
    if name == "slurm":
        if settings.SLURMRESTD_URL:
            raise EngineError("SLURMRESTD_URL is set, but Evolab submits Slurm jobs with sbatch only "
                              "(docs/cluster-engines.md): unset it on the worker")
        return SlurmCli()
    if name == "ray":
        return RayJobs(settings.RAY_ADDRESS)
    raise EngineError(f"no cluster engine {name!r}: EVOLAB_TRAINER_LAUNCHER is local, slurm or ray")


def configured() -> Engine | None:
    """This worker's engine (EVOLAB_TRAINER_LAUNCHER), None for `local`."""
    return None if settings.TRAINER_LAUNCHER == "local" else engine_named(settings.TRAINER_LAUNCHER)


__all__ = ["Engine", "EngineError", "JobSpec", "JobState", "configured", "engine_named"]
