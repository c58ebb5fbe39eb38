"""{% unacknowledged_alert_count team %}: the team page shows how many of its alerts nobody has acknowledged (open,
or ended with their run) without the accounts app importing this one (a template loads the tag by name)."""
from django import template

from webapp.alerts.models import Alert

register = template.Library()


@register.simple_tag
def unacknowledged_alert_count(team) -> int:
    return Alert.objects.filter(team=team, state__in=Alert.UNACKNOWLEDGED).count()
