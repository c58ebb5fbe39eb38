"""Collapse-alert rules: which alert conditions hold for a run right now (DESIGN §4.5).

Event ingestion calls ``evaluate_step_rules`` on every new training step with the run's
metric history (DESIGN §5 names plus ``invalid_ratio``, ``zero_variance_groups`` and
``truncated_ratio`` derived from the step's rollouts) and the run's thresholds
(``resolve_thresholds(team_overrides, run_overrides)``). Storing alerts, keeping one open
alert per (run, rule) and delivering them happen elsewhere; this module only judges.
The rules' parameters, defaults and documentation are in webapp/alerts/rule_specs.py.

The failure the rules watch for is the one the EVOL-RL paper documents for majority-only
label-free RL (TTRL): policy entropy collapses, responses get shorter, rollouts converge
on one answer, and pass@1 rises while pass@n falls (paper 000, Figures 1, 3 and 5;
Table 1). The degeneration rule watches for a different failure: the answers gone while the
text comes apart (noisier, or run on to the length limit), where nothing converges; the collapse
rules' messages then say how many answers are invalid instead of calling it convergence.
Figures in the paper text are images, so exact thresholds are our choice; each
rule's description says which observation it rests on and what its defaults mean.

Smoothing: every step-based rule reads the **median** of the last ``window`` steps
(missing and NaN values skipped), and a start value is the median of the first
``window`` logged values. With the default window of 3 a single wild step can neither
raise an alert nor resolve an open one, however extreme it is (a moving mean can be
dragged across a threshold by one outlier).

Pure Python: no Django, no numpy, so the web process can import it cheaply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from statistics import median
from typing import Callable, Sequence

from .rule_specs import STEP_RULE_KINDS, rule_thresholds
from rl.params import finite

# A mean length this close to max_completion_length counts as pinned at the limit when the
# run logs no truncated_ratio (a mean that high needs most rollouts to hit the cap).
_PINNED_MEAN_LENGTH = 0.95
# From this share of invalid answers on, the collapse rules do not read fewer distinct answers as agreement
# (EVOL-RL §2 leaves invalid answers out of the vote: at half invalid the majority is voted by a minority).
_MOSTLY_INVALID = 0.5
_MAX_FAILURE_MESSAGE = 1000  # characters of a failure message quoted in the alert


# --------------------------------------------------------------------------- evaluation


@dataclass
class History:
    steps: list[int]  # ascending step numbers, one per trained step
    metrics: dict[str, list[float | None]]  # name -> values aligned with steps; None where missing
    max_completion_length: int | None = None
    # True when every value is a finite float or None already (the server cleans what it loads), so
    # series() need not check each one again: ingestion judges every step of a batch.
    clean: bool = False

    def series(self, name: str) -> list[float | None] | None:
        """The metric aligned with ``steps`` (NaN and non-numbers as None), or None if never logged."""
        raw = self.metrics.get(name)
        if raw is None:
            return None
        n = len(self.steps)
        values = list(raw[:n]) if self.clean else [finite(v) for v in list(raw)[:n]]
        values += [None] * (n - len(values))
        return values if values.count(None) != n else None


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
# and found it healthy, and _ABSENT when it could not judge (too few steps, metric missing).
_ABSENT = object()


def evaluate_step_rules(history: History, thresholds: dict[str, dict],
                        kinds: Sequence[str] = STEP_RULE_KINDS) -> dict[str, Finding | None]:
    """The step-based rules (STEP_RULE_KINDS, or those of ``kinds``) judged at the latest step of ``history``.

    ``{kind: Finding}`` where the condition holds, ``{kind: None}`` where the rule could
    judge and the run looks healthy (an open alert then resolves); a kind is absent when
    it is disabled or cannot be judged yet (metric never logged, too few steps). The engine
    asks for one kind at a time, so that a rule that raises stops no other.
    """
    results: dict[str, Finding | None] = {}
    if not history.steps:
        return results
    for kind in kinds:
        rule = rule_thresholds(thresholds, kind)
        if not rule["enabled"]:
            continue
        outcome = _STEP_RULES[kind](history, rule)
        if outcome is not _ABSENT:
            results[kind] = outcome
    return results


def evaluate_stalled(seconds_since_last_event: float, step: int | None, thresholds: dict | None) -> Finding | None:
    """A Finding when a running run has been silent for at least ``minutes``; else None."""
    rule = rule_thresholds(thresholds, "stalled")
    seconds = finite(seconds_since_last_event)
    if not rule["enabled"] or seconds is None or seconds < rule["minutes"] * 60:
        return None
    minutes = seconds / 60
    return Finding(
        "stalled", rule["severity"], step,
        f"no event for {minutes:.0f} minutes while running (threshold {_num(rule['minutes'])} minutes)",
        _values(minutes=minutes, threshold_minutes=rule["minutes"]),
    )


def evaluate_run_failed(message: str, step: int | None, thresholds: dict | None) -> Finding | None:
    """Always a Finding with the failure message, unless the rule is disabled."""
    rule = rule_thresholds(thresholds, "run_failed")
    if not rule["enabled"]:
        return None
    text = " ".join(str(message or "").split()) or "no message"
    if len(text) > _MAX_FAILURE_MESSAGE:
        text = text[: _MAX_FAILURE_MESSAGE - 1] + "…"
    return Finding("run_failed", rule["severity"], step, f"run failed: {text}", {})


# --------------------------------------------------------------------------- the step rules


def _entropy_collapse(history: History, rule: dict):
    entropy = history.series("entropy")
    window = rule["window"]
    judged = _latest_and_start(entropy, window)
    if judged is None:
        return _ABSENT
    recent, start = judged
    share = recent / start
    if share >= rule["fraction"]:
        return None
    critical = share < rule["critical_fraction"]
    threshold = f"critical below {_pct(rule['critical_fraction'])}" if critical else f"threshold {_pct(rule['fraction'])}"
    message = f"entropy fell to {_num(recent)}, {_pct(share)} of its start {_num(start)} ({threshold})"
    invalid = _mostly_invalid(history, window)
    extra = {}
    if invalid is not None:  # sampling narrowed onto no answer at all: say so, it is not answers converging
        message += f"; {_pct(invalid)} of answers invalid"
        extra["invalid_ratio"] = invalid
    return _finding(
        history, "entropy_collapse", "critical" if critical else rule["severity"], message,
        entropy=recent, entropy_start=start, share=share, fraction=rule["fraction"],
        critical_fraction=rule["critical_fraction"], **extra,
    )


def _diversity_collapse(history: History, rule: dict):
    window = rule["window"]
    # similarity is judged by its rise, not as a fraction of its start, so a zero start is fine
    similarity = _latest_and_start(history.series("similarity/mean"), window, positive_start=False)
    unique = _latest_and_start(history.series("unique_answers"), window)
    if similarity is None and unique is None:
        return _ABSENT
    reasons, values = [], {}
    if similarity is not None:
        recent, start = similarity
        values.update(similarity=recent, similarity_start=start)
        if recent >= rule["similarity_level"] and recent - start >= rule["similarity_rise"]:
            reasons.append(
                f"similarity/mean rose to {_num(recent)} from {_num(start)} "
                f"(threshold {_num(rule['similarity_level'])} and +{_num(rule['similarity_rise'])})"
            )
    invalid = _mostly_invalid(history, window)
    if unique is not None:
        recent, start = unique
        values.update(unique_answers=recent, unique_answers_start=start)
        # unique_answers counts valid answers only: when most are invalid, fewer of them is lost answers, not
        # agreement (the degeneration and invalid_answers rules say what happened)
        if invalid is None and recent <= rule["unique_fraction"] * start:
            reasons.append(
                f"unique answers per prompt fell to {_num(recent)}, {_pct(recent / start)} of its start "
                f"{_num(start)} (threshold {_pct(rule['unique_fraction'])})"
            )
    if not reasons:
        return None
    values.update(similarity_level=rule["similarity_level"], similarity_rise=rule["similarity_rise"],
                  unique_fraction=rule["unique_fraction"])
    if invalid is None:
        message = "rollouts are converging: " + "; ".join(reasons)
    else:  # near-duplicate text with no answer in it converges on nothing
        message = f"rollouts are near duplicates: {'; '.join(reasons)}; {_pct(invalid)} of answers invalid"
        values["invalid_ratio"] = invalid
    return _finding(history, "diversity_collapse", rule["severity"], message, **values)


def _majority_lock_in(history: History, rule: dict):
    window = rule["window"]
    ratio = _recent_if_enough(history.series("majority_ratio"), window, needed=window)
    if ratio is None:
        return _ABSENT
    if ratio < rule["consensus"]:
        return None
    return _finding(
        history, "majority_lock_in", rule["severity"],
        f"majority_ratio is {_num(ratio)} over the last {window} steps (threshold {_num(rule['consensus'])}): "
        "nearly every rollout agrees with its prompt's majority answer",
        majority_ratio=ratio, consensus=rule["consensus"],
    )


def _pass_at_k_divergence(history: History, rule: dict):
    window, lookback = rule["window"], rule["lookback"]
    source = _pass_at_k_source(history, needed=window + lookback)
    if source is None:
        return _ABSENT
    name_1, name_k, k, pairs = source
    smoothed = [_median_pair(pairs[i - window + 1: i + 1]) for i in range(window - 1, len(pairs))]
    now_1, now_k = smoothed[-1]
    # the reference is pass@k's best smoothed point at least `lookback` points back, so a
    # pass@k that fell and then plateaued keeps the alert open (TTRL stays collapsed, Fig. 3)
    before_1, before_k = max(smoothed[: len(smoothed) - lookback], key=lambda pair: pair[1])
    drop = before_k - now_k
    if drop <= 0 or drop < rule["min_drop"] or now_1 < before_1:
        return None
    trend = "rose" if now_1 > before_1 else "held"
    return _finding(
        history, "pass_at_k_divergence", rule["severity"],
        f"{name_k} fell from its best {_num(before_k)} to {_num(now_k)} (−{_num(drop)}, threshold "
        f"{_num(rule['min_drop'])}) while {name_1} {trend} from {_num(before_1)} to {_num(now_1)}",
        pass_at_1=now_1, pass_at_1_before=before_1, pass_at_k=now_k, pass_at_k_before=before_k,
        k=k, drop=drop, min_drop=rule["min_drop"],
    )


def _length_collapse(history: History, rule: dict):
    window = rule["window"]
    lengths = history.series("response_length/mean")
    shrunk = _latest_and_start(lengths, window)
    pinned = _pinned_at_limit(history, lengths, rule)
    if shrunk is None and pinned is None:
        return _ABSENT
    if shrunk is not None:
        recent, start = shrunk
        if recent < rule["fraction"] * start:
            return _finding(
                history, "length_collapse", rule["severity"],
                f"mean response length fell to {_num(recent)}, {_pct(recent / start)} of its start {_num(start)} "
                f"(threshold {_pct(rule['fraction'])})",
                length=recent, length_start=start, fraction=rule["fraction"],
            )
    if pinned is not None and pinned.fires:
        return _finding(history, "length_collapse", rule["severity"], pinned.message, **pinned.values)
    return None


@dataclass
class _Pinned:
    fires: bool
    message: str
    values: dict


def _pinned_at_limit(history: History, lengths: list[float | None] | None, rule: dict) -> _Pinned | None:
    """Whether rollouts are pinned at max_completion_length; None when that cannot be judged."""
    window = rule["window"]
    truncated = _recent_if_enough(history.series("truncated_ratio"), window, needed=window)
    if truncated is not None:
        return _Pinned(
            truncated >= rule["pinned_ratio"],
            f"responses are pinned at the length limit: {_pct(truncated)} truncated at max_completion_length "
            f"(threshold {_pct(rule['pinned_ratio'])})",
            {"truncated_ratio": truncated, "pinned_ratio": rule["pinned_ratio"]},
        )
    limit = history.max_completion_length
    if history.series("truncated_ratio") is not None or not limit or limit <= 0:
        return None  # truncated_ratio logged but too short yet, or no limit known
    recent = _recent_if_enough(lengths, window, needed=window)
    if recent is None:
        return None
    return _Pinned(
        recent >= _PINNED_MEAN_LENGTH * limit,
        f"responses are pinned at the length limit: mean length {_num(recent)} is {_pct(recent / limit)} of "
        f"max_completion_length {limit} (threshold {_pct(_PINNED_MEAN_LENGTH)})",
        {"length": recent, "max_completion_length": float(limit), "pinned_length_fraction": _PINNED_MEAN_LENGTH},
    )


def _degeneration(history: History, rule: dict):
    """The answers went from mostly valid to nearly all invalid while the text came apart: noisier (entropy up)
    or run on to the length limit (often one token repeated, entropy then down). Not a collapse: nothing converges."""
    window = rule["window"]
    invalid_series = history.series("invalid_ratio")
    invalid_logged = _logged(invalid_series)
    entropy_series = history.series("entropy")
    entropy = _latest_and_start(entropy_series, window)
    pinned = _pinned_at_limit(history, history.series("response_length/mean"), rule)
    # the start may overlap the latest window: the answers' fall is judged as soon as one step follows the start
    if len(invalid_logged) < window + 1 or (entropy is None and pinned is None):
        return _ABSENT
    invalid, invalid_start = _recent(invalid_series, window), median(invalid_logged[:window])
    if invalid is None:  # logged before, not over the latest steps (a run's rollouts grouped behind its metrics)
        return _ABSENT
    rose = entropy is not None and entropy[0] >= rule["entropy_rise"] * entropy[1]
    # invalid from the start is a prompt format or a limit too short for the policy (invalid_answers says so)
    if invalid < rule["min_invalid"] or invalid_start >= rule["min_invalid"] or not (rose or (pinned and pinned.fires)):
        return None
    values = {"invalid_ratio": invalid, "invalid_start": invalid_start, "min_invalid": rule["min_invalid"]}
    parts = []
    if entropy is not None:
        recent, start = entropy
        first_step = history.steps[next(i for i, v in enumerate(entropy_series) if v is not None)]
        trend = "rose" if recent > start else "fell" if recent < start else "held"
        said = f"entropy {trend} from {_num(start)} to {_num(recent)} over {history.steps[-1] - first_step} steps"
        if rose:
            said += f" ({_num(recent / start)}× its start, threshold {_num(rule['entropy_rise'])}×)"
        parts.append(said)
        values.update(entropy=recent, entropy_start=start, rise=recent / start, entropy_rise=rule["entropy_rise"])
    parts.append(f"{_pct(invalid)} of answers invalid, from {_pct(invalid_start)} at the start "
                 f"(threshold {_pct(rule['min_invalid'])})")
    parts += _length_seen(history, window, values)
    return _finding(history, "degeneration", rule["severity"], "; ".join(parts), **values)


def _length_seen(history: History, window: int, values: dict) -> list[str]:
    """What the lengths say, against max_completion_length when it is known (added to ``values``)."""
    said = []
    length = _recent(history.series("response_length/mean") or [], window)
    limit = history.max_completion_length
    if length is not None:
        values["length"] = length
        if limit and limit > 0:
            values["max_completion_length"] = float(limit)
            where = "at" if length >= _PINNED_MEAN_LENGTH * limit else "under"
            said.append(f"mean length {_num(length)}, {where} the {limit}-token limit")
        else:
            said.append(f"mean length {_num(length)}")
    truncated = _recent(history.series("truncated_ratio") or [], window)
    if truncated is not None:
        values["truncated_ratio"] = truncated
        said.append(f"{_pct(truncated)} truncated at the limit")
    return said


def _ratio_rule(kind: str, metric: str, describe: Callable[[float, float], str]):
    """A rule that opens when the smoothed share ``metric`` reaches ``max_ratio``."""

    def rule_fn(history: History, rule: dict):
        window = rule["window"]
        ratio = _recent_if_enough(history.series(metric), window, needed=window)
        if ratio is None:
            return _ABSENT
        if ratio < rule["max_ratio"]:
            return None
        return _finding(history, kind, rule["severity"], describe(ratio, rule["max_ratio"]),
                        **{metric: ratio, "max_ratio": rule["max_ratio"]})

    return rule_fn


_STEP_RULES = {
    "entropy_collapse": _entropy_collapse,
    "diversity_collapse": _diversity_collapse,
    "majority_lock_in": _majority_lock_in,
    "pass_at_k_divergence": _pass_at_k_divergence,
    "length_collapse": _length_collapse,
    "degeneration": _degeneration,
    "invalid_answers": _ratio_rule(
        "invalid_answers", "invalid_ratio",
        lambda ratio, limit: f"{_pct(ratio)} of rollouts have no valid boxed answer (threshold {_pct(limit)})",
    ),
    "zero_variance_groups": _ratio_rule(
        "zero_variance_groups", "zero_variance_groups",
        lambda ratio, limit: (
            f"{_pct(ratio)} of prompts gave every trained rollout the same reward, so GRPO learns nothing from "
            f"them (threshold {_pct(limit)})"
        ),
    ),
}


# --------------------------------------------------------------------------- series helpers


def _mostly_invalid(history: History, window: int) -> float | None:
    """The smoothed invalid_ratio when at least half the answers are invalid (a vote cast by a minority), else
    None: then fewer distinct answers or narrower sampling is not the answers converging."""
    invalid = _recent(history.series("invalid_ratio") or [], window)
    return invalid if invalid is not None and invalid >= _MOSTLY_INVALID else None


def _logged(values: Sequence[float | None] | None) -> list[float]:
    return [v for v in values or () if v is not None]


def _recent(values: Sequence[float | None], window: int) -> float | None:
    """Median of the last ``window`` steps, missing values skipped; None if all are missing."""
    tail = _logged(values[-window:])
    return median(tail) if tail else None


def _recent_if_enough(values: Sequence[float | None] | None, window: int, needed: int) -> float | None:
    """The smoothed latest value, or None with fewer than ``needed`` logged values."""
    if values is None or len(_logged(values)) < needed:
        return None
    return _recent(values, window)


def _latest_and_start(
    values: Sequence[float | None] | None, window: int, positive_start: bool = True
) -> tuple[float, float] | None:
    """(smoothed latest, start), or None when the metric cannot be compared with its start.

    The start is the median of the first ``window`` logged values; judging needs 2 × window
    logged values so that the start and the latest window do not overlap. A fraction of
    the start needs a start > 0 (``positive_start``); a zero or negative start is not evaluable.
    """
    logged = _logged(values)
    if len(logged) < 2 * window:
        return None
    start = median(logged[:window])
    recent = _recent(values, window)
    if recent is None or (positive_start and start <= 0):
        return None
    return recent, start


def _pass_at_k_source(history: History, needed: int):
    """(pass@1 name, pass@k name, k, [(pass@1, pass@k)] at steps logging both) with ≥ needed points.

    Held-out evaluation first (the largest logged eval/pass@K), the training batch's figures
    otherwise; None when neither has enough points (unlabelled prompts never do).
    """
    for prefix in ("eval/", ""):
        k = _largest_k(history, prefix)
        if k is None:
            continue
        name_1, name_k = f"{prefix}pass@1", f"{prefix}pass@{k}"
        first, kth = history.series(name_1), history.series(name_k)
        if first is None or kth is None:
            continue
        pairs = [(a, b) for a, b in zip(first, kth) if a is not None and b is not None]
        if len(pairs) >= needed:
            return name_1, name_k, float(k), pairs
    return None


def _largest_k(history: History, prefix: str) -> int | None:
    pattern = re.compile(re.escape(prefix) + r"pass@(\d+)")
    ks = [int(m.group(1)) for name in history.metrics if (m := pattern.fullmatch(name)) and int(m.group(1)) > 1]
    return max(ks) if ks else None


def _median_pair(pairs: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return median(p[0] for p in pairs), median(p[1] for p in pairs)


def _finding(history: History, kind: str, severity: str, message: str, **values: float) -> Finding:
    return Finding(kind, severity, history.steps[-1], message, _values(**values))


def _values(**values: float) -> dict[str, float]:
    """Plain JSON-safe floats, rounded to 6 significant digits."""
    return {name: float(f"{float(v):.6g}") for name, v in values.items()}


# --------------------------------------------------------------------------- formatting


def _num(x: float) -> str:
    """A number for a message: 3 significant digits, no exponent for everyday magnitudes."""
    if abs(x) >= 100 or x == int(x):
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 1e-3 else f"{x:.2g}"


def _pct(share: float) -> str:
    """A share as a percentage; one decimal below 10% so 5.4% is not shown as the 5% threshold."""
    percent = 100 * share
    if abs(percent) < 10 and round(percent, 1) != round(percent):
        return f"{percent:.1f}%"
    return f"{percent:.0f}%"
