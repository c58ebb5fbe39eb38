"""Action functions: the one place each change to a run is written and queued."""
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rl.methods import HyperparameterError, get_method, validate_hyperparameters

from workers.live import push

from .models import Run

MAX_STEPS_LIMIT = 100_000


@dataclass
class RunInputError(ValueError):
    message: str
    field: str | None = None

    def __str__(self):
        return self.message


MAX_GPUS = 64


def default_gpus(model: str) -> int:
    # The small default policy trains on a CPU worker; a real model wants a GPU.
    return 0 if model == "default" else 1


def queue_for(gpus: int) -> str:
    return settings.QUEUE_PREFIX + ("gpu" if gpus > 0 else "cpu")


def _enqueue(run: Run) -> None:
    # Imported here: workers.tasks imports the supervisor, which imports this module.
    from workers.tasks import train_run

    transaction.on_commit(lambda: train_run.apply_async(args=[run.pk], queue=run.queue))


def launch_run(*, user, name, method, prompt_set, model="default", hyperparameters=None, max_steps=None, seed=0,
               gpus=None, queue=None) -> Run:
    name = (name or "").strip()
    if not name:
        raise RunInputError("a run needs a name", "name")
    try:
        spec = get_method(method)
        hyperparameters = validate_hyperparameters(method, hyperparameters or {})
    except HyperparameterError as exc:
        raise RunInputError(str(exc), exc.field) from exc
    needs_labels = spec.needs_references and not hyperparameters.get("use_majority_as_reference")
    if needs_labels and not prompt_set.has_labels:
        can_go_label_free = any(h.name == "use_majority_as_reference" for h in spec.hyperparameters)
        hint = "; turn on use_majority_as_reference to run it label-free" if can_go_label_free else ""
        raise RunInputError(
            f"{spec.title} needs reference answers and the prompt set {prompt_set.name!r} has no labels{hint}", "prompt_set"
        )
    try:
        max_steps = int(max_steps if max_steps not in (None, "") else 20)
    except (TypeError, ValueError):
        raise RunInputError(f"max_steps must be a whole number, not {max_steps!r}", "max_steps") from None
    if not 1 <= max_steps <= MAX_STEPS_LIMIT:
        raise RunInputError(f"max_steps must be between 1 and {MAX_STEPS_LIMIT}, not {max_steps}", "max_steps")
    try:
        seed = int(seed or 0)
    except (TypeError, ValueError):
        raise RunInputError(f"seed must be a whole number, not {seed!r}", "seed") from None
    model = (model or "default").strip()
    if gpus in (None, ""):
        gpus = default_gpus(model)
    try:
        gpus = int(gpus)
    except (TypeError, ValueError):
        raise RunInputError(f"gpus must be a whole number, not {gpus!r}", "gpus") from None
    if not 0 <= gpus <= MAX_GPUS:
        raise RunInputError(f"gpus must be between 0 and {MAX_GPUS}, not {gpus}", "gpus")
    with transaction.atomic():
        run = Run.objects.create(
            name=name,
            method=method,
            prompt_set=prompt_set,
            model=model,
            hyperparameters=hyperparameters,
            max_steps=max_steps,
            seed=seed,
            gpus=gpus,
            queue=queue or queue_for(gpus),
            created_by=user,
        )
        _enqueue(run)
    return run


def cancel_run(run: Run) -> Run:
    """A queued run is cancelled at once; a running one is flagged and its supervisor
    sends SIGTERM, after which the trainer checkpoints and exits."""
    Run.objects.filter(pk=run.pk, state__in=[Run.QUEUED, Run.RUNNING]).update(cancel_requested=True)
    end_cancelled_before_start(run.pk)
    run.refresh_from_db()
    return run


def end_cancelled_before_start(run_id: int) -> bool:
    """A queued run with a cancel request ends `cancelled` and watchers are told. Called
    by cancel_run and by a supervisor that finds such a run, whichever comes first."""
    message = "cancelled before it started"
    ended = Run.objects.filter(pk=run_id, state=Run.QUEUED, cancel_requested=True).update(
        state=Run.CANCELLED, finished_at=timezone.now(), message=message
    )
    if ended:
        push(run_id, [{"type": "status", "state": Run.CANCELLED, "message": message}])
    return bool(ended)


def resume_run(run: Run) -> Run:
    if run.state not in (Run.CANCELLED, Run.FAILED):
        raise RunInputError(f"only a cancelled or failed run can be resumed; this one is {run.state}", "state")
    checkpoints = run.run_dir / "checkpoints"
    if not checkpoints.is_dir() or not any(checkpoints.iterdir()):
        raise RunInputError("this run has no checkpoint to resume from", "state")
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(
            state=Run.QUEUED, resume_requested=True, cancel_requested=False, finished_at=None, message="", exit_code=None
        )
        run.refresh_from_db()
        _enqueue(run)
    return run


def clone_run(run: Run, *, user, name=None) -> Run:
    clone = launch_run(
        user=user,
        name=name or f"{run.name} (clone)",
        method=run.method,
        prompt_set=run.prompt_set,
        model=run.model,
        hyperparameters=run.hyperparameters,
        max_steps=run.max_steps,
        seed=run.seed,
        gpus=run.gpus,
        queue=run.queue,
    )
    Run.objects.filter(pk=clone.pk).update(cloned_from=run)
    clone.cloned_from = run
    return clone
