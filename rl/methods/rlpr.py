"""RLPR (Yu et al. 2025): the policy's own probability of the reference answer, after its reasoning, is the reward."""

from __future__ import annotations

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.probability_reward import (AdaptiveStdFilter, bessel_std, reference_probabilities, with_format_reward,
                                           with_repetition_penalty)
from rl.methods.schema import Method, bool_param, shared
from rl.methods.setups import R1_TEMPLATE, RELEASE_SCRIPT, RLPR_TRAINING, check_filter_steps, release_reward_parameters
from rl.params import Param

def rlpr_debiased_reward(r: float, r_without_reasoning: float) -> float:
    """r̂ = clip(r − r′, 0, 1): what the sampled reasoning adds to the probability of the reference.

    # RLPR (Yu et al. 2025, arXiv 2506.18254), "reward debiasing": r̂ = clip(0, 1, r − r′)
    """
    return min(max(r - r_without_reasoning, 0.0), 1.0)


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
        metrics["rlpr/reward_std"] = bessel_std(rewards)  # what the filter compares with its threshold
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
