from functools import wraps

from django.http import JsonResponse

from rl.methods import METHODS
from webapp.api import api_view, error, json_body
from webapp.prompts.models import PromptSet

from .actions import RunInputError, cancel_run, clone_run, launch_run, resume_run
from .models import Group, Run
from .queries import group_steps, groups_at, metric_series


def with_run(view):
    """Look the run up once for every /api/runs/{id}/... view: a JSON 404 when it is missing."""

    @wraps(view)
    def wrapper(request, pk, *args, **kwargs):
        run = Run.objects.select_related("created_by").filter(pk=pk).first()
        if run is None:
            return error(f"no run with id {pk}", 404)
        return view(request, run, *args, **kwargs)

    return wrapper


@api_view(["GET"])
def methods(request):
    return JsonResponse({"methods": [m.to_json() for m in METHODS.values()]})


@api_view(["GET", "POST"])
def runs(request):
    if request.method == "GET":
        return JsonResponse({"runs": [r.to_json() for r in Run.objects.select_related("created_by")[:500]]})
    try:
        data = json_body(request)
    except ValueError as exc:
        return error(str(exc))
    for field in ("name", "method", "prompt_set"):
        if data.get(field) in (None, ""):
            return error(f"'{field}' is required", field=field)
    try:
        prompt_set = PromptSet.objects.filter(pk=int(data["prompt_set"])).first()
    except (TypeError, ValueError):
        prompt_set = None
    if prompt_set is None:
        return error(f"no prompt set with id {data['prompt_set']!r}", field="prompt_set")
    hyperparameters = data.get("hyperparameters") or {}
    if not isinstance(hyperparameters, dict):
        return error("'hyperparameters' must be an object of name → value", field="hyperparameters")
    try:
        run = launch_run(
            user=request.user,
            name=str(data["name"]),
            method=str(data["method"]),
            prompt_set=prompt_set,
            model=str(data.get("model") or "default"),
            hyperparameters=hyperparameters,
            max_steps=data.get("max_steps"),
            seed=data.get("seed", 0),
            gpus=data.get("gpus"),
        )
    except RunInputError as exc:
        return error(str(exc), field=exc.field)
    return JsonResponse(run.to_json(), status=201)


@api_view(["GET"])
@with_run
def run_detail(request, run):
    return JsonResponse(run.to_json())


def _action(act):
    @api_view(["POST"])
    @with_run
    def view(request, run):
        try:
            result = act(request, run)
        except RunInputError as exc:
            return error(str(exc), 409 if exc.field == "state" else 400, field=exc.field)
        except ValueError as exc:  # an unreadable request body
            return error(str(exc))
        return JsonResponse(result.to_json(), status=201 if result.pk != run.pk else 200)

    return view


run_cancel = _action(lambda request, run: cancel_run(run))
run_resume = _action(lambda request, run: resume_run(run))
run_clone = _action(lambda request, run: clone_run(run, user=request.user, name=json_body(request).get("name")))


@api_view(["GET"])
@with_run
def run_metrics(request, run):
    names = [n for n in request.GET.get("names", "").split(",") if n]
    return JsonResponse({"run": run.pk, "metrics": metric_series(run, names or None)})


@api_view(["GET"])
@with_run
def run_rollouts(request, run):
    step = request.GET.get("step")
    if step not in (None, ""):
        try:
            step = int(step)
        except ValueError:
            return error(f"step must be a whole number, not {step!r}", field="step")
    else:
        step = None
    step, groups = groups_at(run, step, request.GET.get("prompt") or None)
    return JsonResponse(
        {
            "run": run.pk,
            "step": step,
            "steps": group_steps(run),
            "groups": [
                {**g.summary_json(), "rollouts": [r.to_json() for r in g.rollouts.all()]} for g in groups
            ],
        }
    )


@api_view(["GET"])
@with_run
def run_group(request, run, step, prompt_id):
    group = Group.objects.filter(run=run, step=step, prompt_id=prompt_id).order_by("-seq").first()
    if group is None:
        return error(f"run {run.pk} has no group for prompt {prompt_id!r} at step {step}", 404)
    return JsonResponse(
        {**group.summary_json(), "similarity": group.similarity, "rollouts": [r.to_json() for r in group.rollouts.all()]}
    )


@api_view(["GET"])
@with_run
def run_rzero_questions(request, run, iteration):
    if iteration not in run.rzero_iterations():
        return error(f"run {run.pk} has no R-Zero question set for iteration {iteration}", 404)
    return JsonResponse({"run": run.pk, "iteration": iteration, "questions": run.rzero_questions(iteration)})
