"""Action functions of a run trained elsewhere (DESIGN §4.8): the one place each thing its trainer reports is
written. Metrics are kept as MLflow keeps them and charted by a worker through ingestion like any run's
(charting.py; webapp/runs/ingestion.py: series, alert rules, live messages); the run's state goes through its
lifecycle (webapp/runs/lifecycle.py). Each action checks everything it was given before it writes anything, so a
bad request leaves nothing half written."""
import time
import uuid
from datetime import datetime, timezone as utc_zone

from django.db import transaction
from django.utils import timezone

from rl.answer_rules import answer_rule
from rl.methods import METHODS
from rl.trainer_metrics import TRAINERS
from webapp.accounts.models import Membership
from webapp import bulk
from webapp.runs import lifecycle
from webapp.runs.models import Run

from . import charting, logged_metrics
from .experiments import Caller
from .mlflow_protocol import (MAX_RUN_NAME_LENGTH, STATE_OF_STATUS, MlflowError, entity_key, invalid, missing,
                              number)
from .models import Experiment, ExternalRun

# MLflow takes any 64-bit step; the charts hold fewer (charting.CHART_STEPS): the others are kept for get-history
# alone (logged_metrics.py)
STEP_RANGE = (-(2**63), 2**63 - 1)
# Tags Evolab reads (docs/external-runs.md); evolab.run_id is written by Evolab alone.
RUN_NAME_TAG, METHOD_TAG, ANSWER_RULE_TAG, TRAINER_TAG, RUN_ID_TAG = (
    "mlflow.runName", "evolab.method", "evolab.answer_rule", "evolab.trainer", "evolab.run_id")


def find(caller: Caller, mlflow_run_id) -> ExternalRun:
    """The external run of that MLflow id in the caller's teams (a deleted one too, as MLflow finds it);
    RESOURCE_DOES_NOT_EXIST for a missing run and for another team's alike (DESIGN §4.4)."""
    run_id = str(mlflow_run_id or "").strip()
    found = (ExternalRun.objects.select_related("run", "experiment")
             .filter(run__mlflow_run_id=run_id, run__team_id__in=caller.team_ids).first()) if run_id else None
    if found is None:
        raise missing(f"Run with id={run_id} not found")
    return found


def find_to_log(caller: Caller, mlflow_run_id) -> ExternalRun:
    """find() for the logging path, in one fixed statement: the run (its row, as ingestion reads it), whether it is
    deleted, and the caller's role in its team (a trainer logs a step at a time: compiling find's query and asking
    for the role apart took longer than storing the step). Params and tags are read again where they are written."""
    run_id = str(mlflow_run_id or "").strip()
    found = list(Run.objects.raw(
        f"SELECT r.*, m.role AS caller_role, e.lifecycle_stage AS external_stage, e.experiment_id AS external_experiment "
        f"FROM {Run._meta.db_table} r JOIN {ExternalRun._meta.db_table} e ON e.run_id = r.id "
        f"JOIN {Membership._meta.db_table} m ON m.team_id = r.team_id AND m.user_id = %s WHERE r.mlflow_run_id = %s",
        [caller.user.pk, run_id])) if run_id else []
    if not found:
        raise missing(f"Run with id={run_id} not found")
    run = found[0]
    if not Membership.allows(run.caller_role, Membership.MEMBER):
        caller.require_member(run.team_id)  # raises PERMISSION_DENIED naming the team and role
    external = ExternalRun(run=run, experiment_id=run.external_experiment, lifecycle_stage=run.external_stage)
    external.role_checked = True
    return external


def visible_run_pk(caller: Caller, mlflow_run_id) -> int:
    """The id of the external run of that MLflow id in the caller's teams, in one fixed statement (the history
    read answers in a few milliseconds); RESOURCE_DOES_NOT_EXIST as find() says it."""
    run_id = str(mlflow_run_id or "").strip()
    rows = bulk.fetch(f"SELECT r.id FROM {Run._meta.db_table} r WHERE r.mlflow_run_id = %s AND r.team_id IN "
                      f"(SELECT m.team_id FROM {Membership._meta.db_table} m WHERE m.user_id = %s)",
                      [run_id, caller.user.pk]) if run_id else []
    if not rows:
        raise missing(f"Run with id={run_id} not found")
    return rows[0][0]


def create_run(caller: Caller, experiment: Experiment, *, name: str | None, user_id: str, start_time: int | None,
               tags: list[tuple[str, str]]) -> ExternalRun:
    if experiment.lifecycle_stage == Experiment.DELETED:
        raise MlflowError("INVALID_STATE", f"The experiment {experiment.pk} must be in the 'active' state.")
    caller.require_member(experiment.team_id)
    tags = dict(tags)
    name = name or tags.get(RUN_NAME_TAG) or _generated_name()
    if len(name) > MAX_RUN_NAME_LENGTH:
        raise invalid(f"run_name is {len(name)} characters long; at most {MAX_RUN_NAME_LENGTH}.")
    _check_tags(tags)
    tags[RUN_NAME_TAG] = name
    started = _moment(start_time) or timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            name=name, method=_method(tags), team_id=experiment.team_id, source=Run.EXTERNAL,
            mlflow_run_id=uuid.uuid4().hex, trainer=_trainer(tags, ""), prompt_set=None, model="", max_steps=0,
            queue="", created_by=caller.user, state=Run.QUEUED, hyperparameters={},
        )
        external = ExternalRun.objects.create(run=run, experiment=experiment, user_id=user_id[:200], tags=tags,
                                              start_time=int(started.timestamp() * 1000))
        lifecycle.report_running(run, caller.user, started)
    run.refresh_from_db()
    return external


def _moment(millis: int | None):
    return datetime.fromtimestamp(millis / 1000, tz=utc_zone.utc) if millis else None


def _generated_name() -> str:
    return f"run-{uuid.uuid4().hex[:8]}"


def _method(tags: dict) -> str:
    value = tags.get(METHOD_TAG, "")
    return value if value in METHODS else ""


def _trainer(tags: dict, current: str) -> str:
    value = tags.get(TRAINER_TAG, "")
    return value if value in TRAINERS else current


def _check_tags(tags: dict) -> None:
    if RUN_ID_TAG in tags:
        raise invalid(f"the tag {RUN_ID_TAG} is Evolab's own (the run's id in Evolab); it cannot be set")
    if tags.get(ANSWER_RULE_TAG):
        try:
            answer_rule(tags[ANSWER_RULE_TAG])
        except ValueError as exc:
            raise invalid(f"tag {ANSWER_RULE_TAG}: {exc}") from None
    if tags.get(METHOD_TAG) and tags[METHOD_TAG] not in METHODS:
        raise invalid(f"tag {METHOD_TAG}: unknown method {tags[METHOD_TAG]!r}: expected one of {', '.join(METHODS)}")


# --- metrics, params and tags -------------------------------------------------------------------------


def log_batch(caller: Caller, external: ExternalRun, metrics: list, params: list[tuple[str, str]],
              tags: list[tuple[str, str]]) -> None:
    """MLflow's log-batch (log-metric, log-parameter and set-tag are batches of one)."""
    _check_active(external)
    if not getattr(external, "role_checked", False):
        caller.require_member(external.run.team_id)
    points = [_metric(m, i) for i, m in enumerate(metrics)]
    tag_values = dict(tags)
    _check_tags(tag_values)
    if params or tags:
        _write_params_and_tags(external, params, tag_values)
    if points:
        _keep_points(external, points)


def _check_active(external: ExternalRun) -> None:
    """MLflow's refusal to change a deleted run (its SqlAlchemyStore._check_run_is_active), in its words."""
    if external.lifecycle_stage != Experiment.ACTIVE:
        raise invalid(f"The run {external.run.mlflow_run_id} must be in the 'active' state. "
                      f"Current state is {external.lifecycle_stage}.")


def _metric(item, i: int) -> tuple[str, float, int, int]:
    """(key, value, timestamp in ms, step) of one metric of a batch, or INVALID_PARAMETER_VALUE naming it."""
    if not isinstance(item, dict):
        raise invalid(f"metrics[{i}] must be an object {{key, value, timestamp, step}}")
    key = entity_key(item.get("key"), f"metrics[{i}].key")
    value = number(item.get("value"), f"metric '{key}' (metrics[{i}].value)")
    step = _whole(item.get("step", 0), f"metric '{key}' step", *STEP_RANGE)
    if item.get("timestamp") in (None, ""):  # MLflow's LogBatch requires it (mlflow/server/handlers.py)
        raise invalid(f"Missing value for required parameter 'metrics[{i}].timestamp'.")
    timestamp = _whole(item.get("timestamp"), f"metric '{key}' timestamp", 0, 2**53)
    return key, value, timestamp, step


def _whole(value, what: str, low: int, high: int) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit() and value.isascii() and len(value) <= 20:
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(f"{what} is {value!r}: it must be a whole number")
    if not low <= value <= high:
        raise invalid(f"{what} is {value}: it must be between {low} and {high}")
    return value


def _write_params_and_tags(external: ExternalRun, params, tags: dict) -> None:
    with transaction.atomic():
        current = ExternalRun.objects.select_for_update().select_related("run").get(pk=external.pk)
        for key, value in params:
            stored = current.params.get(key)
            if stored is not None and stored != value:  # MLflow's rule: a param is written once
                raise invalid(f"Changing param values is not allowed. Param with key='{key}' was already logged "
                              f"with value='{stored}' for run ID='{current.run.mlflow_run_id}'. Attempted logging new "
                              f"value '{value}'.")
            current.params[key] = value
        current.tags.update(tags)
        current.save(update_fields=["params", "tags"])
        run_updates = _run_fields_from(current)
        if run_updates:
            Run.objects.filter(pk=current.pk).update(**run_updates)
            if "name" in run_updates:
                lifecycle.announce(current.pk)
    external.params, external.tags = current.params, current.tags


def _run_fields_from(external: ExternalRun) -> dict:
    """What the run's params and tags say of the run itself: its name, its method, and the figures the alert
    rules and the page read (max_completion_length: a length pinned at the limit; the planned steps)."""
    run, updates = external.run, {}
    name = external.tags.get(RUN_NAME_TAG)
    if name and name != run.name:
        updates["name"] = name[:MAX_RUN_NAME_LENGTH]
    method = _method(external.tags)
    if method != run.method and external.tags.get(METHOD_TAG):
        updates["method"] = method
    trainer = _trainer(external.tags, run.trainer)
    if trainer != run.trainer:
        updates["trainer"] = trainer
    hyperparameters = dict(run.hyperparameters)
    for setting, keys in PARAM_SETTINGS.items():
        value = _first_whole(external.params, keys)
        if value is not None:
            hyperparameters[setting] = value
    if hyperparameters != run.hyperparameters:
        updates["hyperparameters"] = hyperparameters
    steps = _first_whole(external.params, PLANNED_STEPS)
    if steps is not None and steps != run.max_steps:
        updates["max_steps"] = steps
    return updates


# Params of known trainers that say what the rules and pages need (TRL's GRPOConfig, verl's config flattened
# with "/" by its MLflow logger, or with "." as Transformers' callback flattens).
PARAM_SETTINGS = {
    "max_completion_length": ("max_completion_length", "data/max_response_length", "data.max_response_length"),
    "n_votes": ("num_generations", "actor_rollout_ref/rollout/n", "actor_rollout_ref.rollout.n"),
}
PLANNED_STEPS = ("max_steps", "trainer/total_training_steps", "trainer.total_training_steps")


def _first_whole(params: dict, keys) -> int | None:
    for key in keys:
        text = str(params.get(key, "")).strip()
        if text.isdigit() and text.isascii() and 0 < int(text) < 2**31:
            return int(text)
    return None


def _keep_points(external: ExternalRun, points: list[tuple[str, float, int, int]]) -> None:
    """Keep every point as MLflow does (logged_metrics.record: what get-history, runs/get and runs/search return,
    at once) and ask a worker to chart the new ones (charting.py: each step's latest value, through ingestion like
    any run's metrics; a step logged again by a resumed run, or an asynchronous client's batch arriving late, shows
    its later value)."""
    if logged_metrics.record(external.run.pk, points, charting.CHART_STEPS):
        transaction.on_commit(lambda: charting.request(external.run))


def delete_tag(caller: Caller, external: ExternalRun, key: str) -> None:
    caller.require_member(external.run.team_id)
    _check_active(external)
    with transaction.atomic():
        current = ExternalRun.objects.select_for_update().get(pk=external.pk)
        if key not in current.tags:
            raise missing(f"No tag with name: {key} in run with id {external.run.mlflow_run_id}")
        del current.tags[key]
        current.save(update_fields=["tags"])


# --- the run's state -----------------------------------------------------------------------------------


def update_run(caller: Caller, external: ExternalRun, *, status: str | None, end_time: int | None,
               run_name: str | None) -> ExternalRun:
    """MLflow's runs/update: a new name and/or status. FINISHED, FAILED and KILLED end the run (succeeded,
    failed with the run_failed alert, cancelled); RUNNING after an end means the trainer goes on."""
    caller.require_member(external.run.team_id)
    if status is not None and status not in STATE_OF_STATUS:
        raise invalid(f"Invalid value {status!r} for parameter 'status': expected one of "
                      f"{', '.join(sorted(STATE_OF_STATUS))}")
    if run_name is not None:
        if len(run_name) > MAX_RUN_NAME_LENGTH:
            raise invalid(f"run_name is {len(run_name)} characters long; at most {MAX_RUN_NAME_LENGTH}.")
        _write_params_and_tags(external, [], {RUN_NAME_TAG: run_name})
    run = Run.objects.get(pk=external.pk)
    state = STATE_OF_STATUS.get(status)
    if state is not None and state != run.state:
        if state in Run.TERMINAL:
            ended = _moment(end_time)
            lifecycle.finish(run, state, _end_message(state, external), exit_code=None, stderr_tail="",
                             finished_at=ended)
            ExternalRun.objects.filter(pk=external.pk).update(end_time=end_time or int(time.time() * 1000))
        elif state == Run.RUNNING:
            lifecycle.report_running(run, caller.user)
        else:
            raise invalid(f"a run cannot go back to {status}")
    external.refresh_from_db()
    external.run.refresh_from_db()
    return external


def _end_message(state: str, external: ExternalRun) -> str:
    by = f" ({external.run.trainer})" if external.run.trainer else ""
    return {Run.SUCCEEDED: f"its trainer{by} reported it finished", Run.FAILED: f"its trainer{by} reported it failed",
            Run.CANCELLED: f"its trainer{by} reported it killed"}[state]


def set_lifecycle(caller: Caller, external: ExternalRun, stage: str) -> None:
    """runs/delete and runs/restore: a deleted run leaves every page and list (kept, as MLflow keeps it)."""
    caller.require_member(external.run.team_id)
    ExternalRun.objects.filter(pk=external.pk).update(lifecycle_stage=stage)
    Run.objects.filter(pk=external.pk).update(deleted_at=timezone.now() if stage == Experiment.DELETED else None)
    external.lifecycle_stage = stage
