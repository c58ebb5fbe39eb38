"""Pages of runs trained elsewhere: where the links the MLflow client prints lead."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render

from webapp.runs.models import Run


@login_required
def mlflow_link(request):
    """/mlflow/ (the MLflow client's "View run at HOST/mlflow/#/experiments/E/runs/R"): the part after # never
    reaches a server, so the page reads it and goes to the run, or to the run list."""
    return render(request, "external/mlflow_link.html")


@login_required
def run_by_mlflow_id(request, mlflow_run_id):
    run = get_object_or_404(Run.objects.visible_to(request.user), mlflow_run_id=mlflow_run_id)
    return redirect(run)
