"""What a step rule answers, and what the rules share to say it (webapp/alerts/rules.py, webapp/alerts/forecast.py):
a Finding or ABSENT, the gate that the policy has moved, and the numbers of a message.

Pure Python: no Django, no numpy, so the web process can import it cheaply.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from statistics import mean
from typing import Sequence

from . import trend

# An alert resolves once its condition has not held for this many steps in a row. Judged on a few prompts a step,
# a metric near its threshold crosses it back and forth: on the real TTRL run of docs/experiments.md
# entropy_collapse opened, resolved and reopened three times in ten steps, and each opening sent its webhooks
# and emails again.
QUIET_STEPS_TO_RESOLVE = 5


@dataclass
class Finding:
    kind: str
    severity: str
    step: int | None  # None only for stalled/run_failed before the first step
    message: str
    values: dict[str, float] = field(default_factory=dict)

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "step": self.step,
            "message": self.message,
            "values": dict(self.values),
        }


# A step rule returns a Finding when its condition holds, None when it could judge the run
# and found it healthy, and ABSENT when it could not judge (too few steps, metric missing).
ABSENT = object()


def finding(history, kind: str, severity: str, message: str, **values: float) -> Finding:
    """A Finding at the latest step of `history` (a rules.History)."""
    return Finding(kind, severity, history.steps[-1], message, rounded(**values))


def rounded(**values: float) -> dict[str, float]:
    """Plain JSON-safe floats, rounded to 6 significant digits."""
    return {name: float(f"{float(v):.6g}") for name, v in values.items()}


@dataclass
class Movement:
    moved: bool
    said: str  # "" when nothing tells
    values: dict


def policy_moved(history, rule: dict) -> Movement:
    """Whether the policy has left where it started, over the recent window: its mean KL to the reference at least
    `min_kl`; without KL, ratios clipped by PPO (clip_ratio/low + high above 0); without either, assumed (a run
    trained elsewhere may log neither). A run at a learning rate too small to move it has nothing to collapse: its
    figures swing with the prompts each step samples (the Small CPU preset's entropy went from 0.02 to 0.13 and back
    with a KL near 1e-6). Asked by several rules at a step: remembered on the step's History."""
    return history.remember(("moved", rule["window"], rule["min_kl"]), lambda: _policy_moved(history, rule))


def _policy_moved(history, rule: dict) -> Movement:
    window = rule["window"]
    kl = tail_mean(history.series("kl"), window)
    if kl is not None:
        return Movement(kl >= rule["min_kl"], f"KL to the start {num(kl)}", {"kl": kl, "min_kl": rule["min_kl"]})
    clipped = [tail_mean(history.series(name), window) for name in ("clip_ratio/low", "clip_ratio/high")]
    if any(c is not None for c in clipped):
        total = sum(c for c in clipped if c is not None)
        return Movement(total > 0, f"clipped ratios {trend.percent(total)}", {"clip_ratio": total})
    return Movement(True, "", {})


def logged(values: Sequence[float | None] | None) -> list[float]:
    return [v for v in values or () if v is not None]


def tail_mean(values: Sequence[float | None] | None, window: int) -> float | None:
    tail = logged((values or [])[-window:])
    return mean(tail) if tail else None


def num(x: float) -> str:
    """A number for a message: 3 significant digits, no exponent for everyday magnitudes."""
    if abs(x) >= 100 or x == int(x):
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 1e-3 else f"{x:.2g}"


def span(pair: tuple[int, int]) -> str:
    return str(pair[0]) if pair[0] == pair[1] else f"{pair[0]}–{pair[1]}"
