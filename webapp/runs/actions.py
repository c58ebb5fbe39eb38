"""Action functions: the one place each change to a run is written and queued. Every refusal is a FieldError
naming the field (webapp/api.py answers it as JSON, the launch form marks the field)."""
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rl.sbatch_options import slurm_options
from rl.methods import get_method, validate_hyperparameters
from rl.params import FieldError
from webapp.accounts.access import require_role, team_for_new_object
from webapp.accounts.models import Membership
from webapp.alerts.rule_specs import validate_overrides
from webapp.numbers import is_whole_number, whole_number
from webapp.plain_text import control_character
from webapp.prompts.models import PromptSet
from webapp.tasks import DELETE_RUN_FILES, send_on_commit

from . import lifecycle, model_names, presets
from .launch_request import LaunchRequest
from .models import Run, RunEvent
from .signals import run_deleting

MAX_STEPS_LIMIT = 100_000
MAX_GPUS = 64
MAX_NODES = 256


def default_gpus(model: str) -> int:
    # The small default policy trains on a CPU worker; a real model wants a GPU; a run's checkpoint, what its run had.
    if model.startswith("run:"):
        return Run.objects.filter(pk=int(model[4:].split("/")[0])).values_list("gpus", flat=True).first() or 0
    return 0 if model == "default" else 1


def queue_for(gpus: int) -> str:
    return settings.QUEUE_PREFIX + ("gpu" if gpus > 0 else "cpu")


def launch_run(request: LaunchRequest, *, user, queue=None, cloned_from=None) -> Run:
    """Create a queued run in the prompt set's team and queue it: the one front door of a launch, for the API's
    JSON, the launch form's fields and a clone's stored settings alike (a LaunchRequest). `prompt_set`,
    `eval_prompt_set` (ids, as JSON numbers or text) and `team` (an id or a name) are as the client gave them and are
    resolved here; the user must be a member or admin of the prompt set's team (PermissionDenied otherwise).
    `cloned_from`: the run this one was cloned from (the launch form pre-filled from it), recorded as such.
    `request.preset`: the preset (presets.py) whose values lie under the hyperparameters and max_steps given; None:
    the one presets.default_preset picks for the model and its queue (the API's default: the small CPU preset for
    the default policy on a CPU worker). `queue`: a clone's, where its run was queued."""
    name = _plain_text(request.name, "name", Run._meta.get_field("name").max_length)
    if not name:
        raise FieldError("name", "a run needs a name")
    method = request.method
    if method in (None, ""):
        raise FieldError("method", "'method' is required")
    prompt_set, eval_prompt_set = _launch_sets(user, request.prompt_set, request.team, request.eval_prompt_set)
    require_role(user, prompt_set.team, Membership.MEMBER)
    if not isinstance(request.hyperparameters, (dict, type(None))):
        raise FieldError("hyperparameters", "'hyperparameters' must be an object of name → value")
    hyperparameters = dict(request.hyperparameters or {})
    # Alert thresholds ride along in the hyperparameters (DESIGN §4.5) but are checked
    # against the alert rules, not the method's schema, and never reach the trainer.
    alert_rules = hyperparameters.pop("alert_rules", None)
    spec = get_method(method)
    # names, never paths on the worker: the worker finds their folders (model_names.resolve)
    model = model_names.check(
        user, _plain_text(request.model or "default", "model", Run._meta.get_field("model").max_length), "model")
    gpus = _whole_number(default_gpus(model) if request.gpus in (None, "") else request.gpus, "gpus", 0, MAX_GPUS)
    start = presets.preset_values(method, presets.default_preset(model, gpus) if request.preset is None
                                  else presets.check(request.preset))
    hyperparameters = validate_hyperparameters(method, {**start["hyperparameters"], **hyperparameters})
    max_steps = start["max_steps"] if request.max_steps in (None, "") else request.max_steps
    if alert_rules:
        hyperparameters["alert_rules"] = validate_overrides(alert_rules)
    if eval_prompt_set is not None:
        if eval_prompt_set.team_id != prompt_set.team_id:
            raise FieldError("eval_prompt_set", "the eval prompt set must belong to the run's team")
        if not eval_prompt_set.has_labels:
            raise FieldError("eval_prompt_set", f"the eval prompt set {eval_prompt_set.name!r} has no labels: "
                                                "evaluation needs them for pass@k and maj@k")
    tags = _clean_tags(request.tags)
    needs_labels = spec.reference_field_for(hyperparameters) is not None
    if needs_labels and not prompt_set.has_labels:
        hint = f"; turn on {spec.own_reference_switch} to run it label-free" if spec.own_reference_switch else ""
        raise FieldError("prompt_set", f"{spec.title} needs reference answers and the prompt set {prompt_set.name!r} "
                                       f"has no labels{hint}")
    max_steps = _whole_number(20 if max_steps in (None, "") else max_steps, "max_steps", 1, MAX_STEPS_LIMIT)
    seed = _whole_number(request.seed or 0, "seed", 0, MAX_SEED)
    embedding_model = model_names.check(user, _plain_text(
        request.embedding_model, "embedding_model", Run._meta.get_field("embedding_model").max_length), "embedding_model")
    nodes = _whole_number(1 if request.nodes in (None, "") else request.nodes, "nodes", 1, MAX_NODES)
    if request.engine_options not in (None, "", {}) and not isinstance(request.engine_options, dict):
        raise FieldError("engine_options", "engine_options must be an object: partition, account, time_limit, sbatch")
    engine_options = slurm_options(request.engine_options)
    queue = queue or queue_for(gpus)
    check_run_size(hyperparameters, max_steps, queue)
    with transaction.atomic():
        check_active_runs(prompt_set.team)
        run = Run.objects.create(
            name=name,
            method=method,
            team=prompt_set.team,
            prompt_set=prompt_set,
            eval_prompt_set=eval_prompt_set,
            tags=tags,
            model=model,
            embedding_model=embedding_model,
            hyperparameters=hyperparameters,
            max_steps=max_steps,
            seed=seed,
            gpus=gpus,
            nodes=nodes,
            engine_options=engine_options,
            queue=queue,
            created_by=user,
            cloned_from=cloned_from,
        )
        lifecycle.queued(run, by=user)
        lifecycle.dispatch(run)
    return run


def _launch_sets(user, prompt_set, team, eval_prompt_set) -> tuple[PromptSet, PromptSet | None]:
    """The prompt set and eval set a launch names, both visible to the user. A run trains in its prompt set's
    team: a `team` given must be that one."""
    chosen = _visible_prompt_set(user, prompt_set, "prompt_set")
    if team not in (None, ""):
        team = team_for_new_object(user, team)
        if team.pk != chosen.team_id:
            raise FieldError("team", f"the prompt set {chosen.name!r} belongs to team {chosen.team.name!r}; a run "
                                     f"trains in its prompt set's team, so choose a prompt set of {team.name!r}")
    if eval_prompt_set in (None, ""):
        return chosen, None
    return chosen, _visible_prompt_set(user, eval_prompt_set, "eval_prompt_set")


def _visible_prompt_set(user, value, field: str) -> PromptSet:
    if value in (None, ""):
        raise FieldError(field, f"'{field}' is required: choose a prompt set")
    # an id as a JSON number or a string of digits; 1e400, true or "²" find nothing (never a 500)
    pk = value if type(value) is int and 0 < value < 2**63 else whole_number(value)
    found = PromptSet.objects.visible_to(user).select_related("team").filter(pk=pk).first() if pk else None
    if found is None:
        raise FieldError(field, f"no prompt set with id {value!r}")
    return found


def check_active_runs(team) -> None:
    """FieldError when `team` already has TEAM_MAX_ACTIVE_RUNS queued or running runs on this Evolab's workers
    (0: no limit), so one team cannot fill the training queue. Locks the team row: two launches at once count in
    turn. Call inside the transaction that queues the run."""
    limit = settings.TEAM_MAX_ACTIVE_RUNS
    if not limit:
        return
    team.lock()
    active = Run.objects.filter(team=team, source=Run.EVOLAB, state__in=(Run.QUEUED, *Run.SUPERVISED)).count()
    if active >= limit:
        raise FieldError("team", f"the team already has {active} queued or running runs, its limit "
                            f"(EVOLAB_TEAM_MAX_ACTIVE_RUNS = {limit}): wait for one to end or cancel one")


def check_run_size(hyperparameters: dict, max_steps: int, queue: str) -> None:
    """FieldError when the run could generate more tokens than its queue's TEAM_MAX_RUN_SIZE (0: no limit): prompts
    per step × rollouts per prompt × tokens per rollout × steps, the bound a deployment holds a run to."""
    name = queue.removeprefix(settings.QUEUE_PREFIX)
    limits = settings.TEAM_MAX_RUN_SIZE
    limit = limits.get(name, limits.get("gpu", 0))
    factors = [(factor, hyperparameters.get(factor)) for factor in ("prompts_per_step", "n_votes",
                                                                    "max_completion_length")]
    if not limit or any(value is None for _, value in factors):
        return
    size = max_steps
    for _, value in factors:
        size *= value
    if size > limit:
        terms = " × ".join(f"{factor} {value}" for factor, value in [*factors, ("max_steps", max_steps)])
        raise FieldError("max_steps", f"the run would generate up to {size:,} tokens ({terms}), over the {name} "
                                      f"queue's limit of {limit:,} (raise it with EVOLAB_TEAM_MAX_RUN_SIZE={name}=N)")


MAX_SEED = 2**31 - 1  # Run.seed is a 32-bit integer; torch and numpy take any of these


def _whole_number(value, field: str, low: int, high: int) -> int:
    """A whole number from JSON or a form: an int, an integral float, or a string of digits; anything
    else (true, 2.5, Infinity, 1e400, '²') is an error naming the field, as is one outside low..high."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if is_whole_number(text.removeprefix("-")):
            number = int(text)
    if number is None:
        raise FieldError(field, f"{field} must be a whole number, not {value!r}")
    if not low <= number <= high:
        raise FieldError(field, f"{field} must be between {low} and {high}, not {number}")
    return number


def _plain_text(value, field: str, max_length: int) -> str:
    """Stripped text of at most max_length characters, without control characters (NUL, which PostgreSQL
    refuses) or unpaired surrogates."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError(field, f"{field} must be text, not {value!r}")
    text = value.strip()
    if len(text) > max_length:
        raise FieldError(field, f"{field} is {len(text):,} characters long; at most {max_length} are accepted")
    bad = control_character(text)
    if bad is not None:
        raise FieldError(field, f"{field} holds the control character {bad!a}; use printable text")
    return text


def _clean_tags(tags) -> list[str]:
    if tags in (None, ""):
        return []
    if isinstance(tags, str):
        tags = tags.split(",")
    if not isinstance(tags, (list, tuple)):
        raise FieldError("tags", "tags must be a list of words or a comma-separated string")
    cleaned = []
    for tag in tags:
        tag = _plain_text(str(tag), "tags", 1000)
        if len(tag) > 50:
            raise FieldError("tags", f"tag {tag[:50]!r}... is longer than 50 characters")
        if tag and tag not in cleaned:
            cleaned.append(tag)
    if len(cleaned) > 20:
        raise FieldError("tags", "a run takes at most 20 tags")
    return cleaned


def _trained_here(run: Run, verb: str) -> None:
    """A run trained elsewhere (DESIGN §4.8) is stopped, resumed and repeated where it trains: Evolab only
    watches it, and has no worker, prompt set or method of its own to do it with."""
    if run.is_external:
        raise FieldError("source", f"run {run.pk} is trained elsewhere and only reported to Evolab; {verb} it where it "
                                   f"trains", status=409)


def cancel_run(run: Run, user) -> Run:
    """A queued run is cancelled at once; a running one is flagged and its supervisor
    sends SIGTERM, after which the trainer checkpoints and exits."""
    require_role(user, run.team_id, Membership.MEMBER)
    _trained_here(run, "stop")
    lifecycle.request_cancel(run.pk, by=user)
    lifecycle.end_cancelled_before_start(run.pk)
    lifecycle.reap_run(run.pk)  # a run whose supervisor is gone has nobody to relay the cancel: it ends now
    run.refresh_from_db()
    return run


def resume_run(run: Run, user) -> Run:
    require_role(user, run.team_id, Membership.MEMBER)
    _trained_here(run, "resume")
    if run.state not in (Run.CANCELLED, Run.FAILED):
        raise FieldError("state", f"only a cancelled or failed run can be resumed; this one is {run.state}", status=409)
    # What the ingested log knows, not the run directory: that lives on the workers' disk, which the web
    # process may not see (several hosts). A trainer whose supervisor died may have checkpointed after its
    # last ingested event, so a run with none recorded still resumes: from what the worker finds, or from
    # step 0 (rl/driver.py says so in the log), its replayed steps superseding the earlier ones.
    last = RunEvent.objects.filter(run=run, type="checkpoint").order_by("-seq").values_list("step", flat=True).first()
    message = (f"resuming from the checkpoint of step {last} or a later one" if last is not None else
               "no checkpoint is recorded: resuming from the last one on the workers' disk, or from step 0")
    with transaction.atomic():
        check_active_runs(run.team)
        lifecycle.requeue_for_resume(run, by=user, message=message)
    return run


def clone_run(run: Run, *, user, name=None) -> Run:
    """A new queued run with the same settings (launch_run checks the user's role)."""
    _trained_here(run, "repeat")
    # the stored settings are whole; one a run predates takes its method's default
    return launch_run(LaunchRequest.of_run(run, name=name, preset=presets.PAPER), user=user, queue=run.queue,
                      cloned_from=run)


EDITABLE = ("name", "notes", "tags", "archived")
MAX_NOTES = 20_000


def update_run(run: Run, user, changes: dict) -> Run:
    """A member renames, annotates, re-tags, archives or brings back a run (any run of the team, trained here or
    elsewhere, in any state): only the fields in `changes`, each checked as a launch checks it."""
    require_role(user, run.team_id, Membership.MEMBER)
    unknown = sorted(set(changes) - set(EDITABLE))
    if unknown:
        raise FieldError(unknown[0], f"{unknown[0]!r} cannot be changed; a run's {', '.join(EDITABLE)} can")
    fields = {}
    if "name" in changes:
        fields["name"] = _plain_text(changes["name"], "name", Run._meta.get_field("name").max_length)
        if not fields["name"]:
            raise FieldError("name", "a run needs a name")
    if "notes" in changes:
        fields["notes"] = _notes(changes["notes"])
    if "tags" in changes:
        fields["tags"] = _clean_tags(changes["tags"])
    if "archived" in changes:
        if not isinstance(changes["archived"], bool):
            raise FieldError("archived", f"archived must be true or false, not {changes['archived']!r}")
        if changes["archived"] != (run.archived_at is not None):
            fields["archived_at"] = timezone.now() if changes["archived"] else None
    if fields:
        with transaction.atomic():
            Run.objects.filter(pk=run.pk).update(**fields)
            lifecycle.announce(run.pk)  # its page and its team's list show the new name at once
    run.refresh_from_db()
    return run


def _notes(value) -> str:
    """Notes are free text over several lines: newlines and tabs are kept, other control characters refused."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError("notes", f"notes must be text, not {value!r}")
    if len(value) > MAX_NOTES:
        raise FieldError("notes", f"notes are {len(value):,} characters long; at most {MAX_NOTES:,} are accepted")
    bad = control_character(value.replace("\n", "").replace("\t", "").replace("\r", ""))
    if bad is not None:
        raise FieldError("notes", f"notes hold the control character {bad!a}; use printable text")
    return value.strip()


def delete_run(run: Run, user) -> None:
    """A member deletes an ended run with everything of it: its rows here (events, groups, rollouts, metrics,
    alerts, history) and, through a worker of its queue (the web never touches the workers' disk), its run
    directory with its checkpoints. A queued or running run is refused (409): cancel it first, so that no
    trainer is writing into the directory being removed."""
    require_role(user, run.team_id, Membership.MEMBER)
    if not run.is_terminal:
        raise FieldError("state", f"run {run.pk} is {run.state}: cancel it first, then delete it", status=409)
    with transaction.atomic():
        run = Run.objects.select_for_update().get(pk=run.pk)
        if not run.is_terminal:  # resumed meanwhile
            raise FieldError("state", f"run {run.pk} is {run.state}: cancel it first, then delete it", status=409)
        # The biggest tables first, each in one statement (Django's cascade would read every group into memory).
        # What other apps keep of the run's rows first (the explorer's text index of its rollouts).
        run_deleting.send(Run, run=run)
        run.rollouts.all()._raw_delete(run.rollouts.db)
        run.groups.all()._raw_delete(run.groups.db)
        run.events.all()._raw_delete(run.events.db)
        run_id = run.pk
        run.delete()
        lifecycle.deleted(run_id, run.team_id)
        if not run.is_external:  # a run trained elsewhere has no directory on our workers
            send_on_commit(DELETE_RUN_FILES, [run_id], queue=run.queue)
