"""Action functions: the one place each change to a run is written and queued."""
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction

from rl.alert_rule_specs import AlertRuleError, validate_overrides
from rl.methods import HyperparameterError, get_method, validate_hyperparameters
from webapp.accounts.access import require_role
from webapp.accounts.models import Membership

from webapp.tasks import TRAIN_RUN, send_on_commit

from . import lifecycle
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
    send_on_commit(TRAIN_RUN, [run.pk], queue=run.queue)


def launch_run(*, user, name, method, prompt_set, model="default", hyperparameters=None, max_steps=None, seed=0,
               gpus=None, queue=None, eval_prompt_set=None, tags=None, cloned_from=None) -> Run:
    """Create a queued run in the prompt set's team and queue it. The user must be a
    member or admin of that team (PermissionDenied otherwise). `cloned_from`: the run
    this one was cloned from (the launch form pre-filled from it), recorded as such."""
    require_role(user, prompt_set.team, Membership.MEMBER)
    name = (name or "").strip()
    if not name:
        raise RunInputError("a run needs a name", "name")
    hyperparameters = dict(hyperparameters or {})
    # Alert thresholds ride along in the hyperparameters (DESIGN §4.5) but are checked
    # against the alert rules, not the method's schema, and never reach the trainer.
    alert_rules = hyperparameters.pop("alert_rules", None)
    try:
        spec = get_method(method)
        hyperparameters = validate_hyperparameters(method, hyperparameters)
    except HyperparameterError as exc:
        raise RunInputError(str(exc), exc.field) from exc
    if alert_rules:
        try:
            hyperparameters["alert_rules"] = validate_overrides(alert_rules)
        except AlertRuleError as exc:
            raise RunInputError(str(exc), exc.field) from exc
    if eval_prompt_set is not None:
        if eval_prompt_set.team_id != prompt_set.team_id:
            raise RunInputError("the eval prompt set must belong to the run's team", "eval_prompt_set")
        if not eval_prompt_set.has_labels:
            raise RunInputError(
                f"the eval prompt set {eval_prompt_set.name!r} has no labels: evaluation needs them for pass@k and maj@k",
                "eval_prompt_set",
            )
    tags = _clean_tags(tags)
    needs_labels = spec.reference_field_for(hyperparameters) is not None
    if needs_labels and not prompt_set.has_labels:
        hint = f"; turn on {spec.own_reference_switch} to run it label-free" if spec.own_reference_switch else ""
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
            team=prompt_set.team,
            prompt_set=prompt_set,
            eval_prompt_set=eval_prompt_set,
            tags=tags,
            model=model,
            hyperparameters=hyperparameters,
            max_steps=max_steps,
            seed=seed,
            gpus=gpus,
            queue=queue or queue_for(gpus),
            created_by=user,
            cloned_from=cloned_from,
        )
        lifecycle.queued(run)
        _enqueue(run)
    return run


def _clean_tags(tags) -> list[str]:
    if tags in (None, ""):
        return []
    if isinstance(tags, str):
        tags = tags.split(",")
    if not isinstance(tags, (list, tuple)):
        raise RunInputError("tags must be a list of words or a comma-separated string", "tags")
    cleaned = []
    for tag in tags:
        tag = str(tag).strip()
        if len(tag) > 50:
            raise RunInputError(f"tag {tag[:50]!r}... is longer than 50 characters", "tags")
        if tag and tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > 20:
        raise RunInputError("a run takes at most 20 tags", "tags")
    return cleaned


def cancel_run(run: Run, user) -> Run:
    """A queued run is cancelled at once; a running one is flagged and its supervisor
    sends SIGTERM, after which the trainer checkpoints and exits."""
    require_role(user, run.team_id, Membership.MEMBER)
    Run.objects.filter(pk=run.pk, state__in=[Run.QUEUED, Run.RUNNING]).update(cancel_requested=True)
    lifecycle.end_cancelled_before_start(run.pk)
    run.refresh_from_db()
    return run


def resume_run(run: Run, user) -> Run:
    require_role(user, run.team_id, Membership.MEMBER)
    if run.state not in (Run.CANCELLED, Run.FAILED):
        raise RunInputError(f"only a cancelled or failed run can be resumed; this one is {run.state}", "state")
    checkpoints = run.run_dir / "checkpoints"
    if not checkpoints.is_dir() or not any(checkpoints.iterdir()):
        raise RunInputError("this run has no checkpoint to resume from", "state")
    with transaction.atomic():
        lifecycle.requeue_for_resume(run)
        _enqueue(run)
    return run


def clone_run(run: Run, *, user, name=None) -> Run:
    """A new queued run with the same settings (launch_run checks the user's role)."""
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
        eval_prompt_set=run.eval_prompt_set,
        tags=run.tags,
        cloned_from=run,
    )
    return clone
