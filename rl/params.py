"""Typed settings read from JSON or form text: `Param`, one setting of a method's schema (rl/methods/schema.py)
or of an alert rule's (webapp/alerts/rule_specs.py), the conversions it uses, and `FieldError`, the one error
every check of Evolab's input raises."""

from __future__ import annotations

import math
from dataclasses import dataclass

TRUE_WORDS = {"true", "1", "yes", "on"}
FALSE_WORDS = {"false", "0", "no", "off"}
NULL_WORDS = {"", "null", "none"}


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
    except (TypeError, ValueError, OverflowError):  # OverflowError: a JSON integer of 10^400 has no float
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


@dataclass(frozen=True)
class Param:
    """One typed setting: its name, type ('int' | 'float' | 'bool' | 'choice'), default, help text and the
    values it takes. A method's hyperparameters and an alert rule's parameters are both made of these."""

    name: str
    type: str
    default: object
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple = ()
    # When True, None (JSON null) is a valid value with its own meaning, e.g. DARL's
    # tau = null selects the dynamic threshold.
    nullable: bool = False
    # When True, `min` itself is out of range (a training temperature must be above 0)
    min_exclusive: bool = False

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "help": self.help,
            "min": self.min,
            "max": self.max,
            "choices": list(self.choices),
            "nullable": self.nullable,
            "min_exclusive": self.min_exclusive,
        }

    def range_text(self) -> str:
        if self.type == "bool":
            return "true or false"
        if self.type == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        low = "-inf" if self.min is None else plain_number(self.min)
        high = "inf" if self.max is None else plain_number(self.max)
        kind = "an integer" if self.type == "int" else "a number"
        text = f"{kind} in {'(' if self.min_exclusive else '['}{low}, {high}]"
        return text + " or null" if self.nullable else text

    def coerce(self, value: object, field: str | None = None) -> object:
        """The value converted to this setting's type and checked against its range, or a FieldError naming
        `field` (the setting's name unless given, e.g. `alert_rules.entropy_collapse.fraction`)."""
        if self.nullable and (value is None or (isinstance(value, str) and value.strip().lower() in NULL_WORDS)):
            return None
        converted = self._convert(value)
        if converted is None or (self.type in ("int", "float") and (
                (self.min is not None and (converted <= self.min if self.min_exclusive else converted < self.min))
                or (self.max is not None and converted > self.max))):
            field = field or self.name
            raise FieldError(field, f"{field}={value!r} is invalid: expected {self.range_text()}")
        return converted

    def _convert(self, value: object) -> object:
        """The value as this type, or None when it is not one."""
        if self.type == "bool":
            return to_bool(value)
        if self.type == "choice":
            if value in self.choices:
                return value
            text = value.strip() if isinstance(value, str) else None
            return next((choice for choice in self.choices if str(choice) == text), None)
        number = to_number(value)
        if self.type == "int":
            return int(number) if number is not None and number.is_integer() else None
        if self.type == "float":
            return number
        raise ValueError(f"unknown setting type {self.type!r}")
