from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from rl.methods import METHODS
from webapp.prompts.models import PromptSet

from .actions import RunInputError, cancel_run, clone_run, launch_run, resume_run
from .health import check
from .models import Run
from .queries import chart_metrics, group_steps, groups_at, metric_series, stage_events


@login_required
def run_list(request):
    return render(request, "runs/list.html", {"runs": Run.objects.select_related("prompt_set", "created_by")[:200]})


def _hyperparameters_from_form(method, post):
    """Read the selected method's fields (named hp-METHOD-NAME). An unticked checkbox
    sends nothing, so booleans are read as presence."""
    values = {}
    for hp in METHODS[method].hyperparameters:
        key = f"hp-{method}-{hp.name}"
        if hp.type == "bool":
            values[hp.name] = key in post
        elif post.get(key, "") != "":
            values[hp.name] = post[key]
    return values


@login_required
def run_new(request):
    prompt_sets = PromptSet.objects.all()
    form = {
        "name": request.POST.get("name", ""),
        "prompt_set": request.POST.get("prompt_set") or request.GET.get("prompt_set", ""),
        "method": request.POST.get("method") or request.GET.get("method", "ttrl"),
        "model": request.POST.get("model", "default"),
        "max_steps": request.POST.get("max_steps", "20"),
        "seed": request.POST.get("seed", "0"),
        "gpus": request.POST.get("gpus", ""),
    }
    error = field = None
    if request.method == "POST":
        prompt_set = PromptSet.objects.filter(pk=form["prompt_set"] or 0).first() if str(form["prompt_set"]).isdigit() else None
        if prompt_set is None:
            error, field = "Choose a prompt set.", "prompt_set"
        elif form["method"] not in METHODS:
            error, field = f"Unknown method {form['method']!r}.", "method"
        else:
            try:
                run = launch_run(
                    user=request.user,
                    name=form["name"],
                    method=form["method"],
                    prompt_set=prompt_set,
                    model=form["model"],
                    hyperparameters=_hyperparameters_from_form(form["method"], request.POST),
                    max_steps=form["max_steps"],
                    seed=form["seed"],
                    gpus=form["gpus"],
                )
            except RunInputError as exc:
                error, field = str(exc), exc.field
            else:
                return redirect(run)
    return render(
        request,
        "runs/new.html",
        {
            "prompt_sets": prompt_sets,
            "methods": list(METHODS.values()),
            "form": form,
            "posted": request.POST if request.method == "POST" else None,
            "error": error,
            "field": field,
        },
        status=400 if error else 200,
    )


@login_required
def run_detail(request, pk):
    run = get_object_or_404(Run.objects.select_related("prompt_set", "created_by"), pk=pk)
    initial = {
        "run": run.to_json(),
        "metrics": metric_series(run),
        "chart_metrics": chart_metrics(run),
        "steps": group_steps(run),
        "stages": stage_events(run),
    }
    return render(request, "runs/detail.html", {"run": run, "initial": initial, "iterations": run.rzero_iterations()})


@login_required
def run_questions(request, pk):
    """R-Zero: the question pool of one iteration, with p̂, pseudo-label and kept flag."""
    run = get_object_or_404(Run, pk=pk)
    iterations = run.rzero_iterations()
    iteration = request.GET.get("iteration")
    iteration = int(iteration) if iteration and iteration.isdigit() else (iterations[-1] if iterations else None)
    rows = run.rzero_questions(iteration) if iteration is not None else []
    return render(
        request,
        "runs/questions.html",
        {"run": run, "iteration": iteration, "iterations": iterations, "rows": rows, "kept": sum(1 for r in rows if r.get("kept"))},
    )


@login_required
def run_rollouts(request, pk):
    run = get_object_or_404(Run.objects.select_related("prompt_set"), pk=pk)
    step = request.GET.get("step")
    step = int(step) if step and step.lstrip("-").isdigit() else None
    step, groups = groups_at(run, step, request.GET.get("prompt") or None)
    labels = dict(run.prompt_set.prompts.values_list("external_id", "label")) if run.prompt_set.has_labels else {}
    prompts = dict(run.prompt_set.prompts.values_list("external_id", "text"))
    rows = [
        {"group": g, "prompt": prompts.get(g.prompt_id, ""), "label": labels.get(g.prompt_id), "heatmap_id": f"heatmap-{n}-data"}
        for n, g in enumerate(groups, 1)
    ]
    return render(request, "runs/rollouts.html", {"run": run, "step": step, "steps": group_steps(run), "rows": rows})


@login_required
@require_POST
def run_action(request, pk, action):
    run = get_object_or_404(Run, pk=pk)
    try:
        if action == "cancel":
            run = cancel_run(run)
        elif action == "resume":
            run = resume_run(run)
        elif action == "clone":
            run = clone_run(run, user=request.user)
    except RunInputError as exc:
        messages.error(request, str(exc))
    return redirect(run)


def healthz(request):
    status, body = check()
    return JsonResponse(body, status=status)
