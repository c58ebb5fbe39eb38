"""MLflow's tracking protocol under /mlflow (DESIGN §4.8): with MLFLOW_TRACKING_URI=http://HOST/mlflow and
MLFLOW_TRACKING_TOKEN=<Evolab API token>, the unmodified mlflow client (and everything logging through it:
Transformers/TRL, verl, Accelerate, Lightning) creates runs in the user's team and streams their params,
tags and metrics into Evolab. Thin views: parse, call an action (reporting.py), render (mlflow_protocol.py).

Authentication is the API token alone (`Authorization: Bearer KEY`, as the client sends it, or `Token
KEY`): session cookies are not read here, which is why these views need no CSRF token. A request without a token
is UNAUTHENTICATED, and so is one with an invalid token, whatever cookie it sends (the token middleware makes it
anonymous: webapp/accounts/middleware.py)."""
import base64
import binascii
from urllib.parse import quote

from django.http import HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from webapp.runs.models import Run

from . import artifacts, experiments, logged_metrics, reporting
from .experiments import Caller, experiment_json
from .mlflow_protocol import (MAX_BATCH_LOG_REQUEST_SIZE, MAX_ENTITIES_PER_BATCH, MAX_METRICS_PER_BATCH,
                              MAX_PARAM_VALUE_LENGTH, MAX_PARAMS_TAGS_PER_BATCH, MAX_TAG_VALUE_LENGTH, STATUS_OF_STATE,
                              MlflowError, batch_limit, error_response, invalid, invalid_value, key_value_list,
                              metric_json, missing, request_fields, tags_json, text, whole)
from .models import Experiment, ExternalRun
from .search_filter import matches, parse_filter, search_runs

# MLflow's runs/search takes any number of experiments; its other requests that name a list of ids refuse more than
# 100 (GetMetricHistoryBulk's run_ids; SearchDatasets takes 20 experiment_ids), as Databricks' runs/search does. Each
# id was a query here (5,000 took 3.4 s); they are now read in one, and this bounds its list.
MAX_EXPERIMENT_IDS_PER_SEARCH = 100
NOT_STORED = ("Evolab keeps a run's metrics, params, tags and artifacts; it stores no logged models, datasets or "
              "traces. Log those to a store of your own (for example MLflow's own server) and the rest to Evolab.")


# --- experiments -------------------------------------------------------------------------------------


def create_experiment(caller, fields):
    name = text(fields, "name")
    location = text(fields, "artifact_location", required=False, max_length=2000) or ""
    experiment = experiments.create(caller, name, key_value_list(fields, "tags", MAX_PARAMS_TAGS_PER_BATCH,
                                                                 MAX_TAG_VALUE_LENGTH), location)
    return {"experiment_id": str(experiment.pk)}


def get_experiment(caller, fields):
    return {"experiment": experiment_json(caller, experiments.visible(caller, text(fields, "experiment_id")))}


def get_experiment_by_name(caller, fields):
    return {"experiment": experiment_json(caller, experiments.by_name(caller, text(fields, "experiment_name")))}


def search_experiments(caller, fields):
    """MLflow's SearchExperiments: filters on the attributes name, experiment_id, creation_time and last_update_time
    and on tags; ordered by creation_time DESC then experiment_id unless order_by says otherwise. Each of the
    caller's teams has its Default experiment (MLflow's "0"), listed whether or not anything used it yet."""
    view = _view_type(fields, "view_type")
    for team in caller.teams:
        experiments.default_experiment(team)
    found = Experiment.objects.of_teams(caller.team_ids).select_related("team")
    if view != "ALL":
        found = found.filter(lifecycle_stage=Experiment.DELETED if view == "DELETED_ONLY" else Experiment.ACTIVE)
    wanted = (text(fields, "filter", required=False) or "").strip()
    clauses = parse_filter(wanted, allowed=("attributes", "tags"), attributes=EXPERIMENT_ATTRIBUTES) if wanted else []
    rows = [row for row in (experiment_json(caller, e) for e in found)
            if matches(clauses, {k: row[k] for k in EXPERIMENT_ATTRIBUTES}, {}, {},
                       {t["key"]: t["value"] for t in row["tags"]})]
    order_by = fields.get("order_by") or ["creation_time DESC", "experiment_id ASC"]
    if not isinstance(order_by, list) or not all(isinstance(o, str) for o in order_by):
        raise invalid_value("order_by", order_by)
    orders = [_experiment_order(o) for o in order_by]
    if "experiment_id" not in [key for key, _ in orders]:
        orders.append(("experiment_id", False))
    for key, descending in reversed(orders):
        rows.sort(key=lambda row, key=key: int(row[key]) if key != "name" else row[key], reverse=descending)
    return _page(rows, fields, "experiments", 1000)


EXPERIMENT_ATTRIBUTES = ("name", "experiment_id", "creation_time", "last_update_time")


def _experiment_order(clause: str) -> tuple[str, bool]:
    parts = clause.strip().split()
    key = parts[0] if parts else ""
    key = key.split(".", 1)[1] if key.lower().startswith(("attribute.", "attributes.")) else key
    if key not in EXPERIMENT_ATTRIBUTES or len(parts) > 2 or (len(parts) == 2 and parts[1].upper() not in ("ASC", "DESC")):
        raise invalid(f"Invalid order_by clause '{clause}'. Valid keys are {set(EXPERIMENT_ATTRIBUTES)}, each with "
                      f"ASC or DESC")
    return key, len(parts) == 2 and parts[1].upper() == "DESC"


def delete_experiment(caller, fields):
    return _set_experiment_stage(caller, fields, Experiment.DELETED)


def restore_experiment(caller, fields):
    return _set_experiment_stage(caller, fields, Experiment.ACTIVE)


def _experiment_to_change(caller, fields) -> Experiment:
    experiment = experiments.visible(caller, text(fields, "experiment_id"))
    caller.require_member(experiment.team_id)
    return experiment


def _set_experiment_stage(caller, fields, stage):
    experiment = _experiment_to_change(caller, fields)
    experiment.lifecycle_stage = stage
    experiment.save(update_fields=["lifecycle_stage", "updated_at"])
    return {}


def update_experiment(caller, fields):
    experiment = _experiment_to_change(caller, fields)
    team, name = caller.split_name(text(fields, "new_name"))
    if team.pk != experiment.team_id:
        raise invalid("an experiment stays in its team; rename it within it")
    if Experiment.objects.filter(team_id=team.pk, name=name).exclude(pk=experiment.pk).exists():
        raise MlflowError("RESOURCE_ALREADY_EXISTS", f"Experiment '{name}' already exists.")
    experiment.name = name
    experiment.save(update_fields=["name", "updated_at"])
    return {}


def set_experiment_tag(caller, fields):
    experiment = _experiment_to_change(caller, fields)
    (key, value), = key_value_list({"tags": [{"key": fields.get("key"), "value": fields.get("value")}]}, "tags", 1,
                                   MAX_TAG_VALUE_LENGTH)
    experiment.tags[key] = value
    experiment.save(update_fields=["tags", "updated_at"])
    return {}


def delete_experiment_tag(caller, fields):
    experiment = _experiment_to_change(caller, fields)
    experiment.tags.pop(text(fields, "key"), None)
    experiment.save(update_fields=["tags", "updated_at"])
    return {}


# --- runs --------------------------------------------------------------------------------------------


def create_run(caller, fields):
    experiment = experiments.visible(caller, fields.get("experiment_id") or experiments.DEFAULT_EXPERIMENT_ID)
    external = reporting.create_run(
        caller, experiment, name=text(fields, "run_name", required=False),
        user_id=text(fields, "user_id", required=False, free_text=True) or "",
        start_time=whole(fields, "start_time", low=0, high=2**53),
        tags=key_value_list(fields, "tags", MAX_PARAMS_TAGS_PER_BATCH, MAX_TAG_VALUE_LENGTH))
    return {"run": run_json(external, {})}


def get_run(caller, fields):
    external = reporting.find(caller, _run_id(fields))
    return {"run": run_json(external, logged_metrics.latest([external.pk])[external.pk])}


def update_run(caller, fields):
    external = reporting.update_run(caller, reporting.find(caller, _run_id(fields)),
                                    status=text(fields, "status", required=False),
                                    end_time=whole(fields, "end_time", low=0, high=2**53),
                                    run_name=text(fields, "run_name", required=False))
    return {"run_info": info_json(external)}


def delete_run(caller, fields):
    reporting.set_lifecycle(caller, reporting.find(caller, _run_id(fields)), Experiment.DELETED)
    return {}


def restore_run(caller, fields):
    reporting.set_lifecycle(caller, reporting.find(caller, _run_id(fields)), Experiment.ACTIVE)
    return {}


def search(caller, fields):
    ids = fields.get("experiment_ids") or []
    if not isinstance(ids, list) or not ids:
        raise invalid("Missing value for required parameter 'experiment_ids'.")
    if len(ids) > MAX_EXPERIMENT_IDS_PER_SEARCH:
        raise invalid(f"SearchRuns request cannot specify more than {MAX_EXPERIMENT_IDS_PER_SEARCH} experiment_ids. "
                      f"Received {len(ids)} experiment_ids.")
    found = experiments.visible_all(caller, ids)
    max_results = whole(fields, "max_results", default=1000, low=1, high=50000)  # MLflow's threshold
    order_by = fields.get("order_by") or []
    if not isinstance(order_by, list) or not all(isinstance(o, str) for o in order_by):
        raise invalid("order_by must be a list of strings such as 'attributes.start_time DESC'")
    runs, next_token = search_runs(found, text(fields, "filter", required=False) or "",
                                   _view_type(fields, "run_view_type"), order_by, max_results,
                                   text(fields, "page_token", required=False))
    latest = logged_metrics.latest([e.pk for e in runs])
    body = {"runs": [run_json(e, latest[e.pk]) for e in runs]}
    if next_token:
        body["next_page_token"] = next_token
    return body


def log_batch(caller, fields):
    external = reporting.find_to_log(caller, _run_id(fields))
    metrics = fields.get("metrics") or []
    if not isinstance(metrics, list):
        raise invalid_value("metrics", metrics)
    if len(metrics) > MAX_METRICS_PER_BATCH:
        raise batch_limit("metrics", MAX_METRICS_PER_BATCH, len(metrics))
    params = key_value_list(fields, "params", MAX_PARAMS_TAGS_PER_BATCH, MAX_PARAM_VALUE_LENGTH)
    tags = key_value_list(fields, "tags", MAX_PARAMS_TAGS_PER_BATCH, MAX_TAG_VALUE_LENGTH)
    if len(metrics) + len(params) + len(tags) > MAX_ENTITIES_PER_BATCH:
        raise batch_limit("metrics, params, and tags", MAX_ENTITIES_PER_BATCH, len(metrics) + len(params) + len(tags))
    reporting.log_batch(caller, external, metrics, params, tags)
    return {}


def _strings(fields, *names) -> None:
    """MLflow's LogMetric, LogParam and SetTag check their fields' types by these names before anything else
    (mlflow/server/handlers.py); what a string may hold is checked where the batch is read, naming its place."""
    for name in names:
        value = fields.get(name)
        if name == "run_id" and value in (None, "") and fields.get("run_uuid") not in (None, ""):
            value = fields["run_uuid"]
        if value in (None, ""):
            raise invalid(f"Missing value for required parameter '{name}'.")
        if not isinstance(value, str):
            raise invalid_value(name, value)


def log_metric(caller, fields):
    _strings(fields, "run_id", "key")
    if fields.get("value") in (None, ""):
        raise invalid("Missing value for required parameter 'value'.")
    whole(fields, "step")
    if whole(fields, "timestamp") is None:
        raise invalid("Missing value for required parameter 'timestamp'.")
    return log_batch(caller, {"run_id": _run_id(fields), "metrics": [
        {k: fields.get(k) for k in ("key", "value", "timestamp", "step")}]})


def log_parameter(caller, fields):
    _strings(fields, "run_id", "key")
    return log_batch(caller, {"run_id": _run_id(fields), "params": [{"key": fields.get("key"), "value": fields.get("value")}]})


def set_tag(caller, fields):
    _strings(fields, "run_id", "key")
    if not isinstance(fields.get("value"), (str, type(None))):
        raise invalid_value("value", fields.get("value"))
    return log_batch(caller, {"run_id": _run_id(fields), "tags": [{"key": fields.get("key"), "value": fields.get("value")}]})


def delete_tag(caller, fields):
    reporting.delete_tag(caller, reporting.find(caller, _run_id(fields)), text(fields, "key"))
    return {}


def get_metric_history(caller, fields):
    """Every value logged of one metric, as MLflow's server returns them (logged_metrics.py): ordered by timestamp,
    step and value, a page of max_results at a time when asked, written as text (a trainer's dashboard reads long
    histories often)."""
    run_pk = reporting.visible_run_pk(caller, _run_id(fields))
    key = text(fields, "metric_key")
    limit = whole(fields, "max_results", default=None, low=1, high=10**9)
    body = logged_metrics.history_json(run_pk, key, text(fields, "page_token", required=False), limit)
    return HttpResponse(body, content_type="application/json")


def list_artifacts(caller, fields):
    """The tracking API's artifacts/list (a run's files by their path from its artifact root)."""
    external = reporting.find(caller, _run_id(fields))
    listed = artifacts.run_listing(external, text(fields, "path", required=False) or "")
    return {"root_uri": info_json(external)["artifact_uri"], **files_json(listed)}


# MLflow's server (mlflow/server/handlers.py): the run ids of one bulk history request, and the points it returns
MAX_RUN_IDS_PER_HISTORY_BULK, MAX_HISTORY_BULK_RESULTS, MAX_RESULTS_PER_RUN = 100, 25000, 2500


def _visible_run_pks(caller, mlflow_run_ids: list[str]) -> dict[str, int]:
    """{MLflow run id: Evolab run id} of those among the caller's teams' runs; the others are left out silently, as
    MLflow's bulk history leaves out a run it does not have."""
    return dict(Run.objects.filter(mlflow_run_id__in=mlflow_run_ids, team_id__in=caller.team_ids,
                                   source=Run.EXTERNAL).values_list("mlflow_run_id", "pk"))


def get_metric_history_bulk(caller, fields, run_ids: list[str]):
    """MLflow's UI endpoint (ajax-api .../metrics/get-history-bulk?run_id=A&run_id=B&metric_key=K): each run's history
    of the key in MLflow's order, runs by id."""
    if not run_ids:
        raise invalid("GetMetricHistoryBulk request must specify at least one run_id.")
    if len(run_ids) > MAX_RUN_IDS_PER_HISTORY_BULK:
        raise invalid(f"GetMetricHistoryBulk request cannot specify more than {MAX_RUN_IDS_PER_HISTORY_BULK} run_ids. "
                      f"Received {len(run_ids)} run_ids.")
    key = fields.get("metric_key")
    if key is None:
        raise invalid("GetMetricHistoryBulk request must specify a metric_key.")
    limit = min(whole(fields, "max_results", default=MAX_HISTORY_BULK_RESULTS, low=0), MAX_HISTORY_BULK_RESULTS)
    visible = _visible_run_pks(caller, run_ids)
    metrics = []
    for run_id in sorted(set(run_ids) & set(visible)):
        metrics += [metric_json(key, value, timestamp, step) | {"run_id": run_id}
                    for timestamp, step, value in logged_metrics.points(visible[run_id], key, limit=limit)]
    return {"metrics": metrics}


def get_metric_history_bulk_interval(caller, fields, run_ids: list[str]):
    """MLflow's sampled history (ajax-api .../metrics/get-history-bulk-interval?run_ids=A&metric_key=K): at most
    max_results points a run, evenly spaced over its points ordered by step, the first and the last kept
    (mlflow/store/tracking/abstract_store.py _evenly_spaced_indices)."""
    if not run_ids:
        raise invalid("Missing value for required parameter 'run_ids'.")
    if len(run_ids) > MAX_RUN_IDS_PER_HISTORY_BULK:
        raise invalid(f"GetMetricHistoryBulkInterval request must specify at most {MAX_RUN_IDS_PER_HISTORY_BULK} "
                      f"run_ids. Received {len(run_ids)} run_ids.")
    key = text(fields, "metric_key")
    limit = whole(fields, "max_results", default=MAX_RESULTS_PER_RUN)
    if not 1 <= limit <= MAX_RESULTS_PER_RUN:
        raise invalid(f"max_results must be between 1 and {MAX_RESULTS_PER_RUN}.")
    start, end = whole(fields, "start_step"), whole(fields, "end_step")
    if (start is None) != (end is None):
        raise invalid("If either start step or end step are specified, both must be specified.")
    if start is not None and start > end:
        raise invalid(f"end_step must be greater than start_step. Found start_step={start} and end_step={end}.")
    visible = _visible_run_pks(caller, run_ids)
    metrics = []
    for run_id in run_ids:
        if run_id not in visible:
            raise missing(f"Run with id={run_id} not found")
        found = logged_metrics.points(visible[run_id], key, order="step",
                                      steps=(start, end) if start is not None else None)
        metrics += [metric_json(key, value, timestamp, step) | {"run_id": run_id}
                    for timestamp, step, value in (found[i] for i in _evenly_spaced(len(found), limit))]
    return {"metrics": metrics}


def _evenly_spaced(total: int, most: int) -> list[int]:
    """At most `most` evenly spaced indices of `total`, the first and the last included (MLflow's own)."""
    if total <= most:
        return list(range(total))
    if most == 1:
        return [total - 1]
    spacing = (total - 1) / (most - 1)
    return sorted({round(i * spacing) for i in range(most)})


def search_logged_models(caller, fields):
    """Evolab keeps no logged models, so a search of visible experiments finds none: the client asks this before
    it reads a run's artifacts through a runs:/ URI (RunsArtifactRepository), which must not fail for it."""
    ids = fields.get("experiment_ids") or []
    if not isinstance(ids, list):
        raise invalid("experiment_ids must be a list of experiment ids")
    experiments.visible_all(caller, ids[:MAX_EXPERIMENT_IDS_PER_SEARCH])
    return {}


def _page_start(fields) -> int | None:
    token = text(fields, "page_token", required=False)
    if not token:
        return None
    try:
        return int(base64.urlsafe_b64decode(token.encode()).decode())
    except (ValueError, binascii.Error, UnicodeDecodeError):
        raise invalid(f"Invalid page token {token!r}") from None


def _run_id(fields) -> str:
    return text(fields, "run_id", required=False) or text(fields, "run_uuid")


def _view_type(fields, name) -> str:
    value = fields.get(name) or "ACTIVE_ONLY"
    if value in (1, "1"):
        value = "ACTIVE_ONLY"
    elif value in (2, "2"):
        value = "DELETED_ONLY"
    elif value in (3, "3"):
        value = "ALL"
    if value not in ("ACTIVE_ONLY", "DELETED_ONLY", "ALL"):
        raise invalid(f"Invalid value {value!r} for parameter '{name}': ACTIVE_ONLY, DELETED_ONLY or ALL")
    return value


def _page(rows, fields, key, default_max):
    start = int(_page_start(fields) or 0)
    limit = whole(fields, "max_results", default=default_max, low=1, high=50000)
    body = {key: rows[start:start + limit]}
    if start + limit < len(rows):
        body["next_page_token"] = base64.urlsafe_b64encode(str(start + limit).encode()).decode()
    return body


# --- rendering ---------------------------------------------------------------------------------------


def files_json(entries: list[tuple[str, bool, int | None]]) -> dict:
    """MLflow's ListArtifacts answer: FileInfo {path, is_dir, file_size (files only)}; none at all is `{}`, as
    protobuf's JSON leaves out an empty list."""
    files = [{"path": name, "is_dir": is_dir, **({} if size is None else {"file_size": size})}
             for name, is_dir, size in entries]
    return {"files": files} if files else {}


def info_json(external: ExternalRun) -> dict:
    run = external.run
    info = {"run_id": run.mlflow_run_id, "run_uuid": run.mlflow_run_id, "run_name": run.name,
            "experiment_id": str(external.experiment_id), "user_id": external.user_id,
            "status": STATUS_OF_STATE[run.state], "start_time": external.start_time,
            "artifact_uri": f"{external.experiment.artifact_root}/{run.mlflow_run_id}/artifacts",
            "lifecycle_stage": external.lifecycle_stage}
    if external.end_time is not None and run.is_terminal:
        info["end_time"] = external.end_time
    return info


def run_json(external: ExternalRun, latest: dict) -> dict:
    tags = {**external.tags, reporting.RUN_NAME_TAG: external.run.name, reporting.RUN_ID_TAG: str(external.pk)}
    return {
        "info": info_json(external),
        "data": {"metrics": [metric_json(name, value, when, step) for name, (step, value, when) in sorted(latest.items())],
                 "params": tags_json(external.params), "tags": tags_json(tags)},
        "inputs": {},
    }


# --- dispatch ----------------------------------------------------------------------------------------

ENDPOINTS = {
    ("POST", "experiments/create"): create_experiment,
    ("GET", "experiments/get"): get_experiment,
    ("GET", "experiments/get-by-name"): get_experiment_by_name,
    ("POST", "experiments/search"): search_experiments,
    ("GET", "experiments/search"): search_experiments,
    ("POST", "experiments/delete"): delete_experiment,
    ("POST", "experiments/restore"): restore_experiment,
    ("POST", "experiments/update"): update_experiment,
    ("POST", "experiments/set-experiment-tag"): set_experiment_tag,
    ("POST", "experiments/delete-experiment-tag"): delete_experiment_tag,
    ("POST", "runs/create"): create_run,
    ("GET", "runs/get"): get_run,
    ("POST", "runs/update"): update_run,
    ("POST", "runs/delete"): delete_run,
    ("POST", "runs/restore"): restore_run,
    ("POST", "runs/search"): search,
    ("POST", "runs/log-batch"): log_batch,
    ("POST", "runs/log-metric"): log_metric,
    ("POST", "runs/log-parameter"): log_parameter,
    ("POST", "runs/set-tag"): set_tag,
    ("POST", "runs/delete-tag"): delete_tag,
    ("GET", "metrics/get-history"): get_metric_history,
    ("GET", "artifacts/list"): list_artifacts,
    ("POST", "logged-models/search"): search_logged_models,
    ("GET", "metrics/get-history-bulk"): get_metric_history_bulk,
    ("GET", "metrics/get-history-bulk-interval"): get_metric_history_bulk_interval,
}
# Endpoints of MLflow's protocol about things Evolab does not keep: a clear error, never a crash.
NOT_STORED_PREFIXES = ("runs/log-model", "runs/log-inputs", "runs/outputs", "logged-models",
                       "traces", "model-versions", "registered-models")


def _caller(request) -> Caller:
    """The API token's user, or UNAUTHENTICATED: only the token authenticates here (module docstring)."""
    if not getattr(request, "token_auth_attempted", False):
        raise MlflowError("UNAUTHENTICATED", "send an Evolab API token: MLFLOW_TRACKING_TOKEN=<token> (or "
                                             "'Authorization: Bearer <token>'); manage.py create_api_token USER "
                                             "prints one")
    if not request.user.is_authenticated:
        raise MlflowError("UNAUTHENTICATED", "the API token is not valid")
    return Caller.of(request.user)


@csrf_exempt
def mlflow_api(request, endpoint: str):
    try:
        caller = _caller(request)
    except MlflowError as exc:
        return exc.response()
    handler = ENDPOINTS.get((request.method, endpoint))
    if handler is None:
        if endpoint.startswith(NOT_STORED_PREFIXES):
            return error_response("NOT_IMPLEMENTED", NOT_STORED)
        if any(path == endpoint for _, path in ENDPOINTS):
            return JsonResponse({"error_code": "BAD_REQUEST", "message": f"{request.method} is not allowed for "
                                                                         f"{endpoint}"}, status=405)
        return error_response("ENDPOINT_NOT_FOUND", f"Evolab's MLflow protocol has no endpoint {endpoint!r}")
    if endpoint == "runs/log-batch" and len(request.body) > MAX_BATCH_LOG_REQUEST_SIZE:
        return error_response("INVALID_PARAMETER_VALUE", f"Batched logging API requests must be at most "
                                                         f"{MAX_BATCH_LOG_REQUEST_SIZE} bytes, got a request of size "
                                                         f"{len(request.body)}.")
    try:
        if handler in (get_metric_history_bulk, get_metric_history_bulk_interval):  # repeated query parameters
            run_ids = request.GET.getlist("run_id" if handler is get_metric_history_bulk else "run_ids")
            answer = handler(caller, request_fields(request), [r for r in run_ids if r])
        else:
            answer = handler(caller, request_fields(request))
        return answer if isinstance(answer, HttpResponse) else JsonResponse(answer)
    except MlflowError as exc:
        return exc.response()


@csrf_exempt
def artifact_service(request, path: str = ""):
    """MLflow's artifact service as the client calls it for a run's mlflow-artifacts:/ URI (artifacts.py): PUT a
    file, GET a file, GET the root with ?path= to list a directory, DELETE a file or directory."""
    try:
        caller = _caller(request)
        if request.method == "GET" and not path:
            return JsonResponse(files_json(artifacts.listing(caller, request.GET.get("path") or "")))
        if request.method == "GET":
            return _file_response(artifacts.download(caller, path))
        if request.method == "PUT" and path:
            length = request.META.get("CONTENT_LENGTH")
            artifacts.upload(caller, path, request, int(length) if length and length.isdigit() else None)
            return JsonResponse({})
        if request.method == "DELETE" and path:
            artifacts.delete(caller, path)
            return JsonResponse({})
        return JsonResponse({"error_code": "BAD_REQUEST", "message": f"{request.method} is not allowed here"},
                            status=405)
    except MlflowError as exc:
        return exc.response()


def _file_response(artifact) -> HttpResponse:
    """The file's bytes as stored, to be saved, never shown: the client writes them to disk, and a browser must not
    run an uploaded page under Evolab's origin."""
    response = HttpResponse(bytes(artifact.content), content_type="application/octet-stream")
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(artifact.path.rsplit('/', 1)[-1])}"
    response["X-Content-Type-Options"] = "nosniff"
    return response


@csrf_exempt
def get_artifact(request):
    """/mlflow/get-artifact?run_id=R&path=P, the download link of MLflow's UI."""
    try:
        caller = _caller(request)
        external = reporting.find(caller, request.GET.get("run_id") or request.GET.get("run_uuid") or "")
        return _file_response(artifacts.run_file(external, request.GET.get("path") or ""))
    except MlflowError as exc:
        return exc.response()


@csrf_exempt
def not_stored(request, path: str = ""):
    """The parts of MLflow's artifact service Evolab does not keep (multipart uploads of files past its limit)."""
    return error_response("NOT_IMPLEMENTED", NOT_STORED)


@csrf_exempt
def unknown(request, path: str):
    return error_response("ENDPOINT_NOT_FOUND", f"Evolab's MLflow protocol has nothing at /mlflow/{path}")
