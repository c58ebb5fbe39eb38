"""The statistics the step rules judge with (webapp/alerts/rules.py): a trend, never a sample.

A step's figure (entropy, majority ratio, ...) is measured on the few prompts that step sampled, so it swings
with which prompts they were: the Small CPU preset's entropy went from 0.02 to 0.13 and back on two prompts a step
while the policy did not move. A rule therefore compares the median of a window of recent steps with the median of
the run's first steps (one wild step moves neither), and calls a change real only when it is beyond the run's own
noise:

- the noise of one step's figure is estimated from the run itself, from the differences between consecutive
  steps, which a slow trend barely moves: the mean of the smallest 80% of |x_t − x_t−1| (for independent normal
  draws it is 0.790 σ, so σ ≈ 1.266 times it). Trimmed, so the one large step of a sudden fall does not pass for
  noise; a mean, not the median: a figure read from few prompts takes few values (pass@16 of 4 prompts is 0, .25,
  .5, .75 or 1), consecutive steps tie, the median of the differences was 0 and every change looked real;
- the noise of a difference of two window medians is 1.253 · σ · √(1/n_start + 1/n_recent);
- a share measured on counted things (answers invalid, prompts with zero variance) uses the counts instead: the
  Wilson interval of the pooled share over the window, so two prompts a step for three steps (six prompts, all
  flat) cannot claim that 80% of a run's prompts are flat (the interval's low end is 60%).

Pure Python: no Django, no numpy.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from operator import sub
from statistics import median
from typing import Sequence

MIN_DIFFERENCES = 4  # consecutive pairs needed before the noise is trusted
KEPT = 0.8  # the share of the smallest differences the noise is read from
# E[|Δ| | |Δ| below its 80th percentile] for Δ ~ N(0, 2σ²): √2 · √(2/π) · (1 − e^(−q²/2)) / 0.8 · σ, q = 1.2816
_TRIMMED_TO_SIGMA = 1 / (math.sqrt(2) * math.sqrt(2 / math.pi) * (1 - math.exp(-1.2816 ** 2 / 2)) / KEPT)
_MEDIAN_SE = math.sqrt(math.pi / 2)


def noise(values: Sequence[float | None]) -> float | None:
    """The standard deviation of one step's figure around the run's trend, from consecutive logged values; None with
    fewer than MIN_DIFFERENCES pairs."""
    return _noise(tuple(v for v in values if v is not None))


@lru_cache(maxsize=64)
def _noise(logged: tuple) -> float | None:
    # remembered: the rules judging one step ask for the same series' noise several times (entropy's by the
    # collapse and the degeneration rule, the truncated share's by both rules that read it)
    differences = list(map(abs, map(sub, logged[1:], logged)))
    if len(differences) < MIN_DIFFERENCES:
        return None
    kept = sorted(differences)[:math.ceil(KEPT * len(differences))]
    return _TRIMMED_TO_SIGMA * sum(kept) / len(kept)


@dataclass(frozen=True)
class Comparison:
    """A recent window's median against the run's start (the median of its first steps), in the run's own noise."""

    start: float
    recent: float
    start_steps: tuple[int, int]  # first and last step of each window, for the message
    recent_steps: tuple[int, int]
    noise: float  # the standard error of recent − start

    @property
    def change(self) -> float:
        return self.recent - self.start

    def beyond(self, z: float) -> bool:
        """The change exceeds z standard errors (a noise of 0, a flat run, makes any change real)."""
        return abs(self.change) > z * self.noise

    def noise_share(self, z: float) -> float:
        """z standard errors as a share of the start: the ±band a message quotes."""
        return z * self.noise / abs(self.start) if self.start else math.inf

    def window_text(self, name: str) -> str:
        """'entropy of steps 8–13 is 45% of steps 1–5' (medians)"""
        share = self.recent / self.start if self.start else math.inf
        return f"{name} of steps {_span(self.recent_steps)} is {percent(share)} of steps {_span(self.start_steps)}"


def compare(steps: Sequence[int], values: Sequence[float | None], start_window: int, window: int,
            per_step: int | None = None) -> Comparison | None:
    """The median of the last `window` logged values against the median of the first `start_window`, with the noise
    of their difference; None until both windows are full and apart, or while the noise cannot be estimated. A
    share that each step reads from `per_step` counted things (pass@16 of a step's prompts) is never less noisy than
    a share of that many: √(p(1−p)/per_step), p its mean (the step-to-step spread of a share that sits at 1.0 for a
    while is 0)."""
    logged = [(s, v) for s, v in zip(steps, values) if v is not None]
    if len(logged) < start_window + window:
        return None
    sigma = _noise(tuple(v for _, v in logged))  # noise() of the logged values, filtered already
    if sigma is None:
        return None
    if per_step:
        share = min(1.0, max(0.0, sum(v for _, v in logged) / len(logged)))
        sigma = max(sigma, math.sqrt(share * (1 - share) / per_step))
    head, tail = logged[:start_window], logged[-window:]
    # medians, so one wild step neither opens nor resolves an alert; a median's standard error is about
    # √(π/2) ≈ 1.253 times the mean's
    return Comparison(start=median(v for _, v in head), recent=median(v for _, v in tail),
                      start_steps=(head[0][0], head[-1][0]), recent_steps=(tail[0][0], tail[-1][0]),
                      noise=_MEDIAN_SE * sigma * math.sqrt(1 / len(head) + 1 / len(tail)))


@dataclass(frozen=True)
class Level:
    """A recent window's mean and the band the run's noise puts around it."""

    mean: float
    low: float
    high: float
    steps: tuple[int, int]
    counted: int | None  # things counted in the window (Wilson), None when the band is the run's noise


def level(steps: Sequence[int], values: Sequence[float | None], window: int, z: float,
          per_step: int | None = None) -> Level | None:
    """The mean over the last `window` steps (missing ones skipped) with a z band: the Wilson interval of the pooled
    share when each step's value is a share of `per_step` counted things, else mean ± z · σ/√n from the run's noise
    (while it cannot be estimated yet, the band is the window's own spread). None with fewer than `window` logged
    values, or none over the last `window` steps: a figure that stopped being logged (a run's rollouts grouped
    behind its metrics) is not judged on its old values."""
    logged = [(s, v) for s, v in zip(steps, values) if v is not None]
    tail = [(s, v) for s, v in zip(steps[-window:], values[-window:]) if v is not None]
    if len(logged) < window or not tail:
        return None
    mean = sum(v for _, v in tail) / len(tail)
    span = (tail[0][0], tail[-1][0])
    if per_step:
        n = per_step * len(tail)
        low, high = wilson(mean, n, z)
        return Level(mean, low, high, span, n)
    sigma = _noise(tuple(v for _, v in logged))
    if sigma is None:
        sigma = max(v for _, v in tail) - min(v for _, v in tail)
    half = z * sigma / math.sqrt(len(tail))
    return Level(mean, mean - half, mean + half, span, None)


def wilson(share: float, n: int, z: float) -> tuple[float, float]:
    """The Wilson score interval of a share observed on n things (Wilson 1927; Agresti & Coull 1998, Eq. 2)."""
    if n <= 0:
        return 0.0, 1.0
    share = min(1.0, max(0.0, share))
    denominator = 1 + z * z / n
    centre = (share + z * z / (2 * n)) / denominator
    half = z * math.sqrt(share * (1 - share) / n + z * z / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def percent(share: float) -> str:
    """A share as a percentage; one decimal below 10% so 5.4% is not shown as the 5% threshold."""
    if not math.isfinite(share):
        return "∞%"
    value = 100 * share
    if abs(value) < 10 and round(value, 1) != round(value):
        return f"{value:.1f}%"
    return f"{value:.0f}%"


def _span(pair: tuple[int, int]) -> str:
    return str(pair[0]) if pair[0] == pair[1] else f"{pair[0]}–{pair[1]}"
