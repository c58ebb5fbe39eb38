"""The launch form (`/runs/new/`): what it shows, how it reads a POST, and how it keeps
every typed value and marks the field at fault when launch_run refuses.

Fields: name, team, prompt set, method, model, max_steps, seed, gpus, tags; per method the
hyperparameters of the method (rl/methods/) grouped in sections (hp-METHOD-NAME); an eval prompt set;
per-run alert-rule overrides (alert-KIND-PARAM), of which only the values that differ
from the team's effective thresholds are sent, as hyperparameters["alert_rules"]."""
from dataclasses import dataclass, field

from django.http import Http404

from rl.methods import METHODS, Method, get_method
from rl.params import FieldError
from webapp.accounts.access import role_in, teams_of
from webapp.accounts.models import Membership
from webapp.accounts.teams import current_team
from webapp.alerts.models import TeamAlertRules
from webapp.alerts.rule_specs import RULE_KINDS, RULES, resolve_thresholds
from webapp.numbers import whole_number
from webapp.prompts.models import PromptSet

from . import presets
from .actions import launch_run
from .launch_request import LaunchRequest
from .models import Run

# Sections of the hyperparameters, in display order; "method" takes what the others do not.
SECTIONS = (
    ("sampling", "Sampling", ("n_votes", "n_train", "prompts_per_step", "temperature", "top_p",
                              "max_prompt_length", "max_completion_length", "generation_backend",
                              "vllm_importance_sampling_correction",
                              "embedding_max_length", "embedding_pooling")),
    ("optimisation", "Optimisation", ("learning_rate", "lr_schedule", "warmup_ratio", "weight_decay",
                                      "prompts_per_update", "ppo_epochs", "kl_coef", "epsilon", "epsilon_high",
                                      "importance_sampling_level", "loss_type", "entropy_coef", "save_every")),
    ("method", "Method", None),
    ("evaluation", "Evaluation", ("eval_every", "eval_samples", "eval_temperature", "eval_top_p")),
)
_SECTIONED = {name for _, _, names in SECTIONS if names for name in names}
# The run's Slurm options (DESIGN §4.9) by their inputs' names; used when its worker hands runs to Slurm.
SLURM_FIELDS = {"partition": "slurm_partition", "account": "slurm_account", "time_limit": "slurm_time_limit",
                "sbatch": "slurm_sbatch"}
# The launch settings that are one input each (the hyperparameters and Slurm's options have inputs of their own, the
# preset is the form's own).
LAUNCH_INPUTS = tuple(name for name in LaunchRequest.names() if name not in ("hyperparameters", "engine_options", "preset"))
TOP_FIELDS = (*LAUNCH_INPUTS, *SLURM_FIELDS.values())
ALERTS_MARKER = "alert_rules_shown"


def hp_key(method: str, name: str) -> str:
    return f"hp-{method}-{name}"


def alert_key(kind: str, param: str) -> str:
    return f"alert-{kind}-{param}"


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass
class FormError:
    message: str
    field: str | None  # the FieldError's field ("n_train", "alert_rules.entropy_collapse.fraction", ...)
    key: str | None  # the form input it marks, e.g. "hp-ttrl-n_train"


@dataclass
class LaunchForm:
    values: dict  # the top-level fields as strings
    hyperparameters: dict  # {method: {name: value}}: the value each input shows
    alert_values: dict  # {kind: {param: value}}
    preset: str
    fresh: bool
    error: FormError | None = None
    launchable_teams: list = field(default_factory=list)
    prompt_sets: list = field(default_factory=list)  # of launchable teams
    team_thresholds: dict = field(default_factory=dict)  # {team id: effective thresholds}
    notice: str = ""


def launchable_teams(user) -> list:
    """Teams where the user may launch (member or admin)."""
    roles = dict(Membership.objects.filter(user=user).values_list("team_id", "role"))
    return [t for t in teams_of(user) if Membership.allows(roles.get(t.pk), Membership.MEMBER)]


def team_thresholds(team_ids) -> dict:
    """Each team's effective alert thresholds: the defaults under the team's overrides."""
    stored = dict(TeamAlertRules.objects.filter(team_id__in=list(team_ids)).values_list("team_id", "overrides"))
    result = {}
    for team_id in team_ids:
        try:
            result[team_id] = resolve_thresholds(stored.get(team_id) or {})
        except FieldError:  # a stale stored override: the defaults, rather than no form
            result[team_id] = resolve_thresholds()
    return result


def initial_form(request) -> LaunchForm:
    """A fresh form (the preset of the model, or ?preset=), or one pre-filled from
    ?clone=<run id> (a run the user can see)."""
    user = request.user
    teams = launchable_teams(user)
    sets = list(PromptSet.objects.filter(team__in=teams).select_related("team"))
    values = {
        **{name: "" for name in TOP_FIELDS}, "cloned_from": "",
        "prompt_set": request.GET.get("prompt_set", ""), "method": request.GET.get("method", "ttrl"), "model": "default",
        "max_steps": str(presets.SMALL_CPU_MAX_STEPS), "seed": "0", "nodes": "1",
    }
    if values["method"] not in METHODS:
        values["method"] = "ttrl"
    preset = request.GET.get("preset") if request.GET.get("preset") in presets.TITLES else presets.default_preset("default", None)
    form = LaunchForm(values=values, hyperparameters={}, alert_values={}, preset=preset, fresh=True,
                      launchable_teams=teams, prompt_sets=sets)
    source = None
    clone_id = request.GET.get("clone", "")
    if clone_id:
        # a run trained elsewhere has no prompt set or method of ours to launch again
        source = Run.objects.visible_to(user).select_related("prompt_set", "team").filter(
            pk=whole_number(clone_id) or 0, source=Run.EVOLAB).first()
        if source is None:
            # A stale link and another team's run answer alike (DESIGN §4.4).
            raise Http404(f"no run with id {clone_id}")
    for name in METHODS:
        form.hyperparameters[name] = presets.preset_values(name, preset)["hyperparameters"]
    if source is not None:
        form.fresh = False
        form.preset = ""
        launched = LaunchRequest.of_run(source).as_dict()
        values.update({name: _text(launched[name]) for name in LAUNCH_INPUTS})
        values.update(team=str(source.team_id), method=source.method if source.method in METHODS else "ttrl",
                      tags=", ".join(source.tags or []), cloned_from=str(source.pk),
                      **_slurm_values(source.engine_options))
        if source.method in METHODS:
            form.hyperparameters[source.method] = {**METHODS[source.method].defaults(), **source.training_hyperparameters()}
        if source.team_id not in {t.pk for t in teams}:
            form.notice = (f"Your role in team {source.team.name!r} is {role_in(user, source.team_id) or 'none'}: "
                           "only members and admins can launch runs there.")
    else:
        values["max_steps"] = str(presets.preset_values(values["method"], preset)["max_steps"] or values["max_steps"])
    values["team"] = _initial_team(request, values, sets, teams)
    form.team_thresholds = team_thresholds([t.pk for t in teams])
    effective = form.team_thresholds.get(whole_number(values["team"]))
    form.alert_values = _copy_thresholds(effective or resolve_thresholds())
    if source is not None:
        for kind, params in ((source.hyperparameters or {}).get("alert_rules") or {}).items():
            if kind in form.alert_values and isinstance(params, dict):
                form.alert_values[kind].update({k: v for k, v in params.items() if k in form.alert_values[kind]})
    return form


def _initial_team(request, values, sets, teams) -> str:
    chosen = values.get("team") or ""
    owner = _set_owner(values, sets)
    if owner is not None:
        return str(owner)
    if chosen:
        return chosen
    team = current_team(request)
    if team is not None and team.pk in {t.pk for t in teams}:
        return str(team.pk)
    return str(teams[0].pk) if teams else ""


def _copy_thresholds(thresholds: dict) -> dict:
    return {kind: dict(params) for kind, params in thresholds.items()}


def posted_form(request) -> LaunchForm:
    """The form as the user submitted it: every value kept as typed, for a re-render."""
    post = request.POST
    user = request.user
    teams = launchable_teams(user)
    values = {name: post.get(name, "") for name in TOP_FIELDS}
    values["cloned_from"] = post.get("cloned_from", "")
    values["model"] = values["model"] or "default"
    if values["method"] not in METHODS:
        values["method"] = values["method"] or "ttrl"
    preset = post.get("preset", "")
    form = LaunchForm(values=values, hyperparameters={}, alert_values={}, preset=preset, fresh=False,
                      launchable_teams=teams,
                      prompt_sets=list(PromptSet.objects.filter(team__in=teams).select_related("team")))
    fallback = preset if preset in presets.TITLES else presets.default_preset(values["model"], whole_number(values["gpus"]))
    for name, spec in METHODS.items():
        shown = presets.preset_values(name, fallback)["hyperparameters"]
        if name == values["method"]:
            # The selected method's fieldsets were submitted: show exactly what was typed.
            for hp in spec.hyperparameters:
                key = hp_key(name, hp.name)
                shown[hp.name] = (key in post) if hp.type == "bool" else post.get(key, "")
        form.hyperparameters[name] = shown
    form.team_thresholds = team_thresholds([t.pk for t in teams])
    team_id = _team_of_post(values, form.prompt_sets)
    form.alert_values = _copy_thresholds(form.team_thresholds.get(team_id) or resolve_thresholds())
    if post.get(ALERTS_MARKER):
        for kind in RULE_KINDS:
            for param in RULES[kind].params:
                key = alert_key(kind, param.name)
                if param.type == "bool":
                    form.alert_values[kind][param.name] = key in post
                elif key in post:
                    form.alert_values[kind][param.name] = post[key]
    return form


def _team_of_post(values, sets) -> int | None:
    owner = _set_owner(values, sets)
    return owner if owner is not None else whole_number(values["team"])


def _set_owner(values, sets) -> int | None:
    """The team of the chosen prompt set among `sets` (a run trains in its set's team)."""
    pk = whole_number(values["prompt_set"])
    return next((s.team_id for s in sets if s.pk == pk), None)


def hyperparameters_from_form(method: Method, post) -> dict:
    """The selected method's fields (named hp-METHOD-NAME). An unticked checkbox sends
    nothing, so booleans are read as presence; an empty input means the default."""
    values = {}
    for hp in method.hyperparameters:
        key = hp_key(method.name, hp.name)
        if hp.type == "bool":
            values[hp.name] = key in post
        elif post.get(key, "") != "":
            values[hp.name] = post[key]
    return values


def alert_overrides_from_form(post, effective: dict) -> dict:
    """{kind: {param: value}} for the alert-table values that differ from the team's
    effective thresholds; a value that does not parse is passed on as typed so that
    launch_run's validation names it (field alert_rules.KIND.PARAM)."""
    if not post.get(ALERTS_MARKER):
        return {}
    overrides = {}
    for kind in RULE_KINDS:
        for param in RULES[kind].params:
            key = alert_key(kind, param.name)
            field_name = f"alert_rules.{kind}.{param.name}"
            if param.type == "bool":
                raw = key in post
            elif key in post:
                raw = post[key]
            else:
                continue
            try:
                value = param.coerce(raw, field_name)
            except FieldError:
                overrides.setdefault(kind, {})[param.name] = raw
                continue
            if value != effective[kind].get(param.name):
                overrides.setdefault(kind, {})[param.name] = value
    return overrides


def submit(request):
    """Launch from the POST. Returns (run, None) or (None, LaunchForm with the error).
    Raises PermissionDenied (a 403) when the user may not launch in the team."""
    user = request.user
    post = request.POST
    form = posted_form(request)
    values = form.values
    method = values["method"]
    try:
        hyperparameters = hyperparameters_from_form(get_method(method), post)
        # the alert table showed the chosen team's thresholds: what differs from them is an override
        effective = form.team_thresholds.get(_team_of_post(values, form.prompt_sets)) or resolve_thresholds()
        overrides = alert_overrides_from_form(post, effective)
        if overrides:
            hyperparameters["alert_rules"] = overrides
        cloned_from = None
        if values["cloned_from"]:
            cloned_from = Run.objects.visible_to(user).filter(pk=whole_number(values["cloned_from"]) or 0).first()
        launch = LaunchRequest(
            # the form submits every value of its preset; an input left empty means the method's default
            **{name: values[name] for name in LAUNCH_INPUTS}, preset=presets.PAPER, hyperparameters=hyperparameters,
            engine_options={name: values[field].split() if name == "sbatch" else values[field].strip()
                            for name, field in SLURM_FIELDS.items()},
        )
        run = launch_run(launch, user=user, cloned_from=cloned_from)
    except FieldError as exc:
        form.error = FormError(str(exc), exc.field, error_key(values["method"], exc.field))
        return None, form
    return run, None


def _slurm_values(options: dict | None) -> dict:
    options = options or {}
    return {field: " ".join(options.get(name) or []) if name == "sbatch" else options.get(name, "")
            for name, field in SLURM_FIELDS.items()}


def error_key(method: str, field_name: str | None) -> str | None:
    """The form input an error's field names."""
    if not field_name:
        return None
    if field_name.startswith("engine_options."):
        return SLURM_FIELDS.get(field_name.split(".", 1)[1], "slurm_sbatch")
    if field_name in TOP_FIELDS:
        return field_name
    if field_name.startswith("alert_rules"):
        parts = field_name.split(".")
        if len(parts) == 3:
            return alert_key(parts[1], parts[2])
        return "alert-" + parts[1] if len(parts) == 2 else "alert_rules"
    if method in METHODS and any(hp.name == field_name for hp in METHODS[method].hyperparameters):
        return hp_key(method, field_name)
    return field_name


# --- what the template renders ---


def context(form: LaunchForm) -> dict:
    error_key_ = form.error.key if form.error else None
    method = form.values["method"]
    sections = []
    for key, title, names in SECTIONS:
        blocks = []
        for spec in METHODS.values():
            hps = [hp for hp in spec.hyperparameters if (hp.name in names if names else hp.name not in _SECTIONED)]
            blocks.append({
                "method": spec,
                "selected": spec.name == method,
                "fields": [_hp_field(spec, hp, form.hyperparameters.get(spec.name, {}), error_key_, form.error)
                           for hp in hps],
            })
        sections.append({"key": key, "title": title, "blocks": blocks})
    team_id = whole_number(form.values["team"])
    effective = form.team_thresholds.get(team_id) or resolve_thresholds()
    alert_rows = []
    for kind in RULE_KINDS:
        spec = RULES[kind]
        params = []
        for param in spec.params:
            key = alert_key(kind, param.name)
            value = form.alert_values.get(kind, {}).get(param.name, param.default)
            params.append({
                "param": param, "key": key, "value": _text(value), "checked": value is True,
                "default": _text(effective[kind].get(param.name)),
                "invalid": key == error_key_, "error": form.error.message if key == error_key_ else "",
            })
        alert_rows.append({
            "spec": spec, "key": "alert-" + kind,
            "enabled": params[0], "severity": params[1], "params": params[2:],
            "invalid": error_key_ == "alert-" + kind,
            "error": form.error.message if error_key_ == "alert-" + kind else "",
        })
    top_errors = {}
    if form.error and form.error.key in TOP_FIELDS:
        top_errors[form.error.key] = form.error.message
    sets = form.prompt_sets
    return {
        "form": form.values,
        "launch": form,
        "methods": list(METHODS.values()),
        "sections": sections,
        "alert_rows": alert_rows,
        "alerts_marker": ALERTS_MARKER,
        "errors": top_errors,
        "error": form.error,
        "teams": form.launchable_teams,
        "team_prompt_sets": [s for s in sets if s.team_id == team_id],
        "team_eval_sets": [s for s in sets if s.team_id == team_id and s.has_labels],
        "presets": [{"key": k, "title": t, "description": presets.DESCRIPTIONS[k]} for k, t in presets.TITLES.items()],
        "form_config": {
            "presets": presets.form_presets(),
            "preset": form.preset,
            # presets.default_preset's rule, for the form to follow the model as it is typed
            "default_preset": {"models": list(presets.SMALL_MODELS), "on_cpu": presets.SMALL_CPU,
                               "otherwise": presets.PAPER},
            "fresh": form.fresh,
            "prompt_sets": [{"id": s.pk, "name": s.name, "team": s.team_id, "row_count": s.row_count,
                             "has_labels": s.has_labels} for s in sets],
            "team_thresholds": {str(k): v for k, v in form.team_thresholds.items()},
            "error_key": error_key_,
        },
    }


def _hp_field(spec, hp, shown: dict, error_key_, error) -> dict:
    key = hp_key(spec.name, hp.name)
    value = shown.get(hp.name, hp.default)
    return {
        "hp": hp,
        "key": key,
        "value": _text(value),
        "checked": value is True or (isinstance(value, str) and value.lower() in ("true", "on", "1")),
        "invalid": key == error_key_,
        "error": error.message if error and key == error_key_ else "",
    }
