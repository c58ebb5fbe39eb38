"""RLPR (Yu et al. 2025): the policy's own probability of the reference answer, after its reasoning, is the reward."""

from __future__ import annotations

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, bool_param, float_param, shared
from rl.prompts import THINK_ANSWER_SYSTEM_PROMPT, extract_think_answer
from rl.rewards.baselines import rlpr_debiased_reward, rlpr_std_filter

# DARL follows RLPR's training setup: 8 rollouts, no KL, clip 0.2 / 0.27 (DARL §4.1).
RLPR_TRAINING = dict(n_votes=8, n_train=8, kl_coef=0.0, epsilon_high=0.27, learning_rate=1e-6, temperature=1.0)


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


def score(group: Group, hp: dict, probe) -> GroupScore:
    # RLPR: r = (1/|y*|) Σ_i p_θ(y*_i | x, z, y*_<i)
    r_ref, r_gen = reference_probabilities(group, probe, group.reference, METHOD.answer_opener)
    r_prime = None
    rewards = list(r_ref)
    if hp.get("use_debiasing", True):
        # RLPR reward debiasing: r′ = the same mean probability given x without z; r̂ = clip(r − r′, 0, 1)
        r_prime = probe.answer_probabilities_from_ids([probe.answer_prefix_ids(group, METHOD.answer_opener)],
                                                      [group.reference])[0]
        rewards = [rlpr_debiased_reward(r, r_prime) for r in r_ref]
    # RLPR standard deviation filtering: a group with std(r̂) < β is not trained on
    skip = rlpr_std_filter(rewards, hp.get("std_filter_threshold", 0.0))
    extras = [{"r_ref": a, "r_gen": b, "r_ref_without_reasoning": r_prime} for a, b in zip(r_ref, r_gen)]
    metrics = {"rlpr/r_ref_mean": float(np.mean(r_ref)), "rlpr/reward_std": float(np.std(rewards)),
               "rlpr/filtered_ratio": float(skip)}
    if r_prime is not None:
        metrics["rlpr/r_ref_without_reasoning_mean"] = float(r_prime)
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers), extras=extras, metrics=metrics,
                      skip_training=skip)


METHOD = Method(
    name="rlpr",
    title="RLPR",
    paper="Yu et al. 2025, RLPR: Extrapolating RLVR to General Domains without Verifiers",
    label_free=False,
    description="Reward = mean token probability of the reference answer given the prompt and the sampled reasoning, "
                "minus the same probability without the reasoning (clipped to [0, 1]); low-std prompts are not trained on.",
    hyperparameters=shared(**RLPR_TRAINING) + (
        bool_param("use_debiasing", True, "RLPR reward debiasing: r̂ = clip(r − r′, 0, 1), r′ = the reference's mean "
                   "token probability given the prompt without reasoning. Ablation: with false the reward is r."),
        float_param("std_filter_threshold", 0.01, "RLPR standard deviation filtering (β): a prompt whose rewards have "
                    "a standard deviation below this over its group is not trained on (0 turns the filter off). "
                    "Fixed here; the paper adapts β during training.", 0.0, 1.0),
    ),
    scorer=score,
    # DARL Table 6 (RLPR's R1-style template): reasoning in <think>, the final answer in <answer> tags
    system_prompt=THINK_ANSWER_SYSTEM_PROMPT,
    answer_rule=extract_think_answer,
    answer_opener="<answer>",
    reference_field="reference",
    metric_prefix="rlpr",
    charts=("similarity/mean", "rlpr/r_ref_mean", "rlpr/filtered_ratio"),
)
