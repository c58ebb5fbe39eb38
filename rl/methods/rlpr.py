"""RLPR (Yu et al. 2025): the policy's own probability of the reference answer, after its reasoning, is the reward."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, bool_param, float_param, int_param, shared
from rl.params import FieldError, Param
from rl.prompts import THINK_ANSWER_SYSTEM_PROMPT, extract_think_answer

RELEASE_SCRIPT = "RLPR's examples/RLPR/reproduce_qwen.sh"
# RLPR's release (reproduce_qwen.sh and its verl's ppo_trainer.yaml): prompt batch 768, mini-batch 192 (4 updates a
# step, one epoch), 8 rollouts, clip 0.2 / 0.27, no KL, lr 1e-6 constant without warmup (verl's warmup_style
# constant), 3,072 response tokens, the actor's entropy_coeff 0.001. DARL App. A repeats the batches, rollouts and
# clipping and says its setup "closely follows that of RLPR".
RLPR_TRAINING = dict(n_votes=8, n_train=8, prompts_per_step=768, prompts_per_update=192, kl_coef=0.0,
                     epsilon_high=0.27, learning_rate=1e-6, lr_schedule="constant", warmup_ratio=0.0, temperature=1.0,
                     max_completion_length=3072, entropy_coef=0.001, weight_decay=0.01)

# DARL Table 6 (RLPR's R1-style template): reasoning in <think>, the final answer in <answer> tags, scored against the
# prompt row's `reference`. DARL's Method takes it too, as it takes RLPR's release training.
R1_TEMPLATE = dict(system_prompt=THINK_ANSWER_SYSTEM_PROMPT, answer_rule=extract_think_answer, answer_opener="<answer>",
                   reference_field="reference")


def release_reward_parameters() -> tuple:
    """RLPR's format reward and adaptive standard-deviation filter, as its release runs them (DARL shares them)."""
    return (
        float_param("format_coefficient", 0.1, "Weight c of the release's format reward: reward = (1 − c) · r + "
                    "c · [the response is <think>…</think> … <answer>…</answer>, each tag once] (prob.py, "
                    "format_coefficient 0.1). 0: the paper's reward alone.", 0.0, 1.0),
        float_param("std_filter_beta", 0.5, "RLPR standard deviation filtering: a prompt whose rewards' standard "
                    "deviation is below std_filter_beta × an EMA of the batch's mean reward std is not trained on "
                    "(reproduce_qwen.sh: 0.5). 0 turns the filter off.", 0.0, 10.0),
        float_param("std_filter_ema_ratio", 0.99, "Weight of the past in the EMA of the batch's mean reward std "
                    "(filter_ema_ratio).", 0.0, 1.0),
        int_param("std_filter_ema_start_step", 6, "First step whose mean reward std is collected for the EMA "
                  "(filter_ema_start_step).", 1, 1000000),
        int_param("std_filter_start_step", 11, "First step filtered; the EMA starts as the mean of the steps "
                  "collected before it (filter_start_step).", 1, 1000000),
        float_param("std_filter_threshold", None, "A fixed threshold on the rewards' standard deviation instead of "
                    "the adaptive one, from the first step; null: adaptive.", 0.0, 1.0, nullable=True),
        bool_param("repetition_penalty", True, "The release's repetition penalty (reproduce_qwen.sh: "
                   "reward_model.repetition_penalty=True): −1 added to a non-zero reward when a window of 10 words "
                   "occurs repetition_penalty_limit times or more in the response, before the std filter."),
        int_param("repetition_penalty_limit", 10, "Occurrences of one 10-word window that make a response "
                  "repetitive (repetition_penalty_max_repetitions_limit).", 2, 1000000),
    )


def check_filter_steps(hp: dict) -> None:
    if hp["std_filter_ema_start_step"] >= hp["std_filter_start_step"]:
        raise FieldError("std_filter_start_step", f"std_filter_start_step={hp['std_filter_start_step']} is "
                                  f"invalid: expected a step after std_filter_ema_start_step="
                                  f"{hp['std_filter_ema_start_step']} (the EMA starts from the steps between them)")


_R1_FORMAT = re.compile(r"<think>.*</think>.*<answer>.*</answer>.*", re.DOTALL)


def r1_format_reward(text: str) -> float:
    """1 when the response is <think>…</think> … <answer>…</answer> with each tag exactly once, else 0.

    RLPR's verl/workers/reward_manager/prob.py::format_reward, format_mode "R1".
    """
    if any(text.count(tag) != 1 for tag in ("<think>", "</think>", "<answer>", "</answer>")):
        return 0.0
    return 1.0 if _R1_FORMAT.fullmatch(text) else 0.0


def with_format_reward(rewards: Sequence[float], texts: Sequence[str], hp: dict) -> tuple[list[float], list[float]]:
    """prob.py: score = (1 − c) · reward + c · format; the format of each rollout alongside."""
    c = hp["format_coefficient"]
    formats = [r1_format_reward(text) for text in texts]
    return [(1.0 - c) * r + c * f for r, f in zip(rewards, formats)], formats


def repetition_penalty(text: str, window: int = 10, limit: int = 10) -> float:
    """−1 when a window of `window` words (split on whitespace, then on '_') occurs `limit` or more times, else 0.

    RLPR's verl/utils/reward_score/repetition.py::detect_repetition_with_hash (window_size 10; ray_trainer.py passes
    max_repetitions_limit 10).
    """
    words = [word for segment in text.split() for word in segment.split("_")]
    if len(words) <= window:
        return 0.0
    counts = Counter(tuple(words[i:i + window]) for i in range(len(words) - window + 1))
    return -1.0 if max(counts.values()) >= limit else 0.0


def with_repetition_penalty(rewards: Sequence[float], texts: Sequence[str], hp: dict) -> tuple[list[float], list[float]]:
    """ray_trainer.py:1936: the penalty is added where the reward tensor is non-zero (a reward of exactly 0 keeps 0),
    after prob.py's score and before the std filter reads the rewards; the penalty of each rollout alongside."""
    if not hp.get("repetition_penalty", False):
        return list(rewards), [0.0] * len(rewards)
    penalties = [repetition_penalty(text, 10, hp["repetition_penalty_limit"]) for text in texts]
    return [r + p if r != 0 else r for r, p in zip(rewards, penalties)], penalties


def _bessel_std(rewards: Sequence[float]) -> float:
    """torch.std of a group's rewards, as verl's compute_advantage reports it (nan for a single rollout)."""
    return float(np.std(rewards, ddof=1)) if len(rewards) > 1 else math.nan


@dataclass
class AdaptiveStdFilter:
    """RLPR's standard deviation filtering with its adaptive threshold, as the release runs it.

    RLPR's verl/trainer/ppo/ray_trainer.py, filter_mode "EMA": steps from `ema_start` until `start` only collect
    the mean over the batch's prompts of their reward std; at `start` the EMA is the mean of those, and each later
    step moves it by (1 − ratio) towards the previous step's mean (every prompt generated counts, filtered or not).
    A prompt is trained on when its reward std ≥ beta × EMA (`accuracy_lower_bound`); a nan std is left out.
    One per run, made by Method.step_filter; its state goes into each checkpoint.
    """

    prefix: str
    beta: float
    ratio: float
    ema_start: int
    start: int
    fixed: float | None = None
    history: list[float] = field(default_factory=list)  # step means, ema_start..start-1
    ema: float | None = None
    last_mean: float | None = None  # the previous filtered step's mean, folded into the EMA at the next one

    @classmethod
    def from_hyperparameters(cls, prefix: str, hp: dict) -> "AdaptiveStdFilter":
        return cls(prefix, hp["std_filter_beta"], hp["std_filter_ema_ratio"], hp["std_filter_ema_start_step"],
                   hp["std_filter_start_step"], hp["std_filter_threshold"])

    def apply(self, step: int, group_rewards: list[Sequence[float]]) -> tuple[list[bool], dict[str, float]]:
        """Which groups of rollout step `step` (1-based) are left out, and the step's filter metrics."""
        stds = [_bessel_std(rewards) for rewards in group_rewards]
        finite = [s for s in stds if math.isfinite(s)]
        mean = sum(finite) / len(finite) if finite else None
        threshold = self.fixed
        if threshold is None and self.beta > 0 and step >= self.ema_start:
            if step < self.start:
                if mean is not None:
                    self.history.append(mean)
            else:
                if self.ema is None:
                    self.ema = sum(self.history) / len(self.history) if self.history else mean  # "init the ema"
                elif self.last_mean is not None:
                    self.ema = self.last_mean * (1 - self.ratio) + self.ema * self.ratio  # ray_trainer.py:1584
                threshold = None if self.ema is None else self.ema * self.beta  # ray_trainer.py:1589
                self.last_mean = mean
        skips = [threshold is not None and not (math.isfinite(s) and s >= threshold) for s in stds]
        metrics = {f"{self.prefix}/filtered_ratio": sum(skips) / len(skips) if skips else 0.0}
        if threshold is not None:
            metrics[f"{self.prefix}/std_threshold"] = threshold
        return skips, metrics

    def state_dict(self) -> dict:
        return {"history": self.history, "ema": self.ema, "last_mean": self.last_mean}

    def load_state_dict(self, state: dict) -> None:
        self.history, self.ema, self.last_mean = list(state["history"]), state["ema"], state["last_mean"]


def rlpr_debiased_reward(r: float, r_without_reasoning: float) -> float:
    """r̂ = clip(r − r′, 0, 1): what the sampled reasoning adds to the probability of the reference.

    # RLPR (Yu et al. 2025, arXiv 2506.18254), "reward debiasing": r̂ = clip(0, 1, r − r′)
    """
    return min(max(r - r_without_reasoning, 0.0), 1.0)


def reference_probabilities(group: Group, probe, reference: str, opener: str) -> tuple[list[float], list[float]]:
    """r(y*, z, x) and r(y, z, x) for every rollout (r(y) = 0 without an answer), in one batched pass.

    x ⊕ z is scored as the exact generated ids up to `opener`, where the final answer starts (DESIGN §6).
    """
    prefixes = probe.reasoning_prefix_ids(group, opener)
    answered = [j for j, a in enumerate(group.answers) if a is not None]
    probabilities = probe.answer_probabilities_from_ids(prefixes + [prefixes[j] for j in answered],
                                                        [reference] * len(prefixes) + [group.answers[j] for j in answered])
    r_ref = probabilities[: len(prefixes)]
    r_gen = [0.0] * len(prefixes)
    for j, p in zip(answered, probabilities[len(prefixes):]):
        r_gen[j] = p
    return r_ref, r_gen


def frozen_r_prime(hp: dict):
    """The scorer of r′ before training, when the reward uses the release's frozen r′; else None.

    RLPR's release scores every training prompt once, before training and before a checkpoint is loaded (so with
    the initial policy), and every step reuses the value (ray_trainer.py: fit → compute_promptgt2scoreA → get_scoreA,
    compute_score_name mean_exp_log_softmax): rl.probes.reference_after_prompt.
    """
    if not hp["use_debiasing"] or hp["r_prime"] != "frozen":
        return None

    def score_prompts(probe, prompt_ids, references):
        return probe.reference_probabilities_without_reasoning(prompt_ids, references)
    return score_prompts


def r_prime_of(group: Group, hp: dict, probe) -> float:
    """r′: the mean probability of y* given x without z (RLPR reward debiasing), frozen or of the current policy."""
    if hp["r_prime"] == "frozen":
        if group.baseline is None:
            raise RuntimeError(f"no frozen r′ for prompt {group.prompt_id!r}: the trainer scores every training "
                               "prompt before step 1 (Method.prompt_baselines)")
        return group.baseline
    # the per-step variant: the current policy, the prompt's exact ids and the answer opener, then y*
    return probe.answer_probabilities_from_ids([probe.answer_prefix_ids(group, METHOD.answer_opener)],
                                               [group.reference])[0]


def score(group: Group, hp: dict, probe) -> GroupScore:
    # RLPR: r = (1/|y*|) Σ_i p_θ(y*_i | x, z, y*_<i)
    r_ref, r_gen = reference_probabilities(group, probe, group.reference, METHOD.answer_opener)
    r_prime = None
    rewards = list(r_ref)
    if hp["use_debiasing"]:
        # RLPR reward debiasing: r̂ = clip(r − r′, 0, 1)
        r_prime = r_prime_of(group, hp, probe)
        rewards = [rlpr_debiased_reward(r, r_prime) for r in r_ref]
    rewards, formats = with_format_reward(rewards, group.texts, hp)
    rewards, penalties = with_repetition_penalty(rewards, group.texts, hp)
    extras = [{"r_ref": a, "r_gen": b, "r_ref_without_reasoning": r_prime, "format": f, "repetition_penalty": p}
              for a, b, f, p in zip(r_ref, r_gen, formats, penalties)]
    metrics = {"rlpr/r_ref_mean": float(np.mean(r_ref)), "rlpr/format_mean": float(np.mean(formats)),
               "rlpr/repetition_penalty_rate": float(np.mean([p != 0 for p in penalties]))}
    if len(rewards) > 1:
        metrics["rlpr/reward_std"] = _bessel_std(rewards)  # what the filter compares with its threshold
    if r_prime is not None:
        metrics["rlpr/r_ref_without_reasoning_mean"] = float(r_prime)
    # the standard deviation filter needs the whole step: AdaptiveStdFilter, through Method.step_filter
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers), extras=extras, metrics=metrics)


METHOD = Method(
    name="rlpr",
    title="RLPR",
    paper="Yu et al. 2025, RLPR: Extrapolating RLVR to General Domains without Verifiers",
    label_free=False,
    description="Reward = mean token probability of the reference answer given the prompt and the sampled reasoning, "
                "minus the same probability without the reasoning (clipped to [0, 1]), with the release's small "
                "format reward; prompts whose rewards vary less than an adaptive threshold are not trained on.",
    defaults_source=f"{RELEASE_SCRIPT} and its verl's ppo_trainer.yaml: prompt batch 768, mini-batch 192 (4 updates "
                    "a step), 8 rollouts, clip 0.2 / 0.27, no KL, lr 1e-6 constant without warmup, 3,072 response "
                    "tokens, entropy_coeff 0.001, AdamW weight decay 0.01 (its verl's actor optim); the std filter "
                    "adapts from step 11 (beta 0.5 × an EMA, ratio 0.99, collected from step 6) and the format reward weighs 0.1 (prob.py). docs/fidelity.md lists what "
                    "differs from the paper (arXiv 2506.18254).",
    hyperparameters=shared(**RLPR_TRAINING) + (
        bool_param("use_debiasing", True, "RLPR reward debiasing: r̂ = clip(r − r′, 0, 1), r′ = the reference's mean "
                   "token probability given the prompt without reasoning. Ablation: with false the reward is r."),
        Param("r_prime", "choice", "frozen", "How r′ is computed. frozen: as the release does, once before training "
              "with the initial policy, from the chat-templated prompt + ' ' + y* + EOS (ray_trainer.py "
              "compute_promptgt2scoreA). per_step: at every step with the current policy, from the prompt's ids + "
              "the answer opener <answer> + y*.", choices=("frozen", "per_step")),
    ) + release_reward_parameters(),
    relations=check_filter_steps,
    step_filter=lambda hp: AdaptiveStdFilter.from_hyperparameters("rlpr", hp),
    prompt_baselines=frozen_r_prime,
    scorer=score,
    **R1_TEMPLATE,
    metric_prefix="rlpr",
    charts=("similarity/mean", "rlpr/r_ref_mean", "rlpr/filtered_ratio", "rlpr/std_threshold"),
    search_extras=("r_ref",),
)
