"""Alerts, alert rules and webhooks (DESIGN §4.5). Thin views: the writes are in
engine.py (alerts) and here only for rows with no side effects (rules, webhooks)."""
import json

from django.http import JsonResponse

from webapp.accounts.access import require_role
from webapp.accounts.models import Membership, Team
from rl.params import FieldError
from webapp.api import api_view, error, json_body
from webapp.numbers import MAX_DIGITS, whole_number

from . import engine
from .rule_specs import RULES, defaults, resolve_thresholds, validate_overrides
from .models import Alert, TeamAlertRules, Webhook, WebhookDelivery

MAX_ALERTS = 500


def _int_param(request, name):
    value = request.GET.get(name, "")
    if value == "":
        return None
    number = whole_number(value)
    if number is None:
        raise ValueError(f"{name} must be a whole number, not {value!r}")
    return number


@api_view(["GET"])
def alerts(request):
    """GET /api/alerts?team=&state=&run=: the alerts of the user's teams, newest first. `state` is a comma-separated
    list of states, or `current` for what the pages list by default (open, acknowledged, and ended with its run
    before anyone acknowledged it)."""
    found = Alert.objects.visible_to(request.user).select_related("run", "acknowledged_by")
    try:
        team, run = _int_param(request, "team"), _int_param(request, "run")
    except ValueError as exc:
        return error(str(exc), field="team" if "team" in str(exc) else "run")
    state = request.GET.get("state", "")
    if state:
        states = [named for s in state.split(",") if s for named in (Alert.CURRENT if s == "current" else [s])]
        unknown = [s for s in states if s not in dict(Alert.STATES)]
        if unknown:
            return error(f"state must be current or {', '.join(dict(Alert.STATES))} (comma-separated), "
                         f"not {unknown[0]!r}", field="state")
        found = found.filter(state__in=states)
    if team is not None:
        found = found.filter(team_id=team)
    if run is not None:
        found = found.filter(run_id=run)
    return JsonResponse({"alerts": [a.to_json() for a in found[:MAX_ALERTS]]})


def _with_alert(view):
    def wrapper(request, pk):
        alert = Alert.objects.visible_to(request.user).select_related("run", "acknowledged_by").filter(pk=pk).first()
        if alert is None:
            return error(f"no alert with id {pk}", 404)
        require_role(request.user, alert.team_id, Membership.MEMBER)
        return view(request, alert)

    return wrapper


@api_view(["POST"])
@_with_alert
def acknowledge(request, alert):
    if alert.state not in Alert.CURRENT:
        return error(f"this alert is already {alert.state}", 409, field="state")
    return JsonResponse(engine.acknowledge(alert, request.user).to_json())


@api_view(["POST"])
@_with_alert
def resolve(request, alert):
    return JsonResponse(engine.resolve(alert).to_json())


# --- teams ----------------------------------------------------------------------------------


@api_view(["GET"])
def teams(request):
    mine = Team.objects.of(request.user)
    return JsonResponse({"teams": [t.to_json(request.user) for t in mine]})


def _with_team(needed):
    """The team by id if the user is in it (else 404, like a team that does not exist),
    and a 403 when their role is below `needed`."""

    def decorator(view):
        def wrapper(request, pk, *args, **kwargs):
            team = Team.objects.of(request.user).filter(pk=pk).first()
            if team is None:
                return error(f"no team with id {pk}", 404)
            require_role(request.user, team, needed)
            return view(request, team, *args, **kwargs)

        return wrapper

    return decorator


@api_view(["GET"])
@_with_team(Membership.VIEWER)
def team_detail(request, team):
    members = Membership.objects.filter(team=team).select_related("user")
    return JsonResponse({**team.to_json(request.user), "members": [m.to_json(request.user) for m in members]})


@api_view(["POST"])
@_with_team(Membership.MEMBER)
def acknowledge_several(request, team):
    """POST /api/teams/{id}/alerts/acknowledge {"ids": [...]}: the team's active alerts, all or none."""
    alerts = engine.acknowledge_several(team, _alert_ids(json_body(request).get("ids")), request.user)
    return JsonResponse({"alerts": [a.to_json() for a in alerts]})


def _alert_ids(value) -> list[int]:
    """The ids of a request naming several alerts, each once, in order; FieldError naming `ids` otherwise."""
    if not isinstance(value, list):
        raise FieldError("ids", "ids must be a list of alert ids")
    if not value:
        raise FieldError("ids", "ids must name at least one alert")
    if len(value) > MAX_ALERTS:
        raise FieldError("ids", f"at most {MAX_ALERTS} alerts at a time, not {len(value)}")
    ids = []
    for item in value:
        if isinstance(item, bool) or not isinstance(item, int) or not 0 < item < 10 ** MAX_DIGITS:
            raise FieldError("ids", f"ids must be whole numbers, not {item!r}")
        ids.append(item)
    return list(dict.fromkeys(ids))


@api_view(["GET", "POST"])
@_with_team(Membership.ADMIN)
def webhooks(request, team):
    if request.method == "POST":
        try:
            url = str(json_body(request).get("url") or "").strip()
        except ValueError as exc:
            return error(str(exc))
        try:
            hook = Webhook.add(team, url, request.user)
        except ValueError as exc:
            return error(str(exc), field="url")
        return JsonResponse(hook.to_json(), status=201)
    hooks = Webhook.objects.filter(team=team)
    deliveries = WebhookDelivery.objects.filter(webhook__team=team).select_related("webhook")[:100]
    return JsonResponse({"webhooks": [h.to_json() for h in hooks], "deliveries": [d.to_json() for d in deliveries]})


@api_view(["DELETE"])
@_with_team(Membership.ADMIN)
def webhook_detail(request, team, hook_id):
    deleted, _ = Webhook.objects.filter(team=team, pk=hook_id).delete()
    if not deleted:
        return error(f"no webhook with id {hook_id} in this team", 404)
    return JsonResponse({"deleted": hook_id})


@api_view(["GET", "PUT"])
@_with_team(Membership.ADMIN)
def alert_rules(request, team):
    """GET: every rule with its defaults, the team's overrides and the effective values.
    PUT: replace the team's overrides with the body {rule kind: {param: value}}."""
    stored, _ = TeamAlertRules.objects.get_or_create(team=team)
    if request.method == "PUT":
        try:
            body = json.loads(request.body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            return error(f"the request body is not valid JSON: {exc}")
        stored.overrides = validate_overrides(body.get("overrides", body) if isinstance(body, dict) else body)
        stored.updated_by = request.user
        stored.save()
    return JsonResponse(rules_json(stored.overrides))


def rules_json(overrides: dict) -> dict:
    return {
        "rules": [spec.to_json() for spec in RULES.values()],
        "defaults": defaults(),
        "overrides": overrides,
        "effective": resolve_thresholds(overrides),
    }
