"""Collapse-alert rules: which alert conditions hold for a run right now (DESIGN §4.5).

Event ingestion calls ``evaluate_step_rules`` on every new training step with the run's
metric history (DESIGN §5 names plus ``invalid_ratio``, ``zero_variance_groups`` and
``truncated_ratio`` derived from the step's rollouts) and the run's thresholds
(``resolve_thresholds(team_overrides, run_overrides)``). Storing alerts, keeping one open
alert per (run, rule) and delivering them happen elsewhere; this module only judges.

The failure the rules watch for is the one the EVOL-RL paper documents for majority-only
label-free RL (TTRL): policy entropy collapses, responses get shorter, rollouts converge
on one answer, and pass@1 rises while pass@n falls (paper 000, Figures 1, 3 and 5;
Table 1). Figures in the paper text are images, so exact thresholds are our choice; each
rule's description says which observation it rests on and what its defaults mean.

Smoothing: every step-based rule reads the **median** of the last ``window`` steps
(missing and NaN values skipped), and a start value is the median of the first
``window`` logged values. With the default window of 3 a single wild step can neither
raise an alert nor resolve an open one, however extreme it is (a moving mean can be
dragged across a threshold by one outlier).

Pure Python: no Django, no numpy, so the web process can import it cheaply.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from statistics import median
from typing import Callable, Sequence

RULE_KINDS = (
    "entropy_collapse",
    "diversity_collapse",
    "majority_lock_in",
    "pass_at_k_divergence",
    "length_collapse",
    "invalid_answers",
    "zero_variance_groups",
    "stalled",
    "run_failed",
)
SEVERITIES = ("info", "warning", "critical")
STEP_RULE_KINDS = RULE_KINDS[:7]  # judged from the metric history; stalled and run_failed are not

FIELD_PREFIX = "alert_rules"
_TRUE_WORDS = {"true", "1", "yes", "on"}
_FALSE_WORDS = {"false", "0", "no", "off"}
# A mean length this close to max_completion_length counts as pinned at the limit when the
# run logs no truncated_ratio (a mean that high needs most rollouts to hit the cap).
_PINNED_MEAN_LENGTH = 0.95
_MAX_FAILURE_MESSAGE = 1000  # characters of a failure message quoted in the alert


class AlertRuleError(ValueError):
    """A rejected alert-rule override.

    ``field`` names what was wrong, e.g. ``"alert_rules.entropy_collapse.fraction"``
    (``"alert_rules.<kind>"`` for an unknown kind, ``"alert_rules"`` for non-dict input);
    the API returns it as ``{"error": str(exc), "field": exc.field}``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Param:
    name: str
    type: str  # 'int' | 'float' | 'bool' | 'choice'
    default: object
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple = ()

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "type": self.type,
            "default": self.default,
            "help": self.help,
            "min": self.min,
            "max": self.max,
            "choices": list(self.choices),
        }

    def range_text(self) -> str:
        if self.type == "bool":
            return "true or false"
        if self.type == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        kind = "an integer" if self.type == "int" else "a number"
        low = "-inf" if self.min is None else _plain_number(self.min)
        high = "inf" if self.max is None else _plain_number(self.max)
        return f"{kind} in [{low}, {high}]"

    def coerce(self, value: object, field_name: str) -> object:
        """``value`` converted to this parameter's type and checked against its range."""
        converted = self._convert(value)
        if converted is None:
            raise self._error(value, field_name)
        if self.type in ("int", "float"):
            if (self.min is not None and converted < self.min) or (self.max is not None and converted > self.max):
                raise self._error(value, field_name)
        return converted

    def _convert(self, value: object) -> object:
        if self.type == "bool":
            return _to_bool(value)
        if self.type == "choice":
            text = value.strip() if isinstance(value, str) else value
            return text if text in self.choices else None
        number = _to_number(value)
        if self.type == "int":
            return int(number) if number is not None and number.is_integer() else None
        return number

    def _error(self, value: object, field_name: str) -> AlertRuleError:
        return AlertRuleError(field_name, f"{field_name}={value!r} is invalid: expected {self.range_text()}")


@dataclass(frozen=True)
class RuleSpec:
    kind: str
    title: str
    description: str  # one paragraph for docs and the rules page: the paper evidence and what the defaults mean
    metrics: tuple[str, ...]  # metric names the rule reads (the run page marks alerts on these charts)
    params: tuple[Param, ...]  # always starts with `enabled` and `severity`

    def to_json(self) -> dict:
        return {
            "kind": self.kind,
            "title": self.title,
            "description": self.description,
            "metrics": list(self.metrics),
            "params": [p.to_json() for p in self.params],
        }

    def param(self, name: str) -> Param | None:
        return next((p for p in self.params if p.name == name), None)


def _common(severity: str) -> tuple[Param, Param]:
    return (
        Param("enabled", "bool", True, "Evaluate this rule at all."),
        Param("severity", "choice", severity, "Severity of the alert this rule opens.", choices=SEVERITIES),
    )


def _window(default: int = 3) -> Param:
    return Param(
        "window", "int", default,
        "Smoothing: the rule reads the median of the last this many steps, so one noisy step neither "
        "opens nor resolves an alert; start values are the median of the first this many logged values.",
        1, 100,
    )


def _ratio(name: str, default: float, help_text: str) -> Param:
    return Param(name, "float", default, help_text, 0.0, 1.0)


RULES: dict[str, RuleSpec] = {
    spec.kind: spec
    for spec in (
        RuleSpec(
            kind="entropy_collapse",
            title="Entropy collapse",
            description=(
                "Policy entropy fell far below where the run started. EVOL-RL (Figures 1 and 3) shows it as the "
                "first symptom of majority-only training: TTRL's entropy drops sharply in the first steps and "
                "stays near zero for the rest of the run, while EVOL-RL's dips too but recovers after its "
                "\"evolving point\" (so an alert opened in that dip resolves). Defaults: the median entropy of the "
                "last 3 steps below 20% of its start (the median of the first 3 logged steps) opens a warning; "
                "below 5% it becomes critical. Needs at least 2 × window logged steps."
            ),
            metrics=("entropy",),
            params=_common("warning") + (
                _window(),
                # EVOL-RL Fig. 3: TTRL's entropy ends near zero; a fall to a fifth of the start is far past noise
                _ratio("fraction", 0.2, "Open when smoothed entropy < fraction × its start value."),
                # EVOL-RL Fig. 1/3: "collapses entropy": at 5% of the start, sampling is nearly deterministic
                _ratio("critical_fraction", 0.05, "Escalate to critical below this fraction of the start (0 never)."),
            ),
        ),
        RuleSpec(
            kind="diversity_collapse",
            title="Diversity collapse",
            description=(
                "Rollouts for the same prompt became near duplicates: similarity/mean up, unique answers down. "
                "EVOL-RL (Figure 1, \"sustains reasoning diversity\"; the similarity-matrix case study, Figure 8 "
                "of the conference version) rewards novelty precisely because majority-only training homogenises "
                "reasoning traces. Opens when either signal holds: the smoothed similarity/mean is at least 0.9 "
                "and at least 0.1 above its start (cosine similarity of unrelated solutions to one problem is "
                "already high, so the rise matters as much as the level), or unique answers per prompt fell to "
                "40% of their start or less (e.g. 5 distinct answers down to 2). Either signal alone can judge "
                "the run; each needs 2 × window logged steps."
            ),
            metrics=("similarity/mean", "unique_answers"),
            params=_common("warning") + (
                _window(),
                # EVOL-RL conf. Fig. 8: majority reasoning paths are similar but not identical; ≥ 0.9 is near-duplicate
                _ratio("similarity_level", 0.9, "Similarity branch: smoothed similarity/mean at least this ..."),
                # EVOL-RL Fig. 1: the drift is what matters; +0.1 above the start is well beyond step noise
                _ratio("similarity_rise", 0.1, "... and at least this much above its start value."),
                # EVOL-RL Fig. 1 "drives pass@n down": fewer distinct answers means fewer chances per prompt
                _ratio("unique_fraction", 0.4, "Answer branch: smoothed unique_answers ≤ this fraction of its start."),
            ),
        ),
        RuleSpec(
            kind="majority_lock_in",
            title="Majority lock-in",
            description=(
                "Almost every rollout agrees with its prompt's majority answer, so the majority-vote reward is "
                "nearly constant and the pseudo-label can no longer improve. EVOL-RL (Figure 5) shows TTRL's "
                "maj@16 reaching a plateau early and staying there (\"locked in, unable to discover better "
                "solutions\"). Default: the median majority_ratio of the last 3 steps at or above 0.95, i.e. "
                "about 61 of 64 votes on the majority answer. Needs at least window logged steps."
            ),
            metrics=("majority_ratio",),
            params=_common("warning") + (
                _window(),
                # EVOL-RL Fig. 5: TTRL's consensus plateaus; at 95% agreement a 64-vote group has ≤ 3 dissenters
                _ratio("consensus", 0.95, "Open when smoothed majority_ratio ≥ this."),
            ),
        ),
        RuleSpec(
            kind="pass_at_k_divergence",
            title="pass@k divergence",
            description=(
                "pass@k falls while pass@1 holds or rises: the signature of majority-only collapse in EVOL-RL "
                "(Figure 1: \"pass@1 may rise but pass@n drops\"; Table 1: TTRL trained on MATH-500 raises "
                "Qwen3-4B's MATH pass@1 from 67.4 to 79.3 while its pass@16 falls from 89.6 to 83.2, and "
                "AIME24 pass@16 falls from 32.4 to 23.2 when trained on AIME24 itself). Uses eval/pass@1 with "
                "the largest logged eval/pass@K when there are enough evaluations, otherwise the training "
                "pass@1 and pass@16; absent for prompts without held-out labels. Defaults: each point is the "
                "median of 3 logged points; the latest is compared with pass@k's best point at least 3 logged "
                "points earlier, and the alert opens when pass@k is at least 0.05 below it (5 points, smaller "
                "than the 6 to 16 point losses of Table 1) while pass@1 is no lower than it was then. It stays "
                "open while pass@k stays down, as TTRL's does."
            ),
            metrics=("pass@1", "pass@16", "eval/pass@1", "eval/pass@16"),
            params=_common("warning") + (
                Param(
                    "window", "int", 3,
                    "Smoothing: each side of the comparison is the median of this many logged points.", 1, 100,
                ),
                # EVOL-RL Fig. 1: the divergence builds over many steps; compare with points well before the latest
                Param(
                    "lookback", "int", 3,
                    "Compare the latest smoothed point with pass@k's best smoothed point at least this many logged "
                    "points earlier.", 1, 1000,
                ),
                # EVOL-RL Table 1: TTRL's pass@16 losses are 6 to 16 points; 5 points is below all of them
                _ratio("min_drop", 0.05, "Open when pass@k fell by at least this (absolute) and pass@1 did not fall."),
            ),
        ),
        RuleSpec(
            kind="length_collapse",
            title="Length collapse",
            description=(
                "Responses shrank to a fraction of their start, or are pinned at max_completion_length. "
                "EVOL-RL (Figures 1 and 3) shows majority-only training \"shortens reasoning\": TTRL's mean "
                "length falls in the first steps and never recovers, while EVOL-RL's grows again. Defaults: "
                "the median response_length/mean of the last 3 steps below half its start opens a warning; so "
                "does a median truncated_ratio of 0.5 or more (half the rollouts cut off, usually without a "
                "boxed answer), or, when truncated_ratio is not logged, a mean length at 95% of "
                "max_completion_length or more. The message says which."
            ),
            metrics=("response_length/mean", "truncated_ratio"),
            params=_common("warning") + (
                _window(),
                # EVOL-RL Fig. 1/3: TTRL "shortens reasoning"; halving the length is far beyond step noise
                _ratio("fraction", 0.5, "Open when smoothed mean length < fraction × its start value."),
                # truncated rollouts carry no boxed answer, so at half truncated the vote runs on a minority
                _ratio("pinned_ratio", 0.5, "Open when smoothed truncated_ratio ≥ this (pinned at the limit)."),
            ),
        ),
        RuleSpec(
            kind="invalid_answers",
            title="Invalid answers",
            description=(
                "Many rollouts have no valid boxed answer. EVOL-RL scores such a response −1 (its validity "
                "check, §2) and leaves it out of the vote and the similarity matrix, so when invalid answers "
                "dominate the pseudo-label is voted by a minority of the samples and the reward mostly teaches "
                "format. Default: the median invalid_ratio of the last 3 steps at 0.5 or more. Often a symptom "
                "of truncation (see length_collapse) or of a prompt without a \\boxed{} instruction."
            ),
            metrics=("invalid_ratio",),
            params=_common("warning") + (
                _window(),
                # EVOL-RL §2 validity: invalid answers get −1; at half invalid the majority is voted by a minority
                _ratio("max_ratio", 0.5, "Open when smoothed invalid_ratio ≥ this."),
            ),
        ),
        RuleSpec(
            kind="zero_variance_groups",
            title="Zero-variance groups",
            description=(
                "Most prompts gave every trained rollout the same reward, so GRPO's group-normalised advantage "
                "is zero and those prompts teach nothing. Under majority-only rewards this is what lock-in looks "
                "like from the optimiser's side (EVOL-RL Figures 3 and 5: TTRL stops improving once consensus "
                "sets in); R-Zero keeps only questions with 3 to 7 of 10 answers on the majority for the same "
                "reason. EVOL-RL's novelty term keeps rewards varied inside a unanimous group, so it rarely "
                "trips this rule. Default: the median zero_variance_groups of the last 3 steps at 0.8 or more "
                "(four prompts in five carry no gradient)."
            ),
            metrics=("zero_variance_groups",),
            params=_common("warning") + (
                _window(),
                # R-Zero's 3..7-of-10 filter drops unanimous groups; at 80% unanimous, 4 in 5 prompts are wasted
                _ratio("max_ratio", 0.8, "Open when smoothed zero_variance_groups ≥ this."),
            ),
        ),
        RuleSpec(
            kind="stalled",
            title="Stalled run",
            description=(
                "A running run wrote no event for a while. The trainer flushes its event log at least once per "
                "step (DESIGN §4.2), so silence means a hung generation, a collective deadlock or a child killed "
                "without a status event. Default: 15 minutes, longer than a normal step of the default setups; "
                "raise it for very long steps (e.g. 64 votes × 12k tokens on a large policy)."
            ),
            metrics=(),
            params=_common("warning") + (
                # DESIGN §4.2: events at least once per step; 15 minutes exceeds a normal step of the defaults
                Param("minutes", "float", 15.0, "Open after this many minutes without an event while running.", 1.0, 10080.0),
            ),
        ),
        RuleSpec(
            kind="run_failed",
            title="Run failed",
            description=(
                "The trainer exited with a failed status (a crash, an out-of-memory kill, a rejected config). "
                "Always raised, critical by default, with the failure message; disable it to silence it."
            ),
            metrics=(),
            params=_common("critical"),
        ),
    )
}


def defaults() -> dict[str, dict]:
    """Every rule's default thresholds: ``{kind: {"enabled": True, "severity": ..., **params}}``."""
    return {kind: {p.name: p.default for p in RULES[kind].params} for kind in RULE_KINDS}


def validate_overrides(overrides: object) -> dict:
    """A partial ``{kind: {param: value}}`` with values coerced ("0.3" → 0.3, "true" → True).

    Raises AlertRuleError naming the field and the allowed values for non-dict input, an
    unknown kind or parameter, a wrong type or an out-of-range value. None means no overrides.
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise AlertRuleError(FIELD_PREFIX, f"{FIELD_PREFIX} must be an object {{rule kind: {{parameter: value}}}}")
    result = {}
    for kind, params in overrides.items():
        field_name = f"{FIELD_PREFIX}.{kind}"
        if kind not in RULES:
            raise AlertRuleError(field_name, f"unknown alert rule {kind!r}: expected one of {', '.join(RULE_KINDS)}")
        if not isinstance(params, dict):
            raise AlertRuleError(field_name, f"{field_name} must be an object {{parameter: value}}")
        result[kind] = _validate_rule_params(RULES[kind], params)
    return result


def _validate_rule_params(spec: RuleSpec, params: dict) -> dict:
    coerced = {}
    for name, value in params.items():
        field_name = f"{FIELD_PREFIX}.{spec.kind}.{name}"
        param = spec.param(name) if isinstance(name, str) else None
        if param is None:
            known = ", ".join(p.name for p in spec.params)
            raise AlertRuleError(field_name, f"unknown parameter {name!r} for alert rule {spec.kind}: expected one of {known}")
        coerced[name] = param.coerce(value, field_name)
    return coerced


def resolve_thresholds(*layers: dict | None) -> dict[str, dict]:
    """Defaults, then each layer on top in order (team overrides, then run overrides).

    Layers are validated again here, so a stale stored override fails loudly instead of
    reaching a rule as a string.
    """
    resolved = defaults()
    for layer in layers:
        for kind, params in validate_overrides(layer).items():
            resolved[kind].update(params)
    return resolved


def _rule_thresholds(thresholds: dict | None, kind: str) -> dict:
    """One rule's thresholds, defaults filled for anything the caller left out."""
    merged = {p.name: p.default for p in RULES[kind].params}
    merged.update((thresholds or {}).get(kind) or {})
    return merged


# --------------------------------------------------------------------------- evaluation


@dataclass
class History:
    steps: list[int]  # ascending step numbers, one per trained step
    metrics: dict[str, list[float | None]]  # name -> values aligned with steps; None where missing
    max_completion_length: int | None = None

    def series(self, name: str) -> list[float | None] | None:
        """The metric aligned with ``steps`` (NaN and non-numbers as None), or None if never logged."""
        raw = self.metrics.get(name)
        if raw is None:
            return None
        values = [_finite(v) for v in list(raw)[: len(self.steps)]]
        values += [None] * (len(self.steps) - len(values))
        return values if any(v is not None for v in values) else None


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


def evaluate_step_rules(history: History, thresholds: dict[str, dict]) -> dict[str, Finding | None]:
    """The seven step-based rules judged at the latest step of ``history``.

    ``{kind: Finding}`` where the condition holds, ``{kind: None}`` where the rule could
    judge and the run looks healthy (an open alert then resolves); a kind is absent when
    it is disabled or cannot be judged yet (metric never logged, too few steps).
    """
    results: dict[str, Finding | None] = {}
    if not history.steps:
        return results
    for kind in STEP_RULE_KINDS:
        rule = _rule_thresholds(thresholds, kind)
        if not rule["enabled"]:
            continue
        outcome = _STEP_RULES[kind](history, rule)
        if outcome is not _ABSENT:
            results[kind] = outcome
    return results


def evaluate_stalled(seconds_since_last_event: float, step: int | None, thresholds: dict | None) -> Finding | None:
    """A Finding when a running run has been silent for at least ``minutes``; else None."""
    rule = _rule_thresholds(thresholds, "stalled")
    seconds = _finite(seconds_since_last_event)
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
    rule = _rule_thresholds(thresholds, "run_failed")
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
    return _finding(
        history, "entropy_collapse", "critical" if critical else rule["severity"],
        f"entropy fell to {_num(recent)}, {_pct(share)} of its start {_num(start)} ({threshold})",
        entropy=recent, entropy_start=start, share=share, fraction=rule["fraction"],
        critical_fraction=rule["critical_fraction"],
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
    if unique is not None:
        recent, start = unique
        values.update(unique_answers=recent, unique_answers_start=start)
        if recent <= rule["unique_fraction"] * start:
            reasons.append(
                f"unique answers per prompt fell to {_num(recent)}, {_pct(recent / start)} of its start "
                f"{_num(start)} (threshold {_pct(rule['unique_fraction'])})"
            )
    if not reasons:
        return None
    values.update(similarity_level=rule["similarity_level"], similarity_rise=rule["similarity_rise"],
                  unique_fraction=rule["unique_fraction"])
    message = "rollouts are converging: " + "; ".join(reasons)
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


# --------------------------------------------------------------------------- small conversions


def _finite(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _to_number(value: object) -> float | None:
    if isinstance(value, bool):  # True is an int in Python; refuse it as a number
        return None
    return _finite(value.strip() if isinstance(value, str) else value)


def _to_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE_WORDS | _FALSE_WORDS:
        return value.strip().lower() in _TRUE_WORDS
    return None


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


def _plain_number(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else repr(float(x))
