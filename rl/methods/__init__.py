"""The training methods: one module per method, each holding its reward and one `Method` (rl/methods/schema.py).

The web form, the API (``GET /api/methods``), the run page's charts, ``rl.train``'s config
check and the trainer all read ``METHODS``; adding a method is adding a module here and a
line below.
"""

from __future__ import annotations

from rl.methods import (compass, darl, empo, entropy_minimisation, evol_rl, intuitor, r_zero, random_reward, rlpr,
                        rlvr, self_consistency, ttrl)
from rl.methods.schema import Method
from rl.params import FieldError

__all__ = ["METHODS", "Method", "get_method", "metric_prefixes", "validate_hyperparameters"]

METHODS: dict[str, Method] = {method.name: method for method in (
    ttrl.METHOD, evol_rl.METHOD, compass.METHOD, darl.METHOD, rlpr.METHOD, r_zero.METHOD,
    entropy_minimisation.TOKEN, entropy_minimisation.SEQUENCE, self_consistency.METHOD, intuitor.METHOD, empo.METHOD,
    random_reward.METHOD, rlvr.METHOD,
)}


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise FieldError("method", f"unknown method {name!r}: expected one of {', '.join(METHODS)}") from None


def validate_hyperparameters(method: str, values: dict | None) -> dict:
    """The complete hyperparameters for ``method`` (Method.validate), or FieldError naming the field."""
    return get_method(method).validate(values)


def metric_prefixes() -> tuple[str, ...]:
    """The prefixes of the methods' own metric names (DESIGN §5), e.g. ("ttrl", "evol_rl", ...)."""
    return tuple(sorted({m.metric_prefix for m in METHODS.values() if m.metric_prefix}))
