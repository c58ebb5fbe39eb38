"""The collapse-alert rules as data (DESIGN §4.5): their kinds, parameters, defaults and
documentation, and the checking and layering of thresholds (defaults, then a team's
overrides, then a run's). What each rule judges is in webapp/alerts/rules.py.

Figures in the EVOL-RL paper text are images, so exact thresholds are our choice; each
rule's description says which observation it rests on and what its defaults mean.

Pure Python: no Django, no numpy, so the web process can import it cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass

from rl.params import FieldError, Param

RULE_KINDS = (
    "entropy_collapse",
    "entropy_collapse_forecast",
    "diversity_collapse",
    "majority_lock_in",
    "pass_at_k_divergence",
    "length_collapse",
    "invalid_answers",
    "zero_variance_groups",
    "degeneration",
    "stalled",
    "run_failed",
    "processing_failed",
)
SEVERITIES = ("info", "warning", "critical")
# judged from the clock, the run's end and the workers' failures (webapp/alerts/failures.py), not its metric history
NOT_STEP_RULES = ("stalled", "run_failed", "processing_failed")
STEP_RULE_KINDS = tuple(kind for kind in RULE_KINDS if kind not in NOT_STEP_RULES)

FIELD_PREFIX = "alert_rules"


# --------------------------------------------------------------------------- schema


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
        "The recent past a rule judges: the median of the last this many steps, so one noisy step neither opens nor "
        "resolves an alert (a share of counted things is pooled over them).", 1, 100,
    )


def _trend(window: int = 3, start_window: int = 5, z: float = 2.0) -> tuple[Param, ...]:
    """The statistics every step rule judges with (webapp/alerts/trend.py)."""
    return (
        _window(window),
        Param("start_window", "int", start_window, "The start a trend is measured from: the median of the run's "
              "first this many logged steps.", 1, 100),
        # two standard errors: about one chance in forty that sampling alone moves a window this far
        Param("z", "float", z, "A change counts only beyond this many standard errors of the run's own noise "
              "(estimated from its step-to-step spread, or from the counts of a share).", 0.0, 10.0),
    )


def _moved(default: float = 1e-3) -> Param:
    # The Small CPU preset at lr 5e-7 kept KL near 1e-6 while its entropy swung 0.02-0.13 with the prompts sampled;
    # the corpus's TTRL runs that learn reach 1e-3 within a few steps (docs/alert-corpus.md)
    return Param("min_kl", "float", default, "The policy must have moved: mean KL to its start over the window at "
                 "least this (without KL, some PPO ratios clipped; without either, assumed).", 0.0, 10.0)


def _ratio(name: str, default: float, help_text: str) -> Param:
    return Param(name, "float", default, help_text, 0.0, 1.0)


RULES: dict[str, RuleSpec] = {
    spec.kind: spec
    for spec in (
        RuleSpec(
            kind="entropy_collapse",
            title="Entropy collapse",
            description=(
                "Policy entropy fell far below where the run started, for real. EVOL-RL (Figures 1 and 3) shows it as "
                "the first symptom of majority-only training: TTRL's entropy drops and stays down, while EVOL-RL's "
                "dips and recovers after its \"evolving point\" (an alert opened in the dip resolves). A step's "
                "entropy is measured on the few prompts it sampled, so the rule compares the median of the last 5 "
                "steps with the median of the first 5 and opens only when (1) it is below 60% of the start, (2) the fall "
                "is beyond 2 standard errors of the run's own noise, (3) the policy moved (mean KL to its start at "
                "least 0.001, or ratios clipped), and (4) a second signal agrees: the majority ratio up, distinct "
                "answers down, or the prompts' majority answers no longer changing between visits, each beyond its "
                "noise (a run that logs none of these, such as one trained elsewhere reporting no rollouts, is judged on its "
                "entropy alone). Below 5% of the start it turns critical. Judged on the labelled corpus "
                "(docs/alert-corpus.md)."
            ),
            metrics=("entropy",),
            params=_common("warning") + _trend(window=5) + (
                # EVOL-RL Fig. 3: TTRL's entropy falls and stays down; in the labelled corpus the collapsed runs' entropy
                # ends at 30-55% of its start, the healthy ones' mostly above 60% (docs/alert-corpus.md)
                _ratio("fraction", 0.6, "Open when the recent median entropy < fraction × the start's."),
                # EVOL-RL Fig. 1/3: "collapses entropy": at 5% of the start, sampling is nearly deterministic
                _ratio("critical_fraction", 0.05, "Escalate to critical below this fraction of the start (0 never)."),
                _moved(),
                Param("confirm", "bool", True, "Also need a second signal to agree (majority ratio up, distinct "
                      "answers down, or majority answers no longer changing), each beyond its noise."),
            ),
        ),
        RuleSpec(
            kind="entropy_collapse_forecast",
            title="Entropy collapse forecast",
            description=(
                "The step at which entropy_collapse's condition is expected to hold, with its uncertainty, while "
                "it does not yet (webapp/alerts/forecast.py). Cui et al. (2025, \"The Entropy Mechanism of "
                "Reinforcement Learning for Reasoning Language Models\") find policy entropy spent fast and early, the "
                "reward following it as R = −a·e^H + b, so a run whose entropy is on course to collapse "
                "has its ceiling in sight; EVOL-RL (Figures 1 and 3) shows TTRL's entropy falling and staying down. "
                "The forecast fits ln(entropy) against the step by least squares over the last fit_window steps "
                "(the residuals' autocorrelation counted), and gives the step where the median of the last window "
                "steps reaches fraction × the median of the first start_window (entropy_collapse's thresholds: keep "
                "them equal to that rule's), with Fieller's interval at the stated confidence; none when the trend "
                "is flat, rising or not significant, or the policy has not moved. It opens when the interval's late "
                "end is within horizon steps, and resolves once the forecast recedes or the collapse itself holds. "
                "Defaults chosen on seed 0 of the labelled corpus and judged on its other seeds "
                "(benchmarks/RESULTS.md): there it warned 4 to 18 steps ahead of entropy_collapse, but never before a "
                "collapse's labelled onset, and on half the healthy runs: on 40 steps of 4 prompts the entropy is too "
                "noisy to foresee a fall before it shows."
            ),
            metrics=("entropy",),
            params=_common("warning") + (
                Param("horizon", "int", 30, "Open when, at the stated confidence, the collapse comes within this "
                      "many steps (the forecast interval's late end).", 1, 100000),
                # 80%: a forecast that warns, not a test that convicts; the interval says how sure
                Param("confidence", "float", 0.8, "The forecast interval's confidence; a trend not significant at "
                      "it gives no forecast.", 0.5, 0.995),
                Param("fit_window", "int", 15, "The trend is fitted on the last this many logged steps.", 8, 200),
                _window(5),
                Param("start_window", "int", 5, "entropy_collapse's start: the median of the run's first this many "
                      "logged steps.", 1, 100),
                _ratio("fraction", 0.6, "The collapse forecast: the recent median entropy < fraction × the "
                       "start's (entropy_collapse's threshold)."),
                _moved(),
            ),
        ),
        RuleSpec(
            kind="diversity_collapse",
            title="Diversity collapse",
            description=(
                "Rollouts for the same prompt became near duplicates: similarity/mean up, distinct answers down. "
                "EVOL-RL (Figure 1, \"sustains reasoning diversity\"; the similarity-matrix case study, Figure 8 "
                "of the conference version) rewards novelty precisely because majority-only training homogenises "
                "reasoning traces. Opens when either signal holds beyond 2 standard errors of the run's noise, and "
                "the policy moved: the recent median similarity/mean at least 0.9 and at least 0.1 above the start "
                "(cosine similarity of unrelated solutions to one problem is already high, so the rise matters as "
                "much as the level), or distinct answers per prompt at 40% of their start or less (5 down to 2). "
                "Recent is the median of the last 3 steps, the start of the first 5."
            ),
            metrics=("similarity/mean", "unique_answers"),
            params=_common("warning") + _trend() + (
                # EVOL-RL conf. Fig. 8: majority reasoning paths are similar but not identical; ≥ 0.9 is near-duplicate
                _ratio("similarity_level", 0.9, "Similarity branch: recent similarity/mean at least this ..."),
                # EVOL-RL Fig. 1: the drift is what matters; +0.1 above the start is well beyond step noise
                _ratio("similarity_rise", 0.1, "... and at least this much above its start value."),
                # EVOL-RL Fig. 1 "drives pass@n down": fewer distinct answers means fewer chances per prompt
                _ratio("unique_fraction", 0.4, "Answer branch: recent unique_answers ≤ this fraction of its start."),
                _moved(),
            ),
        ),
        RuleSpec(
            kind="majority_lock_in",
            title="Majority lock-in",
            description=(
                "Training drove almost every rollout onto its prompt's majority answer, so the majority-vote reward "
                "is nearly constant and the pseudo-label can no longer improve. EVOL-RL (Figure 5) shows TTRL's "
                "maj@16 reaching a plateau early and staying there (\"locked in, unable to discover better "
                "solutions\"). Default: the median majority_ratio of the last 3 steps at 0.95 or more (about 61 of 64 "
                "votes), from under it over the first 5, the rise beyond 2 standard errors of the run's noise and the "
                "policy moved. A vote unanimous from the first steps was not locked in by training."
            ),
            metrics=("majority_ratio",),
            params=_common("warning") + _trend() + (
                # EVOL-RL Fig. 5: TTRL's consensus plateaus; at 95% agreement a 64-vote group has ≤ 3 dissenters
                _ratio("consensus", 0.95, "Open when the recent median majority_ratio ≥ this."),
                _moved(),
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
                "pass@1 and pass@16; absent for prompts without held-out labels. Defaults: the median pass@k of the "
                "last 3 points logging both is at least 0.05 below the median of the first 5 (5 points, smaller than "
                "the 6 to 16 point losses of Table 1) and the fall is beyond 2 standard errors of pass@k's own noise "
                "(a training batch of 4 prompts reads pass@16 in quarters), while pass@1's median is no lower than at "
                "the start. It stays open while pass@k stays down, as TTRL's does."
            ),
            metrics=("pass@1", "pass@16", "eval/pass@1", "eval/pass@16"),
            params=_common("warning") + _trend() + (
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
                "the median response_length/mean of the last 3 steps below half the median of the first 5, beyond "
                "2 standard errors of the run's noise and the policy moved, opens a warning; so does half the "
                "rollouts or more truncated (the Wilson interval's low end over the window's rollouts, when the run's "
                "size is known: usually they carry no boxed answer), or, when truncated_ratio is not logged, a "
                "mean length at 95% of max_completion_length or more. The message says which."
            ),
            metrics=("response_length/mean", "truncated_ratio"),
            params=_common("warning") + _trend() + (
                # EVOL-RL Fig. 1/3: TTRL "shortens reasoning"; halving the length is far beyond step noise
                _ratio("fraction", 0.5, "Open when the recent median length < fraction × the start's."),
                # truncated rollouts carry no boxed answer, so at half truncated the vote runs on a minority
                _ratio("pinned_ratio", 0.5, "Open when truncated_ratio is at least this (pinned at the limit)."),
                _moved(),
            ),
        ),
        RuleSpec(
            kind="invalid_answers",
            title="Invalid answers",
            description=(
                "Many rollouts have no valid boxed answer. EVOL-RL scores such a response −1 (its validity "
                "check, §2) and leaves it out of the vote and the similarity matrix, so when invalid answers "
                "dominate the pseudo-label is voted by a minority of the samples and the reward mostly teaches "
                "format. Default: half the rollouts of the last 3 steps or more, by the low end of the Wilson "
                "interval of their count when the run's size is known (prompts × votes a step), else beyond 2 "
                "standard errors of the run's noise. Often a symptom of truncation (see length_collapse) or of a "
                "prompt without a \\boxed{} instruction."
            ),
            metrics=("invalid_ratio",),
            params=_common("warning") + _trend() + (
                # EVOL-RL §2 validity: invalid answers get −1; at half invalid the majority is voted by a minority
                _ratio("max_ratio", 0.5, "Open when invalid_ratio is at least this, beyond the noise."),
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
                "trips this rule. Default: four prompts in five or more over the last 3 steps, by the low end of the "
                "Wilson interval of the prompts counted (two prompts a step can never show it: six flat prompts "
                "leave a low end of 60%), else beyond 2 standard errors of the run's noise."
            ),
            metrics=("zero_variance_groups",),
            params=_common("warning") + _trend() + (
                # R-Zero's 3..7-of-10 filter drops unanimous groups; at 80% unanimous, 4 in 5 prompts are wasted
                _ratio("max_ratio", 0.8, "Open when zero_variance_groups is at least this, beyond the noise."),
            ),
        ),
        RuleSpec(
            kind="degeneration",
            title="Text degeneration",
            description=(
                "The policy's text came apart: its answers went from mostly valid to nearly all invalid, while its "
                "text got noisier (entropy well above its start) or ran on to max_completion_length. On the "
                "default policy at a learning rate far too high (docs/experiments.md) both happen in turn: noise "
                "first (entropy 0.23 to 1.0), then one token repeated up to the limit (entropy near zero). Not a "
                "collapse: nothing converges, the vote has nothing to count and the label-free reward teaches "
                "noise (EVOL-RL §2 scores an invalid response −1; R-Zero penalises repetition). Rising entropy "
                "alone is not enough: after EVOL-RL's \"evolving point\" (Figure 3) entropy and length rise while "
                "the answers stay valid; and answers invalid from the first steps are a prompt format or a limit "
                "too short for the policy (invalid_answers), not degeneration. Defaults: invalid answers over the "
                "last 3 steps at 0.9 or more (the low end of their Wilson interval, when the run's size is known), "
                "from under 0.9 over the first 3, and either the median entropy at 1.5 × its start or more, or "
                "rollouts pinned at the limit (truncated_ratio 0.5 or more; without truncated_ratio, a mean length "
                "at 95% of max_completion_length). The message gives the entropy, the invalid share and the length "
                "against the limit as seen."
            ),
            metrics=("invalid_ratio", "entropy", "response_length/mean", "truncated_ratio"),
            params=_common("critical") + _trend(window=3, start_window=3) + (
                # EVOL-RL Fig. 3: its healthy recovery lifts entropy gradually, with valid answers; half again above
                # the start with the answers gone is noise
                Param("entropy_rise", "float", 1.5, "Noisy text: recent median entropy ≥ this × its start ...",
                      1.0, 100.0),
                # as length_collapse: at half truncated, most rollouts never reach an answer
                _ratio("pinned_ratio", 0.5, "... or run-on text: truncated_ratio at least this ..."),
                # EVOL-RL §2 validity check: at 90% invalid the vote is cast by a tenth of the samples or fewer
                _ratio("min_invalid", 0.9, "... while invalid_ratio is at least this, and was below it at the start."),
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
        RuleSpec(
            kind="processing_failed",
            title="Processing failed",
            description=(
                "Work Evolab does on the run beside its training failed: grouping the rollouts of a run trained "
                "elsewhere, its similarity heatmaps, ingesting the trainer's log, indexing its rollouts' text, or "
                "one alert rule judging a step. The message names the task, the step and the error (the traceback "
                "is in the worker's log); the run page shows it as a banner. The task is retried with backoff and "
                "the alert resolves once an attempt succeeds. A warning by default: the training goes on, but what "
                "Evolab shows of the run is incomplete meanwhile (steps not grouped, a rule not judging), so the "
                "collapse alerts may be late; raise it to critical to be emailed with the critical alerts."
            ),
            metrics=(),
            params=_common("warning"),
        ),
    )
}


def defaults() -> dict[str, dict]:
    """Every rule's default thresholds: ``{kind: {"enabled": True, "severity": ..., **params}}``."""
    return {kind: {p.name: p.default for p in RULES[kind].params} for kind in RULE_KINDS}


def validate_overrides(overrides: object) -> dict:
    """A partial ``{kind: {param: value}}`` with values coerced ("0.3" → 0.3, "true" → True).

    Raises FieldError naming the field and the allowed values for non-dict input, an
    unknown kind or parameter, a wrong type or an out-of-range value. None means no overrides.
    """
    if overrides is None:
        return {}
    if not isinstance(overrides, dict):
        raise FieldError(FIELD_PREFIX, f"{FIELD_PREFIX} must be an object {{rule kind: {{parameter: value}}}}")
    result = {}
    for kind, params in overrides.items():
        field_name = f"{FIELD_PREFIX}.{kind}"
        if kind not in RULES:
            raise FieldError(field_name, f"unknown alert rule {kind!r}: expected one of {', '.join(RULE_KINDS)}")
        if not isinstance(params, dict):
            raise FieldError(field_name, f"{field_name} must be an object {{parameter: value}}")
        result[kind] = _validate_rule_params(RULES[kind], params)
    return result


def _validate_rule_params(spec: RuleSpec, params: dict) -> dict:
    coerced = {}
    for name, value in params.items():
        field_name = f"{FIELD_PREFIX}.{spec.kind}.{name}"
        param = spec.param(name) if isinstance(name, str) else None
        if param is None:
            known = ", ".join(p.name for p in spec.params)
            raise FieldError(field_name, f"unknown parameter {name!r} for alert rule {spec.kind}: expected one of {known}")
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


def rule_thresholds(thresholds: dict | None, kind: str) -> dict:
    """One rule's thresholds, defaults filled for anything the caller left out."""
    merged = {p.name: p.default for p in RULES[kind].params}
    merged.update((thresholds or {}).get(kind) or {})
    return merged
