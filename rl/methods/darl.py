"""DARL: RLPR's reference-probability reward plus a small bonus for answers a bounded distance from y*.

r(y, z, x) is the mean token probability of answer y given prompt x and reasoning z (DARL Eq. (5), RLPR's reward),
which the policy probe computes on the generated ids (rl.probes.answer_probabilities_from_ids). r_ref = r(y*, z, x)
scores the reference answer y* under the sampled reasoning; r_gen = r(y, z, x) the answer the policy generated.
"""

from __future__ import annotations

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.probability_reward import (AdaptiveStdFilter, reference_probabilities, with_format_reward,
                                           with_repetition_penalty)
from rl.methods.schema import Method, bool_param, float_param, shared
from rl.methods.setups import R1_TEMPLATE, RELEASE_SCRIPT, RLPR_TRAINING, check_filter_steps, release_reward_parameters


def darl_reward(r_ref: float, r_gen: float, beta: float = 0.01, gamma: float = 10.0, tau: float | None = None) -> float:
    """r̄ = α·r(y*) + β·Δr·1[Δr ≤ threshold], α = 1 − β, Δr = max(r(y*) − r(y), 0).

    # DARL Eq. (3)–(4) with the static threshold τ; Eq. (6) with the dynamic threshold r(y*)/γ when tau is None
    """
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    alpha = 1.0 - beta
    delta = max(r_ref - r_gen, 0.0)  # DARL Eq. (3)
    threshold = r_ref / gamma if tau is None else tau
    bonus = beta * delta if delta <= threshold else 0.0
    return alpha * r_ref + bonus


def score(group: Group, hp: dict, probe) -> GroupScore:
    majority = majority_vote(group.answers)
    reference = majority if hp["use_majority_as_reference"] else group.reference
    if reference is None:  # label-free variant and nobody answered: no pseudo-reference, only the format reward
        rewards, formats = with_format_reward([0.0] * len(group.texts), group.texts, hp)
        rewards, penalties = with_repetition_penalty(rewards, group.texts, hp)
        return GroupScore(rewards=rewards, majority_answer=majority,
                          extras=[{"r_ref": None, "r_gen": None, "format": f, "repetition_penalty": p}
                                  for f, p in zip(formats, penalties)])
    r_ref, r_gen = reference_probabilities(group, probe, reference, METHOD.answer_opener)
    # DARL Eq. (3)–(4) (static τ) or Eq. (6) (dynamic threshold r(y*)/γ when tau is null)
    darl = [darl_reward(a, b, beta=hp["beta"], gamma=hp["gamma"], tau=hp["tau"]) for a, b in zip(r_ref, r_gen)]
    bonus = [r - (1.0 - hp["beta"]) * a > 1e-12 for r, a in zip(darl, r_ref)]
    # RLPR's release, which DARL follows: (1 − c) · reward + c · format
    rewards, formats = with_format_reward(darl, group.texts, hp)
    rewards, penalties = with_repetition_penalty(rewards, group.texts, hp)  # and its repetition penalty
    extras = [{"r_ref": a, "r_gen": b, "diversity_bonus": flag, "format": f, "repetition_penalty": p}
              for a, b, flag, f, p in zip(r_ref, r_gen, bonus, formats, penalties)]
    metrics = {"darl/r_ref_mean": float(np.mean(r_ref)), "darl/r_gen_mean": float(np.mean(r_gen)),
               "darl/bonus_ratio": float(np.mean(bonus)),
               "darl/repetition_penalty_rate": float(np.mean([p != 0 for p in penalties]))}
    return GroupScore(rewards=rewards, majority_answer=majority, extras=extras, metrics=metrics)


METHOD = Method(
    name="darl",
    title="DARL",
    paper="DARL: Encouraging Diverse Answers for General Reasoning without Verifiers",
    label_free=False,
    description="RLPR's mean answer-token probability plus a small bonus for answers within a bounded distance of the "
                "reference, trained as RLPR's release trains (format reward, adaptive std filter).",
    defaults_source=f"DARL App. A: prompt batch 768, mini-batch 192, 8 rollouts, clip 0.2 / 0.27, no KL, a setup "
                    f"that 'closely follows that of RLPR'; DARL released no code, so the rest is {RELEASE_SCRIPT}'s: "
                    "lr 1e-6 constant without warmup, 3,072 response tokens, entropy_coeff 0.001, weight decay 0.01, the "
                    "adaptive std "
                    "filter (beta 0.5, from step 11) and the 0.1 format reward. β 0.01 and γ 10: the default of "
                    "DARL Table 5. format_coefficient 0 and std_filter_beta 0 leave DARL's Eq. (3)–(6) alone.",
    hyperparameters=shared(**RLPR_TRAINING) + (
        float_param("beta", 0.01, "Weight of the diversity term; alpha = 1 − beta.", 0.0, 1.0),
        float_param("gamma", 10.0, "Dynamic threshold divisor: a deviation is rewarded while Δr ≤ r(y*)/gamma.",
                    1e-6, 1e6),
        float_param("tau", None, "Static threshold on Δr; null uses the dynamic threshold r(y*)/gamma.", 0.0, 1.0,
                    nullable=True),
        bool_param("use_majority_as_reference", False, "Use the majority answer of the group as y* instead of the "
                   "reference (label-free variant)."),
    ) + release_reward_parameters(),
    relations=check_filter_steps,
    step_filter=lambda hp: AdaptiveStdFilter.from_hyperparameters("darl", hp),
    scorer=score,
    **R1_TEMPLATE,
    own_reference_switch="use_majority_as_reference",
    metric_prefix="darl",
    charts=("similarity/mean", "darl/bonus_ratio"),
    search_extras=("r_ref",),
)
