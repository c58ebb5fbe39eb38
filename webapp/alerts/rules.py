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

Statistics (webapp/alerts/trend.py): a rule judges a trend, never a sample. A step's figure is measured on the
few prompts the step sampled, so it swings with which prompts they were; a rule compares the median of its last
``window`` steps with the median of the run's first ``start_window`` steps and calls the change real only beyond
``z`` times the run's own noise (estimated from the step-to-step spread of the run itself), and a share of counted
things (invalid answers, flat groups) by the Wilson interval of those counts. Rules about learning dynamics also
need the policy to have moved (its KL to the start, or clipped ratios), and entropy_collapse a second signal to
agree. Each message says what was compared with what.

Pure Python: no Django, no numpy, so the web process can import it cheaply.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from statistics import median
from typing import Sequence

from rl.params import finite

from . import forecast, trend
# what every step rule shares (webapp/alerts/findings.py, which forecast.py reads too), under this module's old names;
# QUIET_STEPS_TO_RESOLVE and Finding are read from here by the engine, the backtest and the tests
from .findings import ABSENT as _ABSENT, QUIET_STEPS_TO_RESOLVE, Finding  # noqa: F401
from .findings import finding as _finding, logged as _logged, num as _num, policy_moved as _policy_moved
from .findings import rounded as _values, span as _span
from .rule_specs import STEP_RULE_KINDS, rule_thresholds

_pct = trend.percent

# A mean length this close to max_completion_length counts as pinned at the limit when the
# run logs no truncated_ratio (a mean that high needs most rollouts to hit the cap).
_PINNED_MEAN_LENGTH = 0.95
# From this share of invalid answers on, the collapse rules do not read fewer distinct answers as agreement
# (EVOL-RL §2 leaves invalid answers out of the vote: at half invalid the majority is voted by a minority).
_MOSTLY_INVALID = 0.5
_MAX_FAILURE_MESSAGE = 1000  # characters of a failure message quoted in the alert

# How much history a rule sees: its start (the first steps) and its recent past. Rules compare a recent window
# with the start, so the middle of a long run is not read (the engine loads no more; the backtest cuts the same).
HEAD_STEPS, TAIL_STEPS = 20, 200


# --------------------------------------------------------------------------- evaluation


@dataclass
class History:
    steps: list[int]  # ascending step numbers, one per trained step
    metrics: dict[str, list[float | None]]  # name -> values aligned with steps; None where missing
    max_completion_length: int | None = None
    # True when every value is a finite float or None already (the server cleans what it loads), so
    # series() need not check each one again: ingestion judges every step of a batch.
    clean: bool = False
    # The run's size, when known (runs Evolab trains): a share of counted things is judged on its counts
    prompts_per_step: int | None = None
    n_votes: int | None = None
    # what the rules judging this step worked out already (remember): two rules comparing the same series over the
    # same windows ask once. A History is one step's, so nothing here outlives its step.
    memo: dict = field(default_factory=dict, repr=False, compare=False)

    def remember(self, key: tuple, compute):
        """compute() the first time `key` is asked for at this step, the same answer after."""
        if key not in self.memo:
            self.memo[key] = compute()
        return self.memo[key]

    def series(self, name: str) -> list[float | None] | None:
        """The metric aligned with ``steps`` (NaN and non-numbers as None), or None if never logged."""
        raw = self.metrics.get(name)
        if raw is None:
            return None
        n = len(self.steps)
        values = list(raw[:n]) if self.clean else [finite(v) for v in list(raw)[:n]]
        values += [None] * (n - len(values))
        return values if values.count(None) != n else None

    def at(self, step: int) -> "History":
        """What the rules read when `step` is the latest: the first HEAD_STEPS steps and the TAIL_STEPS before
        `step` (bisect, so judging every step of a long history stays linear)."""
        steps = self.steps
        if not steps:
            return self
        head_end = bisect.bisect_right(steps, min(steps[0] + HEAD_STEPS, step))
        tail_start = max(head_end, bisect.bisect_left(steps, step - TAIL_STEPS))
        tail_end = max(tail_start, bisect.bisect_right(steps, step))

        def cut(values):
            return values[:head_end] + values[tail_start:tail_end]

        return History(steps=cut(steps), metrics={n: cut(values) for n, values in self.metrics.items()},
                       max_completion_length=self.max_completion_length, clean=self.clean,
                       prompts_per_step=self.prompts_per_step, n_votes=self.n_votes)

    def rollouts_per_step(self) -> int | None:
        return self.prompts_per_step * self.n_votes if self.prompts_per_step and self.n_votes else None


def evaluate_step_rules(history: History, thresholds: dict[str, dict],
                        kinds: Sequence[str] = STEP_RULE_KINDS) -> dict[str, Finding | None]:
    """The step-based rules (`kinds`, every one by default) judged at the latest step of ``history``.

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


# --------------------------------------------------------------------------- shared judgements


def _compare(history: History, name: str, rule: dict) -> trend.Comparison | None:
    """The metric's recent window against its start, in the run's noise (trend.compare)."""
    def compare():
        values = history.series(name)
        return None if values is None else trend.compare(history.steps, values, rule["start_window"], rule["window"])
    return history.remember(("compare", name, rule["start_window"], rule["window"]), compare)


def _beyond_noise(comparison: trend.Comparison, rule: dict) -> str:
    return f"beyond the run's noise of ±{trend.percent(comparison.noise_share(rule['z']))}"


SECOND_SIGNALS = ("majority_ratio", "unique_answers", "majority_flip_rate")


def _second_signal(history: History, rule: dict) -> tuple[str, dict] | None:
    """A label-free signal that agrees the run is converging, beyond its noise: the majority ratio up, or distinct
    answers per prompt down (invalid answers aside), or the prompts' majority answers no longer changing between
    visits. None when none agrees; ("", {}) when the run logs none of them (a run trained elsewhere that reports
    its metrics but no rollouts), whose entropy is then judged alone."""
    if all(history.series(name) is None for name in SECOND_SIGNALS):
        return "", {}
    votes = _compare(history, "majority_ratio", rule)
    if votes is not None and votes.change > 0 and votes.beyond(rule["z"]):
        return (f"the majority ratio rose from {_num(votes.start)} to {_num(votes.recent)}",
                {"majority_ratio": votes.recent, "majority_ratio_start": votes.start})
    answers = _compare(history, "unique_answers", rule)
    if answers is not None and _mostly_invalid(history, rule["window"]) is None and answers.change < 0 \
            and answers.beyond(rule["z"]):
        return (f"distinct answers per prompt fell from {_num(answers.start)} to {_num(answers.recent)}",
                {"unique_answers": answers.recent, "unique_answers_start": answers.start})
    flips = _compare(history, "majority_flip_rate", rule)
    if flips is not None and flips.change < 0 and flips.beyond(rule["z"]):
        return (f"the prompts' majority answers changed between visits {trend.percent(flips.recent)} of the time, "
                f"from {trend.percent(flips.start)}",
                {"majority_flip_rate": flips.recent, "majority_flip_rate_start": flips.start})
    return None


# --------------------------------------------------------------------------- the step rules


def _entropy_collapse(history: History, rule: dict):
    entropy = _compare(history, "entropy", rule)
    if entropy is None or entropy.start <= 0:
        return _ABSENT
    share = entropy.recent / entropy.start
    if share >= rule["fraction"] or not entropy.beyond(rule["z"]):
        return None
    movement = _policy_moved(history, rule)
    if not movement.moved:
        return None
    second = _second_signal(history, rule) if rule["confirm"] else ("", {})
    if second is None:
        return None
    critical = share < rule["critical_fraction"]
    threshold = f"critical below {_pct(rule['critical_fraction'])}" if critical else f"threshold {_pct(rule['fraction'])}"
    parts = [f"{entropy.window_text('entropy')} ({threshold}), {_beyond_noise(entropy, rule)}"]
    parts += [said for said in (second[0], movement.said) if said]
    extra = dict(second[1], **movement.values)
    invalid = _mostly_invalid(history, rule["window"])
    if invalid is not None:  # sampling narrowed onto no answer at all: say so, it is not answers converging
        parts.append(f"{_pct(invalid)} of answers invalid")
        extra["invalid_ratio"] = invalid
    return _finding(
        history, "entropy_collapse", "critical" if critical else rule["severity"], "; ".join(parts),
        entropy=entropy.recent, entropy_start=entropy.start, share=share, noise=entropy.noise,
        fraction=rule["fraction"], critical_fraction=rule["critical_fraction"], **extra,
    )


def _diversity_collapse(history: History, rule: dict):
    similarity, unique = _compare(history, "similarity/mean", rule), _compare(history, "unique_answers", rule)
    if similarity is None and unique is None:
        return _ABSENT
    reasons, values = [], {}
    if similarity is not None:
        values.update(similarity=similarity.recent, similarity_start=similarity.start)
        if similarity.recent >= rule["similarity_level"] and similarity.change >= rule["similarity_rise"] \
                and similarity.beyond(rule["z"]):
            reasons.append(f"similarity/mean of steps {_span(similarity.recent_steps)} is {_num(similarity.recent)}, "
                           f"up from {_num(similarity.start)} over steps {_span(similarity.start_steps)} (threshold "
                           f"{_num(rule['similarity_level'])} and +{_num(rule['similarity_rise'])}), "
                           f"{_beyond_noise(similarity, rule)}")
    invalid = _mostly_invalid(history, rule["window"])
    if unique is not None and unique.start > 0:
        values.update(unique_answers=unique.recent, unique_answers_start=unique.start)
        # unique_answers counts valid answers only: when most are invalid, fewer of them is lost answers, not
        # agreement (the degeneration and invalid_answers rules say what happened)
        if invalid is None and unique.recent <= rule["unique_fraction"] * unique.start and unique.beyond(rule["z"]):
            reasons.append(f"{unique.window_text('distinct answers per prompt')} (threshold "
                           f"{_pct(rule['unique_fraction'])}), {_beyond_noise(unique, rule)}")
    if not reasons:
        return None
    movement = _policy_moved(history, rule)
    if not movement.moved:
        return None
    values.update(similarity_level=rule["similarity_level"], similarity_rise=rule["similarity_rise"],
                  unique_fraction=rule["unique_fraction"], **movement.values)
    if movement.said:
        reasons.append(movement.said)
    if invalid is None:
        message = "rollouts are converging: " + "; ".join(reasons)
    else:  # near-duplicate text with no answer in it converges on nothing
        message = f"rollouts are near duplicates: {'; '.join(reasons)}; {_pct(invalid)} of answers invalid"
        values["invalid_ratio"] = invalid
    return _finding(history, "diversity_collapse", rule["severity"], message, **values)


def _majority_lock_in(history: History, rule: dict):
    votes = _compare(history, "majority_ratio", rule)
    if votes is None:
        return _ABSENT
    # a vote unanimous from the start was not locked in by training: the policy samples one answer already
    if votes.recent < rule["consensus"] or votes.start >= rule["consensus"] or not votes.beyond(rule["z"]):
        return None
    movement = _policy_moved(history, rule)
    if not movement.moved:
        return None
    said = f"; {movement.said}" if movement.said else ""
    return _finding(
        history, "majority_lock_in", rule["severity"],
        f"majority_ratio of steps {_span(votes.recent_steps)} is {_num(votes.recent)}, up from {_num(votes.start)} "
        f"over steps {_span(votes.start_steps)} (threshold {_num(rule['consensus'])}), {_beyond_noise(votes, rule)}: "
        f"nearly every rollout agrees with its prompt's majority answer{said}",
        majority_ratio=votes.recent, majority_ratio_start=votes.start, consensus=rule["consensus"], **movement.values,
    )


def _pass_at_k_divergence(history: History, rule: dict):
    source = _pass_at_k_source(history, needed=rule["start_window"] + rule["window"])
    if source is None:
        return _ABSENT
    name_1, name_k, k, steps, first, kth = source
    # the training batch's pass@k is read from its prompts: noisy as a share of that many (evaluations: unknown)
    prompts = None if name_k.startswith("eval/") else history.prompts_per_step
    at_k = trend.compare(steps, kth, rule["start_window"], rule["window"], prompts)
    at_1 = trend.compare(steps, first, rule["start_window"], rule["window"], prompts)
    if at_k is None or at_1 is None:
        return _ABSENT
    drop = -at_k.change
    if drop < rule["min_drop"] or not at_k.beyond(rule["z"]) or at_1.recent < at_1.start:
        return None
    trend_1 = "rose" if at_1.recent > at_1.start else "held"
    noise = rule["z"] * at_k.noise
    return _finding(
        history, "pass_at_k_divergence", rule["severity"],
        f"{name_k} of steps {_span(at_k.recent_steps)} is {_num(at_k.recent)}, down {_num(drop)} from "
        f"{_num(at_k.start)} over steps {_span(at_k.start_steps)} (threshold {_num(rule['min_drop'])}), beyond the "
        f"run's noise of ±{_num(noise)}, while {name_1} {trend_1} from {_num(at_1.start)} to {_num(at_1.recent)}",
        pass_at_1=at_1.recent, pass_at_1_start=at_1.start, pass_at_k=at_k.recent, pass_at_k_start=at_k.start,
        k=k, drop=drop, min_drop=rule["min_drop"], noise=noise,
    )


def _length_collapse(history: History, rule: dict):
    lengths = _compare(history, "response_length/mean", rule)
    pinned = _pinned_at_limit(history, rule)
    if lengths is None and pinned is None:
        return _ABSENT
    if lengths is not None and lengths.start > 0 and lengths.recent < rule["fraction"] * lengths.start \
            and lengths.beyond(rule["z"]):
        movement = _policy_moved(history, rule)
        if movement.moved:
            said = f"; {movement.said}" if movement.said else ""
            return _finding(
                history, "length_collapse", rule["severity"],
                f"{lengths.window_text('mean response length')} (threshold {_pct(rule['fraction'])}), "
                f"{_beyond_noise(lengths, rule)}{said}",
                length=lengths.recent, length_start=lengths.start, fraction=rule["fraction"], **movement.values,
            )
    if pinned is not None and pinned.fires:
        return _finding(history, "length_collapse", rule["severity"], pinned.message, **pinned.values)
    return None


@dataclass
class _Pinned:
    fires: bool
    message: str
    values: dict


def _pinned_at_limit(history: History, rule: dict) -> _Pinned | None:
    """Whether rollouts are pinned at max_completion_length, beyond the count's noise; None when that cannot be
    judged. The length collapse and the degeneration rule both ask."""
    return history.remember(("pinned", rule["window"], rule["z"], rule["pinned_ratio"]),
                            lambda: _pinned_now(history, rule))


def _pinned_now(history: History, rule: dict) -> _Pinned | None:
    window = rule["window"]
    truncated = _share(history, "truncated_ratio", rule, history.rollouts_per_step())
    if truncated is not None:
        return _Pinned(
            truncated.low >= rule["pinned_ratio"],
            f"responses are pinned at the length limit: {_pct(truncated.mean)} of steps {_span(truncated.steps)} "
            f"truncated at max_completion_length (threshold {_pct(rule['pinned_ratio'])}, {_band(truncated)})",
            {"truncated_ratio": truncated.mean, "pinned_ratio": rule["pinned_ratio"]},
        )
    limit = history.max_completion_length
    if history.series("truncated_ratio") is not None or not limit or limit <= 0:
        return None  # truncated_ratio logged but too short yet, or no limit known
    recent = _recent_if_enough(history.series("response_length/mean"), window, needed=window)
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
    invalid_logged = _logged(history.series("invalid_ratio"))
    entropy = _compare(history, "entropy", rule)
    pinned = _pinned_at_limit(history, rule)
    invalid = _share(history, "invalid_ratio", rule, history.rollouts_per_step())
    # the start may overlap the latest window: the answers' fall is judged as soon as one step follows the start
    if len(invalid_logged) < rule["start_window"] + 1 or invalid is None or (entropy is None and pinned is None):
        return _ABSENT
    invalid_start = median(invalid_logged[:rule["start_window"]])
    rose = entropy is not None and entropy.start > 0 and entropy.recent >= rule["entropy_rise"] * entropy.start
    # invalid from the start is a prompt format or a limit too short for the policy (invalid_answers says so)
    if invalid.low < rule["min_invalid"] or invalid_start >= rule["min_invalid"] \
            or not (rose or (pinned and pinned.fires)):
        return None
    values = {"invalid_ratio": invalid.mean, "invalid_start": invalid_start, "min_invalid": rule["min_invalid"]}
    parts = []
    if entropy is not None and entropy.start > 0:
        direction = "rose" if entropy.change > 0 else "fell" if entropy.change < 0 else "held"
        said = (f"entropy {direction} from {_num(entropy.start)} over steps {_span(entropy.start_steps)} to "
                f"{_num(entropy.recent)} over steps {_span(entropy.recent_steps)}")
        if rose:
            said += f" ({_num(entropy.recent / entropy.start)}× its start, threshold {_num(rule['entropy_rise'])}×)"
        parts.append(said)
        values.update(entropy=entropy.recent, entropy_start=entropy.start, rise=entropy.recent / entropy.start,
                      entropy_rise=rule["entropy_rise"])
    counted = f" ({_band(invalid)})" if invalid.counted else ""
    parts.append(f"{_pct(invalid.mean)} of answers invalid over steps {_span(invalid.steps)}{counted}, "
                 f"from {_pct(invalid_start)} at the start (threshold {_pct(rule['min_invalid'])})")
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


def _invalid_answers(history: History, rule: dict):
    invalid = _share(history, "invalid_ratio", rule, history.rollouts_per_step())
    if invalid is None:
        return _ABSENT
    if invalid.low < rule["max_ratio"]:
        return None
    return _finding(history, "invalid_answers", rule["severity"],
                    f"{_pct(invalid.mean)} of rollouts over steps {_span(invalid.steps)} have no valid boxed answer "
                    f"(threshold {_pct(rule['max_ratio'])}, {_band(invalid)})",
                    invalid_ratio=invalid.mean, low=invalid.low, max_ratio=rule["max_ratio"])


def _zero_variance_groups(history: History, rule: dict):
    flat = _share(history, "zero_variance_groups", rule, history.prompts_per_step)
    if flat is None:
        return _ABSENT
    if flat.low < rule["max_ratio"]:
        return None
    return _finding(history, "zero_variance_groups", rule["severity"],
                    f"{_pct(flat.mean)} of prompts over steps {_span(flat.steps)} gave every trained rollout the same "
                    f"reward, so GRPO learns nothing from them (threshold {_pct(rule['max_ratio'])}, {_band(flat)})",
                    zero_variance_groups=flat.mean, low=flat.low, max_ratio=rule["max_ratio"])


_STEP_RULES = {
    "entropy_collapse": _entropy_collapse,
    "entropy_collapse_forecast": forecast.entropy_collapse_forecast,
    "diversity_collapse": _diversity_collapse,
    "majority_lock_in": _majority_lock_in,
    "pass_at_k_divergence": _pass_at_k_divergence,
    "length_collapse": _length_collapse,
    "degeneration": _degeneration,
    "invalid_answers": _invalid_answers,
    "zero_variance_groups": _zero_variance_groups,
}


# --------------------------------------------------------------------------- series helpers


def _share(history: History, name: str, rule: dict, per_step: int | None) -> trend.Level | None:
    """A share's recent level with its band: Wilson's on the counted things when the run's size is known, else the
    run's noise (trend.level)."""
    values = history.series(name)
    if values is None:
        return None
    return trend.level(history.steps, values, rule["window"], rule["z"], per_step)


def _band(level: trend.Level) -> str:
    if level.counted:
        return f"at least {_pct(level.low)} on {level.counted:,} counted"
    return f"at least {_pct(level.low)} within the run's noise"


def _mostly_invalid(history: History, window: int) -> float | None:
    """The smoothed invalid_ratio when at least half the answers are invalid (a vote cast by a minority), else
    None: then fewer distinct answers or narrower sampling is not the answers converging."""
    invalid = _recent(history.series("invalid_ratio") or [], window)
    return invalid if invalid is not None and invalid >= _MOSTLY_INVALID else None


def _recent(values: Sequence[float | None], window: int) -> float | None:
    """Median of the last ``window`` steps, missing values skipped; None if all are missing."""
    tail = _logged(values[-window:])
    return median(tail) if tail else None


def _recent_if_enough(values: Sequence[float | None] | None, window: int, needed: int) -> float | None:
    """The smoothed latest value, or None with fewer than ``needed`` logged values."""
    if values is None or len(_logged(values)) < needed:
        return None
    return _recent(values, window)


def _pass_at_k_source(history: History, needed: int):
    """(pass@1 name, pass@k name, k, steps, pass@1 values, pass@k values) at the steps logging both, with at least
    `needed` of them. Held-out evaluation first (the largest logged eval/pass@K), the training batch's figures
    otherwise; None when neither has enough points (unlabelled prompts never do)."""
    for prefix in ("eval/", ""):
        k = _largest_k(history, prefix)
        if k is None:
            continue
        name_1, name_k = f"{prefix}pass@1", f"{prefix}pass@{k}"
        first, kth = history.series(name_1), history.series(name_k)
        if first is None or kth is None:
            continue
        points = [(s, a, b) for s, a, b in zip(history.steps, first, kth) if a is not None and b is not None]
        if len(points) >= needed:
            return (name_1, name_k, float(k), [s for s, _, _ in points], [a for _, a, _ in points],
                    [b for _, _, b in points])
    return None


def _largest_k(history: History, prefix: str) -> int | None:
    pattern = re.compile(re.escape(prefix) + r"pass@(\d+)")
    ks = [int(m.group(1)) for name in history.metrics if (m := pattern.fullmatch(name)) and int(m.group(1)) > 1]
    return max(ks) if ks else None
