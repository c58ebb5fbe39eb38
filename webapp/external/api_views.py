"""Evolab's own API for runs trained elsewhere (DESIGN §4.8): the rollouts endpoint."""
from django.http import JsonResponse

from webapp.accounts.access import require_role
from webapp.accounts.models import Membership
from webapp.api import api_view, error
from webapp.runs.models import Run

from .rollouts import RolloutLineError, parse_lines, receive


@api_view(["POST"])
def post_rollouts(request, pk):
    """JSON lines of rollouts for a run trained elsewhere: all stored or none, each at most once."""
    run = Run.objects.visible_to(request.user).filter(pk=pk).first()
    if run is None:
        return error(f"no run with id {pk}", 404)
    require_role(request.user, run.team_id, Membership.MEMBER)
    if not run.is_external:
        return error(f"run {run.pk} is trained by Evolab: its rollouts come from its own trainer", 409, field="run")
    try:
        rollouts = parse_lines(request.body)
    except RolloutLineError as exc:
        body = {"error": str(exc), "line": exc.line}
        if exc.field:
            body["field"] = exc.field
        return JsonResponse(body, status=400)
    return JsonResponse(receive(run, rollouts))
