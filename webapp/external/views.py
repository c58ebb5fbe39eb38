"""Pages of runs trained elsewhere: where the links the MLflow client prints lead, a run's evaluation
generations (verl's validation files, artifacts.py), and the runs imported from a logger's files (imports.py)."""
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from webapp.accounts.access import teams_of
from webapp.runs.models import Run

from .models import EvalGeneration, Experiment, LoggerImport

MAX_GENERATIONS_SHOWN = 500
MAX_IMPORTS_SHOWN = 500


def mlflow_link(request):
    """/mlflow/ (the MLflow client's "View run at HOST/mlflow/#/experiments/E/runs/R"): the part after # never
    reaches a server, so the page reads it and goes to the run or the experiment's runs. It shows nothing of any
    run, so it asks no sign-in: the page it goes to does, and sign-in then returns there (?next= keeps the path,
    while the fragment is lost by the sign-in form's POST)."""
    return render(request, "external/mlflow_link.html")


@login_required
def run_by_mlflow_id(request, mlflow_run_id):
    run = get_object_or_404(Run.objects.visible_to(request.user), mlflow_run_id=mlflow_run_id)
    return redirect(run)


@login_required
def experiment_runs(request, experiment_id):
    """"View experiment at HOST/mlflow/#/experiments/E": the run list of its team, filtered to the experiment."""
    experiment = get_object_or_404(Experiment, pk=experiment_id, team__in=teams_of(request.user))
    return redirect(f"{reverse('runs:list')}?team={experiment.team_id}&experiment={experiment.pk}")


@login_required
def eval_generations(request, pk):
    """A run's evaluation generations, a step at a time (the latest unless ?step= names another)."""
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related("team"), pk=pk)
    generations = EvalGeneration.objects.filter(run=run)
    steps = list(generations.order_by("step").values_list("step", flat=True).distinct())
    if "step" in request.GET:
        step = next((s for s in steps if str(s) == request.GET["step"].strip()), None)
        if step is None:
            raise Http404(f"run {run.pk} has no evaluation generations at step {request.GET['step']!r}")
    else:
        step = steps[-1] if steps else None
    shown = list(generations.filter(step=step)[:MAX_GENERATIONS_SHOWN + 1]) if step is not None else []
    scores = [g.score for g in shown if g.score is not None]
    return render(request, "external/eval_generations.html", {
        "run": run, "steps": steps, "step": step, "generations": shown[:MAX_GENERATIONS_SHOWN],
        "more": len(shown) > MAX_GENERATIONS_SHOWN, "score_mean": sum(scores) / len(scores) if scores else None})


@login_required
def imports(request):
    """The runs brought in from a logger's files (`evolab sync wandb|tensorboard|trackio`) that the user may see, the
    latest sync first: where the files were, and what each sync read, sent and skipped, as its last request said."""
    found = (LoggerImport.objects.filter(run__in=Run.objects.visible_to(request.user))
             .select_related("run", "run__team")[:MAX_IMPORTS_SHOWN + 1])
    rows = list(found)
    return render(request, "external/imports.html", {"imports": rows[:MAX_IMPORTS_SHOWN],
                                                      "more": len(rows) > MAX_IMPORTS_SHOWN})
