from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.middleware.csrf import get_token
from django.views.decorators.http import require_POST

from rl.params import FieldError
from webapp.accounts.access import require_role, role_in
from webapp.accounts.models import Membership
from webapp.alerts import failures, forecast
from webapp.alerts.models import Alert
from webapp.metrics import series
from webapp.numbers import whole_number

from . import launch_form, metric_groups
from .actions import cancel_run, delete_run, resume_run, update_run
from .api_views import MAX_COMPARED_RUNS, parse_run_ids
from .health import check, no_worker_for, shown_to
from .listing import run_listing
from .models import Run, RunTransition
from .queries import (
    chart_metrics,
    hyperparameter_diff,
    hyperparameter_rows,
    live_state,
    metric_series_of_runs,
    run_time_origin,
)
from .queue_place import place_of


@login_required
def run_list(request):
    """The runs of the user's teams (the current team unless ?team= says otherwise), with
    filters; ?fragment=1 answers the table body alone (the live list reloads it)."""
    listing = run_listing(request)
    template = "runs/_run_rows.html" if request.GET.get("fragment") else "runs/list.html"
    return render(request, template, {"listing": listing, "runs": listing.runs})


@login_required
def run_new(request):
    """The launch form (webapp/runs/launch_form.py). ?clone=<id> pre-fills it from a run;
    an error re-renders every typed value with the field at fault marked."""
    if request.method == "POST":
        run, form = launch_form.submit(request)  # PermissionDenied (403) for a viewer
        if run is not None:
            return redirect(run)
    else:
        form = launch_form.initial_form(request)
    return render(request, "runs/new.html", launch_form.context(form), status=400 if form.error else 200)


@login_required
def run_detail(request, pk):
    run = get_object_or_404(Run.objects.visible_to(request.user).select_related(
        "prompt_set", "eval_prompt_set", "created_by", "team"), pk=pk)
    role = role_in(request.user, run.team_id)
    can_act = Membership.allows(role, Membership.MEMBER)
    get_token(request)  # the Acknowledge button posts with the csrftoken cookie
    hp_rows, alert_rule_rows = hyperparameter_rows(run)
    source = Run.objects.visible_to(request.user).filter(pk=run.cloned_from_id).first() if run.cloned_from_id else None
    # An overview: a long series is thinned to min/max buckets (spikes survive); a chart the user
    # zooms into fetches its full series (static/js/run_live.js), so nothing is lost, only deferred.
    metrics, thinned = series.overview(run.pk, RUN_PAGE_MAX_POINTS)
    initial = {
        "run": run.to_json(),
        "metrics": metrics,
        "thinned": thinned,
        "metric_catalogue": metric_groups.catalogue(),
        "terminal_states": sorted(Run.TERMINAL),
        "chart_metrics": chart_metrics(run),
        **live_state(run),  # steps, heatmap, stages, resumes, iterations: what GET .../live-state reads back
        "time_origin": run_time_origin(run),
        "alerts": Alert.of_run_json(run),
        "processing_failed_rule": failures.KIND,  # its alert messages drive the banner
        "forecast_rule": forecast.KIND,  # its alert messages change the forecast line, read back from the server
        "role": role,
        "can_act": can_act,
    }
    transitions, older = RunTransition.page(run.pk, limit=HISTORY_ON_PAGE)
    return render(request, "runs/detail.html", {
        "run": run, "initial": initial, "role": role, "can_act": can_act,
        "hp_rows": hp_rows, "alert_rule_rows": alert_rule_rows, "cloned_from": source,
        "no_worker_for_queue": no_worker_for(run), "transitions": transitions, "older_transitions": older,
        "queue_place": place_of(run, request.user),
        "processing_failure": Alert.objects.active().filter(run=run, rule=failures.KIND).first(),
        "history_limit": HISTORY_ON_PAGE,
    })


# The run page lists this many of the run's latest state changes; the API pages through the rest.
HISTORY_ON_PAGE = 50


@login_required
def run_questions(request, pk):
    """R-Zero: the question pool of one iteration, with p̂, pseudo-label and kept flag."""
    run = get_object_or_404(Run.objects.visible_to(request.user), pk=pk)
    iterations = run.rzero_iterations()
    iteration = whole_number(request.GET.get("iteration", ""))
    if iteration is None:
        iteration = iterations[-1] if iterations else None
    rows = run.rzero_questions(iteration) if iteration is not None else []
    return render(
        request,
        "runs/questions.html",
        {"run": run, "iteration": iteration, "iterations": iterations, "rows": rows,
         "hp": run.effective_hyperparameters, "kept": sum(1 for r in rows if r.get("kept"))},
    )


@login_required
@require_POST
def run_action(request, pk, action):
    run = get_object_or_404(Run.objects.visible_to(request.user), pk=pk)
    try:
        if action == "cancel":
            run = cancel_run(run, request.user)
        elif action == "resume":
            run = resume_run(run, request.user)
        elif action == "edit":
            run = update_run(run, request.user, {name: request.POST.get(name, "") for name in ("name", "notes", "tags")})
            messages.success(request, "Saved.")
        elif action == "archive":
            run = update_run(run, request.user, {"archived": request.POST.get("archived") == "1"})
        elif action == "delete":
            # the form's box, ticked, carries the run's id: a stale or forged post deletes nothing
            if request.POST.get("confirm") != str(run.pk):
                raise FieldError("confirm", "tick the box to confirm that the run and its files are deleted")
            delete_run(run, request.user)
            messages.success(request, f"Run #{run.pk} {run.name!r} was deleted, with its data and checkpoints.")
            return redirect("runs:list")
        elif action == "clone":
            # Cloning opens the launch form pre-filled, to edit before launching.
            require_role(request.user, run.team_id, Membership.MEMBER)
            return redirect(f"{reverse('runs:new')}?clone={run.pk}")
    except FieldError as exc:
        messages.error(request, str(exc))
    return redirect(run)


def healthz(request):
    status, body = check()
    return JsonResponse(shown_to(request.user, body), status=status)


@login_required
def compare(request):
    """/compare/?runs=1,2,3: the metrics two or more runs share, overlaid, and their
    hyperparameters side by side. A run the user may not see is a 404, as on its own page."""
    visible = Run.objects.visible_to(request.user)
    raw = [v for v in request.GET.getlist("runs") if v.strip()]
    if not raw:
        recent = visible.select_related("prompt_set")[:50]
        return render(request, "runs/compare.html", {"runs": [], "recent": recent, "max_runs": MAX_COMPARED_RUNS})
    ids, problem = parse_run_ids(raw)
    if problem:
        recent = visible.select_related("prompt_set")[:50]
        return render(request, "runs/compare.html", {"runs": [], "recent": recent, "error": problem,
                                                     "max_runs": MAX_COMPARED_RUNS}, status=400)
    found = {r.pk: r for r in visible.select_related("prompt_set", "eval_prompt_set", "team", "created_by")
             .filter(pk__in=ids)}
    missing = [pk for pk in ids if pk not in found]
    if missing:
        raise Http404(f"no run with id {missing[0]}")
    if len(ids) < 2:  # "Compare…" from a run page: pick the others
        recent = list(visible.select_related("prompt_set")[:50])
        recent += [found[pk] for pk in ids if found[pk] not in recent]
        return render(request, "runs/compare.html", {"runs": [], "recent": recent, "preselected": ids,
                                                     "max_runs": MAX_COMPARED_RUNS})
    runs = [found[pk] for pk in ids]
    series = metric_series_of_runs(ids, max_points=COMPARE_PAGE_MAX_POINTS)
    initial = {
        "runs": [{**r.to_json(), "prompt_set_name": r.prompt_set.name, "time_origin": run_time_origin(r)} for r in runs],
        "metrics": {str(pk): series[pk] for pk in ids},
        "metric_catalogue": metric_groups.catalogue(),
        "terminal_states": sorted(Run.TERMINAL),
        "max_points": COMPARE_PAGE_MAX_POINTS,
    }
    return render(request, "runs/compare.html", {
        "runs": runs, "initial": initial, "hp_table": hyperparameter_diff(runs), "max_runs": MAX_COMPARED_RUNS,
    })


# Series on the compare page are thinned to this many points (min/max per bucket).
COMPARE_PAGE_MAX_POINTS = 2000
# Points per chart when the run page opens (webapp/runs/queries.py::downsample keeps each bucket's min and max).
RUN_PAGE_MAX_POINTS = 300
