import re

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()

_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*\{")


@register.filter
def highlight_boxed(text):
    """Escape model output, then wrap each \\boxed{...} (balanced braces) in <mark>.

    Escaping first is what makes this safe: model output is untrusted, and escaping
    leaves backslashes and braces alone, so the brace matching sees the same text."""
    escaped = str(escape(text or ""))
    out, pos = [], 0
    for match in _BOXED_START.finditer(escaped):
        if match.start() < pos:
            continue
        depth, end = 1, match.end()
        while end < len(escaped) and depth:
            depth += {"{": 1, "}": -1}.get(escaped[end], 0)
            end += 1
        if depth:
            break  # unbalanced: leave the rest as plain escaped text
        out.append(escaped[pos : match.start()])
        out.append(f'<mark class="boxed">{escaped[match.start():end]}</mark>')
        pos = end
    out.append(escaped[pos:])
    return mark_safe("".join(out))


@register.filter
def number(value):
    """A number as a reader wants it: 103 for 103.0 (not 103.000), 0.8751 to four significant
    digits, an em dash when missing; anything else (a string an extra carries) as it is."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value) if isinstance(value, int) else f"{value:.4g}"


@register.filter
def get_item(mapping, key):
    """mapping[key], or None: a method's extras, one column per key."""
    return mapping.get(key) if isinstance(mapping, dict) else None
