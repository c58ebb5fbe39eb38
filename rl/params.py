"""Reading typed settings from JSON or form text: the conversions shared by the method
schemas (rl/methods/schema.py) and the alert-rule schemas (webapp/alerts/rule_specs.py), and
`FieldError`, the one error every check of Evolab's input raises."""

from __future__ import annotations

import math

TRUE_WORDS = {"true", "1", "yes", "on"}
FALSE_WORDS = {"false", "0", "no", "off"}


class FieldError(ValueError):
    """A rejected value and the field it came from (a hyperparameter, `alert_rules.<kind>.<param>`, `team`,
    `engine_options.partition`, ...). The API answers `{"error": message, "field": field}` with `status`
    (webapp/api.py::api_view), the launch form marks the field, the trainer's command line prints both.
    `field` is None where no single field is at fault (a whole file)."""

    def __init__(self, field: str | None, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
        self.status = status


def finite(value: object) -> float | None:
    """A finite float, or None for None, booleans, NaN, infinities and non-numbers."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def to_number(value: object) -> float | None:
    """A number from a JSON number or form text ("0.3"); True is an int in Python, refused."""
    return finite(value.strip() if isinstance(value, str) else value)


def to_bool(value: object) -> bool | None:
    """True/False from a JSON boolean, 0/1 or a word (true/yes/on, false/no/off); else None."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in TRUE_WORDS | FALSE_WORDS:
        return value.strip().lower() in TRUE_WORDS
    return None


def plain_number(x: float) -> str:
    """A range bound for a message: 3 rather than 3.0, and no exponent for everyday sizes."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))
