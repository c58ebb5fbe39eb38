"""The team's alert pages: its alerts, and for admins its webhooks, their recent deliveries and the team's alert
rules. Anything of a team the user is not in is a 404 (webapp.accounts.access.team_or_404)."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from rl.params import FieldError
from webapp.accounts.access import require_role, role_in, team_or_404
from webapp.accounts.models import Membership
from webapp.numbers import whole_number

from . import engine
from .rule_forms import overrides_from_form, rule_rows
from .rule_specs import validate_overrides
from .models import Alert, TeamAlertRules, Webhook, WebhookDelivery


# The page's filters, {value: (title, the states it shows)}; None shows every state. `current` is the default: what
# still wants someone's eyes (an alert whose run ended before anyone acknowledged it among them). `active`, the
# default before runs' ended alerts stayed listed, still answers an old link.
STATE_FILTERS = {
    "current": ("current", Alert.CURRENT),
    "open": ("open", (Alert.OPEN,)),
    "acknowledged": ("acknowledged", (Alert.ACKNOWLEDGED,)),
    "ended": (Alert.STATE_LABELS[Alert.ENDED], (Alert.ENDED,)),
    "resolved": ("resolved", (Alert.RESOLVED,)),
    "closed": ("closed with their run", (Alert.CLOSED,)),
    "all": ("all", None),
}
OLD_FILTERS = {"active": Alert.ACTIVE}


@login_required
def team_alerts(request, pk):
    team = team_or_404(request.user, pk)
    state = request.GET.get("state", "current")
    if state in STATE_FILTERS:
        states = STATE_FILTERS[state][1]
    else:
        state, states = (state, OLD_FILTERS[state]) if state in OLD_FILTERS else ("current", Alert.CURRENT)
    alerts = Alert.objects.filter(team=team).select_related("run", "acknowledged_by")
    if states is not None:
        alerts = alerts.filter(state__in=states)
    return render(request, "alerts/team_alerts.html", {
        "team": team,
        "state": state,
        "filters": [(value, title) for value, (title, _) in STATE_FILTERS.items()],
        # the live page keeps a row while its alert's state is one of these (null: any)
        "shown_states": list(states) if states is not None else None,
        "alerts_json": [a.to_json() for a in alerts[:300]],
        "can_act": Membership.allows(role_in(request.user, team), Membership.MEMBER),
    })


@login_required
def team_settings(request, pk):
    """Webhooks and alert rules, admins only: each POST is one change (add or remove a webhook, save the rules)."""
    team = team_or_404(request.user, pk)
    require_role(request.user, team, Membership.ADMIN)
    error = field = None
    if request.method == "POST":
        try:
            done = _settings_action(request, team)
        except FieldError as exc:
            error, field = exc.message, exc.field
        else:
            messages.success(request, done)
            return redirect("alerts:team_settings", pk=team.pk)
    deliveries = WebhookDelivery.objects.filter(webhook__team=team).select_related("webhook", "alert")[:30]
    if request.GET.get("part") == "deliveries":  # the page re-reads its table when a delivery changes (live)
        return render(request, "alerts/_deliveries.html", {"deliveries": deliveries})
    stored = TeamAlertRules.objects.filter(team=team).first()
    return render(request, "alerts/team_settings.html", {
        "team": team,
        "error": error,
        "field": field,
        # a refused URL stays in the field to be corrected, not typed again
        "typed_url": request.POST.get("url", "") if error and request.POST.get("action") == "add_webhook" else "",
        "webhooks": Webhook.objects.filter(team=team),
        "deliveries": deliveries,
        "rule_rows": rule_rows(stored.overrides if stored else {}),
    }, status=400 if error else 200)


def _settings_action(request, team) -> str:
    """One admin change from the settings page; returns what to tell the user."""
    action = request.POST.get("action")
    if action == "add_webhook":
        url = request.POST.get("url", "").strip()
        Webhook.add(team, url, request.user)
        return f"webhook added: {url}"
    if action == "delete_webhook":
        Webhook.objects.filter(team=team, pk=request.POST.get("webhook") or 0).delete()
        return "webhook removed"
    if action == "test_webhook":
        asked = request.POST.get("webhook", "")
        webhook = Webhook.objects.filter(team=team, pk=whole_number(asked) or 0).first()
        if webhook is None:
            raise FieldError("webhook", f"no webhook with id {asked[:20]} in team {team.name}")
        engine.send_test(webhook, request.user)
        return f"test sent to {webhook.url}: its delivery is listed below"
    if action == "save_rules":
        overrides = validate_overrides(overrides_from_form(request.POST))
        TeamAlertRules.objects.update_or_create(team=team, defaults={"overrides": overrides, "updated_by": request.user})
        return "alert rules saved"
    raise FieldError("action", f"unknown action {action!r}")
