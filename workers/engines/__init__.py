"""The engines a worker hands its runs to (DESIGN §4.9): `local`, the default, runs the trainer as the worker's
child; `slurm` (sbatch) and `ray` (the Ray Jobs REST API) submit it to a cluster. The worker watches the job the
same way whichever it is (workers/supervisor.py)."""
from django.conf import settings

from .base import Engine, EngineError, JobSpec, JobState
from .local import LocalTrainer
from .ray import RayJobs
from .slurm import SlurmCli


def engine_named(name: str) -> Engine:
    """The engine of that name, as this worker's settings reach it."""
    if name == "local":
        return LocalTrainer()
    if name == "slurm":
        if settings.SLURMRESTD_URL:
            raise EngineError("SLURMRESTD_URL is set, but Evolab submits Slurm jobs with sbatch only "
                              "(docs/cluster-engines.md): unset it on the worker")
        return SlurmCli()
    if name == "ray":
        return RayJobs(settings.RAY_ADDRESS)
    raise EngineError(f"no engine {name!r}: EVOLAB_TRAINER_LAUNCHER is local, slurm or ray")


def configured() -> Engine:
    """This worker's engine (EVOLAB_TRAINER_LAUNCHER)."""
    return engine_named(settings.TRAINER_LAUNCHER)


__all__ = ["Engine", "EngineError", "JobSpec", "JobState", "configured", "engine_named"]
