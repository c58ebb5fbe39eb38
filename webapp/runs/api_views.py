from functools import wraps

from django.http import HttpResponse, JsonResponse

from rl.methods import METHODS
from webapp.alerts.models import Alert
from webapp.api import api_view, error, json_body
from webapp.metrics import series
from webapp.numbers import is_whole_number, whole_number

from .actions import cancel_run, clone_run, delete_run, launch_run, resume_run, update_run
from .launch_request import LaunchRequest
from .models import Run, RunTransition
from .queries import live_state, metric_series_of_runs
from .queue_place import place_of


def with_run(view):
    """Look the run up once for every /api/runs/{id}/... view: a JSON 404 when it is
    missing or belongs to a team the user is not in (the two answer alike)."""

    @wraps(view)
    def wrapper(request, pk, *args, **kwargs):
        run = Run.objects.visible_to(request.user).select_related("created_by").filter(pk=pk).first()
        if run is None:
            return error(f"no run with id {pk}", 404)
        return view(request, run, *args, **kwargs)

    return wrapper


def with_run_id(view):
    """with_run for views that need only the run's id: the same 404, one short query."""

    @wraps(view)
    def wrapper(request, pk, *args, **kwargs):
        run_id = Run.objects.visible_id(request.user, pk)
        if run_id is None:
            return error(f"no run with id {pk}", 404)
        return view(request, run_id, *args, **kwargs)

    return wrapper


@api_view(["GET"])
def methods(request):
    return JsonResponse({"methods": [m.to_json() for m in METHODS.values()]})


@api_view(["GET", "POST"])
def runs(request):
    if request.method == "GET":
        runs = Run.objects.visible_to(request.user).select_related("created_by")
        return JsonResponse({"runs": [r.to_json() for r in runs[:500]]})
    run = launch_run(LaunchRequest.from_json(json_body(request)), user=request.user)
    return JsonResponse(run.to_json(), status=201)


@api_view(["GET", "PATCH", "DELETE"])
@with_run
def run_detail(request, run):
    """A run; PATCH changes its name, notes, tags or archived; DELETE removes an ended run and its files."""
    if request.method == "PATCH":
        run = update_run(run, request.user, json_body(request))
    elif request.method == "DELETE":
        delete_run(run, request.user)
        return JsonResponse({"deleted": run.pk})
    # a long batch's steps wait for the alert rules here (webapp/alerts/engine.py, judge_backlog): from this step on
    # they are charted but not judged yet
    backlog = run.rule_backlog.first_step if hasattr(run, "rule_backlog") else None
    place = place_of(run, request.user)  # a queued run's place in its worker queue (webapp/runs/queue_place.py)
    return JsonResponse({**run.to_json(), "alerts_pending_from_step": backlog,
                         "queue_place": place.to_json() if place else None})


def _action(act):
    @api_view(["POST"])
    @with_run
    def view(request, run):
        result = act(request, run)
        return JsonResponse(result.to_json(), status=201 if result.pk != run.pk else 200)

    return view


run_cancel = _action(lambda request, run: cancel_run(run, request.user))
run_resume = _action(lambda request, run: resume_run(run, request.user))
run_clone = _action(lambda request, run: clone_run(run, user=request.user, name=json_body(request).get("name")))


def _series_params(request):
    """names, since_step and max_points of the metrics and compare APIs (DESIGN §4.6),
    or the 400 response naming the field that is wrong."""
    names = [n for n in request.GET.get("names", "").split(",") if n] or None
    numbers = {}
    for field in ("since_step", "max_points"):
        text = request.GET.get(field, "").strip()
        if text == "":
            numbers[field] = None
            continue
        try:
            numbers[field] = int(text)
        except ValueError:
            return None, error(f"{field} must be a whole number, not {text!r}", field=field)
    if numbers["max_points"] is not None and numbers["max_points"] < 2:
        return None, error("max_points must be at least 2 (each bucket keeps its min and max)", field="max_points")
    return {"names": names, **numbers}, None


@api_view(["GET"])
@with_run
def run_alerts(request, run):
    return JsonResponse({"alerts": Alert.of_run_json(run)})


@api_view(["GET"])
@with_run
def run_live_state(request, run):
    """The parts of the run page that live messages grow, as the page opens with them (queries.live_state)."""
    return JsonResponse({"run": run.pk, **live_state(run)})


@api_view(["GET"])
@with_run_id
def run_transitions(request, run_id):
    """The run's history, newest first: `limit` rows (1 to 1,000, default 100) before the row `before`."""
    numbers = {}
    for name, default, high in (("limit", 100, MAX_TRANSITIONS), ("before", None, None)):
        text = request.GET.get(name, "")
        value = whole_number(text) if text else default
        if text and (value is None or value < 1 or (high is not None and value > high)):
            return error(f"{name} must be a whole number{f' from 1 to {high:,}' if high else ' above 0'}, not {text!r}",
                         field=name)
        numbers[name] = value
    rows, next_before = RunTransition.page(run_id, numbers["before"], numbers["limit"])
    return JsonResponse({"run": run_id, "results": [row.to_json() for row in rows], "next_before": next_before})


MAX_TRANSITIONS = 1000


@api_view(["GET"])
@with_run_id
def run_metrics(request, run_id):
    params, problem = _series_params(request)
    if problem:
        return problem
    if params["max_points"] is None:  # full fidelity: closed chunks are sent as they were rendered
        body = series.read_json(run_id, params["names"], params["since_step"])
        return HttpResponse(f'{{"run":{run_id},"metrics":{body}}}', content_type="application/json")
    return JsonResponse({"run": run_id, "metrics": metric_series_of_runs([run_id], **params)[run_id]})


@api_view(["GET"])
@with_run
def run_rzero_questions(request, run, iteration):
    if iteration not in run.rzero_iterations():
        return error(f"run {run.pk} has no R-Zero question set for iteration {iteration}", 404)
    return JsonResponse({"run": run.pk, "iteration": iteration, "questions": run.rzero_questions(iteration)})


MAX_COMPARED_RUNS = 10


@api_view(["GET"])
def compare(request):
    """GET /api/compare?runs=1,2,3&names=a,b (DESIGN §4.6): the metric series of several
    runs for overlay charts. Every run is checked for access: one the user may not see
    answers 404 exactly like one that does not exist."""
    ids, problem = parse_run_ids(request.GET.getlist("runs"))
    if problem:
        return error(problem, field="runs")
    params, problem = _series_params(request)
    if problem:
        return problem
    visible = {r.pk: r for r in Run.objects.visible_to(request.user).select_related("created_by", "team").filter(pk__in=ids)}
    for pk in ids:
        if pk not in visible:
            return error(f"no run with id {pk}", 404)
    runs = [visible[pk] for pk in ids]
    found = metric_series_of_runs(ids, **params)
    return JsonResponse({
        "runs": [{**r.to_json(), "team_name": r.team.name} for r in runs],
        "metrics": {str(pk): found[pk] for pk in ids},
    })


def parse_run_ids(values) -> tuple[list[int], str | None]:
    """Run ids from ?runs=1,2,3 (or repeated ?runs=), in order without repeats, or an
    error message: none, not whole numbers, or more than MAX_COMPARED_RUNS."""
    ids = []
    for part in ",".join(values).split(","):
        part = part.strip()
        if not part:
            continue
        if not is_whole_number(part):
            return [], f"runs must be run ids separated by commas, not {part!r}"
        if int(part) not in ids:
            ids.append(int(part))
    if not ids:
        return [], "say which runs to compare: runs=1,2,3"
    if len(ids) > MAX_COMPARED_RUNS:
        return [], f"at most {MAX_COMPARED_RUNS} runs can be compared at once, not {len(ids)}"
    return ids, None
