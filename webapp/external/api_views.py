"""Evolab's own API for runs trained elsewhere (DESIGN §4.8): the rollouts endpoint, and the metrics endpoint a
logger's files are imported through (imports.py)."""
from django.http import JsonResponse

from webapp.accounts.access import require_role
from webapp.accounts.models import Membership
from webapp.api import api_view, error
from webapp.numbers import whole_number
from webapp.runs.models import Run

from . import imports
from .rollouts import RolloutLineError, parse_lines, receive


@api_view(["POST"])
def post_rollouts(request, pk):
    """JSON lines of rollouts for a run trained elsewhere: all stored or none, each at most once."""
    run, refused = _reported_run(request, pk, "rollouts")
    if refused:
        return refused
    complete_through = None
    if request.GET.get("complete_through", "") != "":
        complete_through = whole_number(request.GET["complete_through"])
        if complete_through is None:
            return error(f"complete_through must be a step (a whole number), not {request.GET['complete_through']!r}",
                         field="complete_through")
    try:
        rollouts = parse_lines(request.body, allow_none=complete_through is not None)
    except RolloutLineError as exc:
        body = {"error": str(exc), "line": exc.line}
        if exc.field:
            body["field"] = exc.field
        return JsonResponse(body, status=400)
    return JsonResponse(receive(run, rollouts, complete_through))


@api_view(["POST"])
def post_metrics(request, pk):
    """A logger's points for a run trained elsewhere, many a request, charted before the answer (imports.py)."""
    run, refused = _reported_run(request, pk, "metrics")
    if refused:
        return refused
    try:
        points, sync = imports.parse(request.body)
    except imports.PointsError as exc:
        return error(str(exc), field=exc.field)
    return JsonResponse(imports.receive(run.pk, points, sync))


def _reported_run(request, pk, what: str):
    """(the run, None) when the user may report `what` to it (a member of its team, a run trained elsewhere), else
    (None, the error answer): 404 for a run the user cannot see, 409 for a run Evolab trains."""
    run = Run.objects.visible_to(request.user).filter(pk=pk).first()
    if run is None:
        return None, error(f"no run with id {pk}", 404)
    require_role(request.user, run.team_id, Membership.MEMBER)
    if not run.is_external:
        return None, error(f"run {run.pk} is trained by Evolab: its {what} come from its own trainer", 409, field="run")
    return run, None
