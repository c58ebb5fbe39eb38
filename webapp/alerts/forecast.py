"""The collapse forecast (DESIGN §4.5, issue 36 item 4): from a run's entropy so far, the step at which the
entropy_collapse condition is expected to hold (the median entropy of its last `window` steps below `fraction` × the
median of its first `start_window`), with its uncertainty, and the rule `entropy_collapse_forecast` that warns when
that step is near.

The fit: ln(entropy) against the step by least squares over the last `fit_window` logged steps, so a steady
exponential decay is a straight line. Entropy is read on the few prompts a step samples, so it swings ±40% from step
to step on the CPU corpus; those swings come in runs (the prompt set is reshuffled every epoch), so the residuals'
lag-1 autocorrelation shrinks the sample to an effective size before anything is called significant. The crossing
step's interval is Fieller's: the steps where the fitted line is within t standard errors of the threshold, the
line's own uncertainty and the noise of the rule's median of `window` steps both counted. A trend that is flat,
rising or not significant at the stated confidence gives no forecast (Fieller's interval is then unbounded).

What it cannot see: the fit extrapolates a straight line in ln(entropy), so an entropy that levels off above the
threshold (EVOL-RL's dip and recovery, Figure 3) is forecast to cross until it does level off; it forecasts the
entropy condition only, not the second signal or the moved policy that entropy_collapse also asks for; and a run
judged on few prompts a step is too noisy to forecast much earlier than the fall shows (benchmarks/RESULTS.md).

Pure Python: no Django, no numpy, so the web process can import it cheaply.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, median
from typing import Sequence

from . import trend
from .findings import ABSENT, QUIET_STEPS_TO_RESOLVE, finding, num, policy_moved, span

KIND = "entropy_collapse_forecast"
MIN_POINTS = 8  # logged steps a fit needs (six degrees of freedom before any autocorrelation)
MIN_DOF = 3.0  # below three effective degrees of freedom the t quantile's expansion (below) is off by over 1%


@dataclass(frozen=True)
class Trend:
    """ln(entropy) ≈ level + slope · (step − centre), fitted by least squares."""

    slope: float
    level: float  # the fitted ln(entropy) at `centre`
    centre: float  # the mean step of the points fitted
    sxx: float  # Σ (step − centre)²
    variance: float  # the residuals' variance, on the effective sample size
    dof: float  # effective degrees of freedom
    steps: tuple[int, int]  # the first and last step fitted

    def at(self, step: float) -> float:
        return self.level + self.slope * (step - self.centre)


def fit(steps: Sequence[int], values: Sequence[float]) -> Trend | None:
    """The least-squares line through (step, ln value) for positive values; None with fewer than MIN_POINTS of them,
    no spread of steps, or too few effective degrees of freedom."""
    points = [(s, math.log(v)) for s, v in zip(steps, values) if v is not None and v > 0]
    n = len(points)
    if n < MIN_POINTS:
        return None
    centre = sum(s for s, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    sxx = sum((s - centre) ** 2 for s, _ in points)
    if sxx <= 0:
        return None
    # ordinary least squares: b = Σ(x − x̄)(y − ȳ) / Σ(x − x̄)², a = ȳ at x̄ (Draper & Smith, Applied Regression
    # Analysis, ch. 1)
    slope = sum((s - centre) * (y - mean_y) for s, y in points) / sxx
    residuals = [y - mean_y - slope * (s - centre) for s, y in points]
    rss = sum(e * e for e in residuals)
    # lag-1 autocorrelation of the residuals, r₁ = Σ eₜeₜ₊₁ / Σ eₜ² (never below 0: alternating noise is not
    # made to look cleaner than independent noise; none of an exact fit, whose residuals are rounding)
    exact = rss <= 1e-24 * n
    r1 = 0.0 if exact else max(0.0, sum(a * b for a, b in zip(residuals, residuals[1:])) / rss)
    # the effective sample size of autocorrelated residuals, nₑ = n (1 − r₁)/(1 + r₁), and s² = Σe²/(nₑ − 2)
    # (Santer et al. 2000, "Statistical significance of trends and trend differences ...", J. Geophys. Res. 105:7337)
    effective = n * (1 - r1) / (1 + r1)
    if effective - 2 < MIN_DOF:
        return None
    return Trend(slope=slope, level=mean_y, centre=centre, sxx=sxx, variance=rss / (effective - 2),
                 dof=effective - 2, steps=(points[0][0], points[-1][0]))


def t_quantile(p: float, dof: float) -> float:
    """Student's t quantile from the normal one by the Cornish–Fisher expansion (Abramowitz & Stegun 26.7.5):
    within 0.1% of the exact value from 3 degrees of freedom on, for p up to 0.995."""
    z = NormalDist().inv_cdf(p)
    g1 = (z ** 3 + z) / 4
    g2 = (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96
    g3 = (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384
    g4 = (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160
    return z + g1 / dof + g2 / dof ** 2 + g3 / dof ** 3 + g4 / dof ** 4


def crossing(line: Trend, threshold: float, confidence: float, window: int) -> tuple[float, float, float] | None:
    """(expected, low, high): the step at which the fitted line reaches `threshold` (a ln entropy), and Fieller's
    interval for it at `confidence`, counting the noise of a median of `window` steps around the line; None when
    the line does not fall or the interval is unbounded (the slope is not significant at that confidence)."""
    if line.slope >= 0:
        return None
    t = t_quantile((1 + confidence) / 2, line.dof)
    # x₀ = x̄ + (y₀ − ȳ)/b solves y₀ = ȳ + b (x₀ − x̄) (inverse prediction)
    gap = threshold - line.level
    # the steps d = x − x̄ with (y₀ − ȳ − b d)² ≤ t² s² (k + d²/Sxx) (Fieller 1954, JRSS B 16:175; Draper & Smith,
    # Applied Regression Analysis, "inverse regression"), where k is the noise of the rule's median of `window` steps,
    # π/(2·window) of one step's variance (trend.py's √(π/2)), plus that of the line's level, 1/n
    k = (math.pi / 2) / window + 1 / (line.dof + 2)
    ts2 = t * t * line.variance
    # expanded: A d² − 2 g b d + (g² − t² s² k) ≤ 0, with A = b² − t² s²/Sxx
    a = line.slope ** 2 - ts2 / line.sxx
    if a <= 0:  # |b| / se(b) ≤ t: the slope is not significant, and the interval has no end
        return None
    half = math.sqrt(max(0.0, (gap * line.slope) ** 2 - a * (gap * gap - ts2 * k)))  # > 0 whenever a > 0 and s > 0
    low, high = (gap * line.slope - half) / a, (gap * line.slope + half) / a
    return line.centre + gap / line.slope, line.centre + low, line.centre + high


@dataclass(frozen=True)
class Forecast:
    expected: int  # the step the condition is expected to hold at
    low: int  # ... and the interval at `confidence`
    high: int
    confidence: float
    rate: float  # the share entropy changes by each step on the fitted trend (−0.041: falling 4.1% a step)
    fit_steps: tuple[int, int]
    start: float  # the start median the condition compares with
    start_steps: tuple[int, int]
    recent: float  # the median of the last `window` steps
    recent_steps: tuple[int, int]
    threshold: float  # fraction × start

    def headline(self) -> str:
        return headline(self.expected, self.low, self.high, self.confidence)


def headline(expected: float, low: float, high: float, confidence: float) -> str:
    """What the run page shows: 'collapse expected around step 22 (18–29 at 80%)'."""
    return f"collapse expected around step {expected:.0f} ({low:.0f}–{high:.0f} at {trend.percent(confidence)})"


def forecast(steps: Sequence[int], entropy: Sequence[float | None], *, fraction: float, window: int,
             start_window: int, fit_window: int, confidence: float) -> Forecast | None:
    """When the median entropy of the last `window` logged steps is expected to fall below `fraction` × the median of
    the first `start_window` (entropy_collapse's condition), from the trend of the last `fit_window` logged steps.
    None when that cannot be said: too few steps, a start of zero, the condition holding now or at any of the last
    QUIET_STEPS_TO_RESOLVE steps (the crossing is not ahead: entropy_collapse's alert is open, or was until its
    entropy swung back within its noise), or a trend flat, rising or not significant at `confidence`."""
    logged = [(s, v) for s, v in zip(steps, entropy) if v is not None]
    if len(logged) < max(MIN_POINTS, start_window + 1):
        return None
    head, tail = logged[:start_window], logged[-window:]
    start, recent = median(v for _, v in head), median(v for _, v in tail)
    threshold = fraction * start
    if threshold <= 0 or any(median(v for _, v in logged[max(0, end - window):end]) < threshold
                             for end in range(len(logged) - QUIET_STEPS_TO_RESOLVE + 1, len(logged) + 1)):
        return None
    fitted = logged[-fit_window:]
    line = fit([s for s, _ in fitted], [v for _, v in fitted])
    if line is None:
        return None
    found = crossing(line, math.log(threshold), confidence, window)
    if found is None:
        return None
    # the rule reads the median of the last `window` steps: the line at the window's middle, (window − 1)/2 steps
    # back (in the run's own spacing of logged steps)
    spacing = (line.steps[1] - line.steps[0]) / max(1, len(fitted) - 1)
    lag = (window - 1) / 2 * spacing
    # the condition holds from the first step past the crossing, and not yet at the last step: none before the next
    next_step = logged[-1][0] + 1
    expected, low, high = (max(next_step, math.ceil(x + lag)) for x in found)
    return Forecast(expected=expected, low=low, high=high, confidence=confidence, rate=math.exp(line.slope) - 1,
                    fit_steps=line.steps, start=start, start_steps=(head[0][0], head[-1][0]), recent=recent,
                    recent_steps=(tail[0][0], tail[-1][0]), threshold=threshold)


def entropy_collapse_forecast(history, rule: dict):
    """The step rule (registered in rules.py), judging a rules.History: a Finding while the forecast crossing is
    within `horizon` steps at the stated confidence (the interval's late end), None while it is not (or the condition
    holds already: entropy_collapse's own business, or the policy has not moved), ABSENT while it cannot be judged
    (no entropy, too few steps)."""
    entropy = history.series("entropy")
    if entropy is None or sum(v is not None for v in entropy) < max(MIN_POINTS, rule["start_window"] + 1):
        return ABSENT
    # a run that does not learn has nothing to collapse: its entropy swings with the prompts it samples
    movement = policy_moved(history, rule)
    if not movement.moved:
        return None
    found = forecast(history.steps, entropy, fraction=rule["fraction"], window=rule["window"],
                     start_window=rule["start_window"], fit_window=rule["fit_window"],
                     confidence=rule["confidence"])
    if found is None or found.high - history.steps[-1] > rule["horizon"]:
        return None
    parts = [f"entropy falling {trend.percent(-found.rate)} a step over steps {span(found.fit_steps)} "
             f"(median {num(found.recent)} over steps {span(found.recent_steps)}, from "
             f"{num(found.start)} over steps {span(found.start_steps)}); collapse "
             f"({trend.percent(rule['fraction'])} of the start, {num(found.threshold)}) expected around step "
             f"{found.expected}, {found.low}–{found.high} at {trend.percent(found.confidence)}"]
    if movement.said:
        parts.append(movement.said)
    return finding(
        history, KIND, rule["severity"], "; ".join(parts),
        expected_step=found.expected, low=found.low, high=found.high, confidence=found.confidence,
        rate=found.rate, entropy=found.recent, entropy_start=found.start, threshold=found.threshold,
        fraction=rule["fraction"], horizon=rule["horizon"], **movement.values,
    )
