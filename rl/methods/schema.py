"""Registry of training methods and their hyperparameter schemas.

The web form, the API (``GET /api/methods``) and ``rl.train``'s config check are all
generated from ``METHODS``; defaults are the papers' (see DESIGN §5 for the shared
names and ../shared/papers for the sources cited in each help text).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rl.params import plain_number, to_bool, to_number

_NULL_WORDS = {"", "null", "none"}


class HyperparameterError(ValueError):
    """A rejected method name or hyperparameter value.

    ``field`` is the hyperparameter name, or ``"method"`` for an unknown method; the
    API returns it as ``{"error": str(exc), "field": exc.field}``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message


@dataclass(frozen=True)
class Hyperparameter:
    name: str
    type: str  # 'int' | 'float' | 'bool' | 'choice'
    default: object
    help: str
    min: float | None = None
    max: float | None = None
    choices: tuple = ()
    # When True, None (JSON null) is a valid value with its own meaning, e.g. DARL's
    # tau = null selects the dynamic threshold.
    nullable: bool = False

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
        }

    def range_text(self) -> str:
        if self.type == "bool":
            return "true or false"
        if self.type == "choice":
            return "one of " + ", ".join(repr(c) for c in self.choices)
        low = "-inf" if self.min is None else plain_number(self.min)
        high = "inf" if self.max is None else plain_number(self.max)
        kind = "an integer" if self.type == "int" else "a number"
        text = f"{kind} in [{low}, {high}]"
        return text + " or null" if self.nullable else text

    def coerce(self, value: object) -> object:
        """The value converted to this hyperparameter's type, or HyperparameterError."""
        if self.nullable and (value is None or (isinstance(value, str) and value.strip().lower() in _NULL_WORDS)):
            return None
        converted = self._convert(value)
        if self.type in ("int", "float"):
            if (self.min is not None and converted < self.min) or (self.max is not None and converted > self.max):
                raise self._error(value)
        return converted

    def _convert(self, value: object) -> object:
        if self.type == "bool":
            converted = to_bool(value)
            if converted is None:
                raise self._error(value)
            return converted
        if self.type == "choice":
            if value in self.choices:
                return value
            if isinstance(value, str):
                for choice in self.choices:
                    if str(choice) == value.strip():
                        return choice
            raise self._error(value)
        if self.type == "int":
            number = to_number(value)
            if number is None or not number.is_integer():
                raise self._error(value)
            return int(number)
        if self.type == "float":
            number = to_number(value)
            if number is None:
                raise self._error(value)
            return number
        raise ValueError(f"unknown hyperparameter type {self.type!r}")

    def _error(self, value: object) -> HyperparameterError:
        return HyperparameterError(self.name, f"{self.name}={value!r} is invalid: expected {self.range_text()}")


@dataclass(frozen=True)
class Method:
    name: str
    title: str
    paper: str
    needs_references: bool
    label_free: bool
    hyperparameters: tuple[Hyperparameter, ...]
    description: str = ""
    # the prompt-row field read as y* when needs_references: "reference" (DARL, RLPR) or "label" (RLVR,
    # the supervised upper bound, which uses the held-out label on purpose); see reference_field()
    reference_field: str | None = None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "paper": self.paper,
            "needs_references": self.needs_references,
            "reference_field": self.reference_field,
            "label_free": self.label_free,
            "description": self.description,
            "hyperparameters": [h.to_json() for h in self.hyperparameters],
        }

    def hyperparameter(self, name: str) -> Hyperparameter:
        for h in self.hyperparameters:
            if h.name == name:
                return h
        raise KeyError(name)

    def defaults(self) -> dict:
        return {h.name: h.default for h in self.hyperparameters}


# --- shared hyperparameters (DESIGN §5); defaults are TTRL's, as every paper follows it ---


def _int(name, default, help, min=None, max=None):
    return Hyperparameter(name, "int", default, help, min=min, max=max)


def _float(name, default, help, min=None, max=None, nullable=False):
    return Hyperparameter(name, "float", default, help, min=min, max=max, nullable=nullable)


def _bool(name, default, help):
    return Hyperparameter(name, "bool", default, help)


_SHARED = {
    h.name: h
    for h in (
        _int("n_votes", 64, "Rollouts sampled per prompt; the pseudo-label is voted over all of them.", 1, 1024),
        _int("n_train", 32, "Rollouts per prompt used in the policy update (the first n_train of the n_votes).", 1, 1024),
        _int("prompts_per_step", 8, "Prompts per training step: one rollout batch of prompts_per_step × n_votes "
             "rollouts, scored together (the train batch size).", 1, 4096),
        _int("prompts_per_update", 1, "Prompts per optimizer update (the PPO mini-batch): each step is trained on in "
             "prompts_per_step / prompts_per_update updates, all against the rollout batch's old log-probabilities, "
             "so PPO clipping binds (EVOL-RL/TTRL scripts: 8 prompts per step, 1 per update).", 1, 4096),
        _int("ppo_epochs", 1, "Passes over each rollout batch (each of prompts_per_step / prompts_per_update updates).",
             1, 100),
        _float("temperature", 1.0, "Sampling temperature for training rollouts.", 0.0, 2.0),
        _float("eval_temperature", 0.6, "Sampling temperature for evaluation.", 0.0, 2.0),
        _float("top_p", 1.0, "Nucleus sampling threshold for rollouts.", 0.01, 1.0),
        _int("max_completion_length", 3072, "Maximum number of generated tokens per rollout.", 1, 131072),
        _float("learning_rate", 5e-7, "Peak learning rate (AdamW).", 0.0, 1e-2),
        _float("kl_coef", 0.001, "Weight of the KL penalty to the reference policy (0 disables it).", 0.0, 10.0),
        _float("epsilon", 0.2, "Lower PPO clipping range: ratios below 1 − epsilon are clipped.", 0.0, 1.0),
        _float("epsilon_high", 0.2, "Upper PPO clipping range: ratios above 1 + epsilon_high are clipped.", 0.0, 1.0),
        _float("entropy_coef", 0.0, "Weight of the token-entropy bonus in the loss (0 disables it).", 0.0, 1.0),
        _int("eval_every", 10, "Evaluate on the held-out labels every this many steps (0 never).", 0, 100000),
        _int("eval_samples", 16, "Samples per evaluation prompt, for pass@k and maj@k.", 1, 1024),
        _int("save_every", 50, "Write a checkpoint every this many steps (0 only at the end).", 0, 100000),
        Hyperparameter("generation_backend", "choice", "hf", "Rollout generation: Hugging Face generate, or vLLM "
                       "colocated on the training GPU (needs the vllm package and a GPU).", choices=("hf", "vllm")),
    )
}


def _shared(exclude: tuple[str, ...] = (), **overrides: object) -> tuple[Hyperparameter, ...]:
    """The shared hyperparameters, with some defaults replaced and the ``exclude``d ones left out."""
    unknown = (set(overrides) | set(exclude)) - set(_SHARED)
    if unknown:
        raise KeyError(f"not shared hyperparameters: {sorted(unknown)}")
    return tuple(replace(h, default=overrides.get(h.name, h.default)) for h in _SHARED.values()
                 if h.name not in exclude)


_TTRL = "Zuo et al. 2025, TTRL: Test-Time Reinforcement Learning (arXiv:2504.16084)"
_EVOL = (
    "On the Evolution of Language Models without Labels: Majority Drives Selection, "
    "Novelty Promotes Variation (EVOL-RL)"
)
_COMPASS = "Rewarding the Journey, Not Just the Destination: A Composite Path and Answer Self-Scoring Reward Mechanism (COMPASS)"
_RZERO = "R-Zero: Self-Evolving Reasoning LLM from Zero Data"
_DARL = "DARL: Encouraging Diverse Answers for General Reasoning without Verifiers"
_RLPR = "Yu et al. 2025, RLPR: Extrapolating RLVR to General Domains without Verifiers"

# DARL follows RLPR's training setup: 8 rollouts, no KL, clip 0.2 / 0.27 (DARL §4.1).
_EM_AGGREGATION = Hyperparameter(
    "aggregation", "choice", "sum", "How the per-token terms add up: 'sum' as Agarwal et al. 2025 define the EM-RL "
    "rewards (−Σ_t H_t, Σ_t log p_t), or 'mean' (length-normalised).", choices=("sum", "mean"))
_RLPR_TRAINING = dict(n_votes=8, n_train=8, kl_coef=0.0, epsilon_high=0.27, learning_rate=1e-6, temperature=1.0)

_METHOD_LIST = [
    Method(
        name="ttrl",
        title="TTRL",
        paper=_TTRL,
        needs_references=False,
        label_free=True,
        description="Majority vote over n_votes rollouts is the pseudo-label; reward 1 for agreeing rollouts.",
        hyperparameters=_shared(),
    ),
    Method(
        name="evol_rl",
        title="EVOL-RL",
        paper=_EVOL,
        needs_references=False,
        label_free=True,
        description="Majority selects (reward bands [0.5, 1] / [-1, -0.5]); semantic novelty ranks within each band.",
        hyperparameters=_shared(epsilon_high=0.28, entropy_coef=0.003, max_completion_length=12288)
        + (
            _float("alpha", 0.5, "Novelty mixing: u = 1 − (α·mean similarity in own group + (1 − α)·max similarity).", 0.0, 1.0),
            _bool("use_novelty", True, "Ablation (\"−Novelty Reward\"): with false the reward falls back to TTRL's: 1 for the majority answer, 0 otherwise."),
            _bool("use_entropy_bonus", True, "Ablation: with false entropy_coef is ignored (set to 0)."),
            _bool("use_clip_high", True, "Ablation: with false epsilon_high is ignored (symmetric clipping with epsilon)."),
        ),
    ),
    Method(
        name="compass",
        title="COMPASS",
        paper=_COMPASS,
        needs_references=False,
        label_free=True,
        description="Confidence-weighted vote with credibility (DCAR) plus entropy-weighted decisiveness of the path (DPR).",
        hyperparameters=_shared(temperature=0.6)
        + (
            _bool("use_confidence_weighting", True, "Ablation: with false the pseudo-label is a plain majority vote."),
            _bool("use_credibility", True, "Ablation: with false agreeing answers get 1 instead of the credibility."),
            _bool("use_dpr", True, "Ablation: with false the Decisive Path Reward is left out."),
        ),
    ),
    Method(
        name="darl",
        title="DARL",
        paper=_DARL,
        needs_references=True,
        reference_field="reference",
        label_free=False,
        description="RLPR's mean answer-token probability plus a small bonus for answers within a bounded distance of the reference.",
        hyperparameters=_shared(**_RLPR_TRAINING)
        + (
            _float("beta", 0.01, "Weight of the diversity term; alpha = 1 − beta.", 0.0, 1.0),
            _float("gamma", 10.0, "Dynamic threshold divisor: a deviation is rewarded while Δr ≤ r(y*)/gamma.", 1e-6, 1e6),
            _float("tau", None, "Static threshold on Δr; null uses the dynamic threshold r(y*)/gamma.", 0.0, 1.0, nullable=True),
            _bool("use_majority_as_reference", False, "Use the majority answer of the group as y* instead of the reference (label-free variant)."),
        ),
    ),
    Method(
        name="rlpr",
        title="RLPR",
        paper=_RLPR,
        needs_references=True,
        reference_field="reference",
        label_free=False,
        description="Reward = mean token probability of the reference answer given the prompt and the sampled reasoning, "
                    "minus the same probability without the reasoning (clipped to [0, 1]); low-std prompts are not trained on.",
        hyperparameters=_shared(**_RLPR_TRAINING)
        + (
            _bool("use_debiasing", True, "RLPR reward debiasing: r̂ = clip(r − r′, 0, 1), r′ = the reference's mean token "
                  "probability given the prompt without reasoning. Ablation: with false the reward is r."),
            _float("std_filter_threshold", 0.01, "RLPR standard deviation filtering (β): a prompt whose rewards have a "
                   "standard deviation below this over its group is not trained on (0 turns the filter off). Fixed here; "
                   "the paper adapts β during training.", 0.0, 1.0),
        ),
    ),
    Method(
        name="r_zero",
        title="R-Zero",
        paper=_RZERO,
        needs_references=False,
        label_free=True,
        description="A challenger writes questions at the solver's edge of ability; the solver trains on the kept ones.",
        # R-Zero's challenger/solver phases run one update per GRPO step (rl/rzero.py)
        hyperparameters=_shared(exclude=("prompts_per_update", "ppo_epochs"), n_votes=5, n_train=5, learning_rate=1e-6, kl_coef=0.01, top_p=0.99, max_completion_length=4096)
        + (
            _int("iterations", 3, "Challenger/solver co-evolution iterations.", 1, 100),
            _int("questions_per_iteration", 8000, "Candidate questions the challenger writes per iteration (N).", 1, 1000000),
            _int("challenger_rollouts", 4, "Questions sampled per challenger prompt in its GRPO step (a GRPO group: at least 2).", 2, 1024),
            _int("challenger_steps", 5, "Challenger GRPO steps per iteration.", 1, 100000),
            _int("solver_steps", 15, "Solver GRPO steps per iteration.", 1, 100000),
            _int("solver_samples", 10, "Solver answers per question (m) for the uncertainty reward and the filter.", 1, 1024),
            _int("keep_low", 3, "Keep a question when at least this many of the m answers match the majority.", 0, 1024),
            _int("keep_high", 7, "... and at most this many.", 0, 1024),
            _float("bleu_threshold", 0.5, "Questions closer than this BLEU distance (1 − BLEU) share a cluster (τ_BLEU).", 0.0, 1.0),
            _float("repetition_weight", 1.0, "λ: repetition penalty = λ·|cluster|/batch size.", 0.0, 100.0),
        ),
    ),
    Method(
        name="em_token",
        title="EM-RL-Token",
        paper="Agarwal et al. 2025, The Unreasonable Effectiveness of Entropy Minimization (baseline in EVOL-RL)",
        needs_references=False,
        label_free=True,
        description="Reward = − summed token entropy of the rollout (Agarwal et al.: r = −Σ_t H_t).",
        hyperparameters=_shared()
        + (_EM_AGGREGATION,),
    ),
    Method(
        name="em_sequence",
        title="EM-RL-Sequence",
        paper="Agarwal et al. 2025, The Unreasonable Effectiveness of Entropy Minimization (baseline in EVOL-RL)",
        needs_references=False,
        label_free=True,
        description="Reward = log-probability of the rollout, a sum over its tokens (sequence-level entropy minimisation).",
        hyperparameters=_shared()
        + (_EM_AGGREGATION,),
    ),
    Method(
        name="self_consistency",
        title="Self-Consistency",
        paper="Self-consistency reward (baseline in EVOL-RL, conference version)",
        needs_references=False,
        label_free=True,
        description="Reward = share of the group whose answer agrees with the rollout's answer.",
        hyperparameters=_shared(),
    ),
    Method(
        name="rlvr",
        title="RLVR (supervised)",
        paper="GRPO with verifiable rewards (Shao et al. 2024, DeepSeekMath) — the supervised upper bound",
        needs_references=True,
        reference_field="label",
        label_free=False,
        description="Reward 1 when the answer is equivalent to the prompt's label: needs labels, not label-free.",
        hyperparameters=_shared(n_votes=32, n_train=32),
    ),
]

METHODS: dict[str, Method] = {method.name: method for method in _METHOD_LIST}


def get_method(name: str) -> Method:
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise HyperparameterError("method", f"unknown method {name!r}: expected one of {', '.join(METHODS)}") from None


def reference_field(method: str, hyperparameters: dict) -> str | None:
    """The prompt-row field a run of ``method`` reads as its reference y*, or None when it needs none.

    DARL with use_majority_as_reference votes its own pseudo-reference and needs none.
    """
    spec = get_method(method)
    if spec.reference_field is None or hyperparameters.get("use_majority_as_reference"):
        return None
    return spec.reference_field


def validate_hyperparameters(method: str, values: dict | None) -> dict:
    """The complete hyperparameters for ``method``: defaults filled, values coerced.

    Raises HyperparameterError (with ``field``) for an unknown method or name, a value
    of the wrong type or out of range, or n_train > n_votes.
    """
    spec = get_method(method)
    values = dict(values or {})
    known = {h.name for h in spec.hyperparameters}
    for name in values:
        if name not in known:
            raise HyperparameterError(
                str(name), f"unknown hyperparameter {name!r} for {spec.name}: expected one of {', '.join(sorted(known))}"
            )
    result = {}
    for h in spec.hyperparameters:
        result[h.name] = h.coerce(values[h.name]) if h.name in values else h.default
    _check_relations(spec, result)
    return result


def _check_relations(spec: Method, values: dict) -> None:
    if "n_train" in values and "n_votes" in values and values["n_train"] > values["n_votes"]:
        raise HyperparameterError(
            "n_train", f"n_train={values['n_train']} is invalid: expected an integer in [1, n_votes={values['n_votes']}]"
        )
    if "prompts_per_update" in values and values["prompts_per_step"] % values["prompts_per_update"]:
        raise HyperparameterError(
            "prompts_per_update",
            f"prompts_per_update={values['prompts_per_update']} is invalid: expected a divisor of "
            f"prompts_per_step={values['prompts_per_step']} (each step is split into whole updates)",
        )
    if "keep_low" in values and "keep_high" in values:
        if values["keep_low"] > values["keep_high"]:
            raise HyperparameterError(
                "keep_low", f"keep_low={values['keep_low']} is invalid: expected an integer in [0, keep_high={values['keep_high']}]"
            )
        if "solver_samples" in values and values["keep_high"] > values["solver_samples"]:
            raise HyperparameterError(
                "keep_high",
                f"keep_high={values['keep_high']} is invalid: expected an integer in [keep_low, solver_samples={values['solver_samples']}]",
            )
