"""One rendering of a moment on every page (issue 40): `{{ value|when }}`, a template filter every template has
(TEMPLATES' builtins), and static/js/when.js, which shows it in the reader's own zone.

The server writes `<time class="when" datetime="...Z">2026-11-29 15:20 UTC</time>`: correct, with its zone, even
without JavaScript. when.js then shows the reader's local time with its zone ("2026-11-29 16:20 GMT+1"), the full
time in both zones on hover, and, for `when:"relative"`, how long ago ("5 min ago"). Scripts that draw times
themselves (the run page's live history, the alerts page) make the same element with EvolabTime.element()."""
from datetime import datetime, timezone

from django import template
from django.utils.html import format_html

register = template.Library()


@register.filter
def when(value: datetime | None, style: str = ""):
    """`style`: "seconds" to show them, "relative" for "5 min ago" (comma-separated)."""
    if value is None:
        return "—"
    styles = {s.strip() for s in style.split(",") if s.strip()}
    utc = value.astimezone(timezone.utc) if value.tzinfo else value.replace(tzinfo=timezone.utc)
    shown = utc.strftime("%Y-%m-%d %H:%M:%S" if "seconds" in styles else "%Y-%m-%d %H:%M") + " UTC"
    return format_html('<time class="when" datetime="{}" title="{}"{}{}>{}</time>',
                       utc.strftime("%Y-%m-%dT%H:%M:%SZ"), utc.strftime("%Y-%m-%d %H:%M:%S UTC"),
                       format_html(" data-seconds") if "seconds" in styles else "",
                       format_html(" data-relative") if "relative" in styles else "", shown)
