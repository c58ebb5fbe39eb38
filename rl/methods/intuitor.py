"""Intuitor / RLIF (Zhao et al. 2025, arXiv:2505.19590): the policy's own self-certainty is the reward."""

from __future__ import annotations

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, shared
from rl.rewards.intuitor import self_certainty_reward


def score(group: Group, hp: dict, probe) -> GroupScore:
    stats = probe.token_statistics(group)  # one forward pass; self-certainty at temperature 1 (rl/probes.py)
    # Intuitor Eq. (4): u(o|q) = (1/|o|) Σ_i KL(U ‖ π_θ(·|q, o_<i)); the GRPO advantage (Eq. (6)) is the trainer's
    rewards = [self_certainty_reward(s.self_certainty) for s in stats]
    extras = [{"self_certainty": r} for r in rewards]
    metrics = {"intuitor/self_certainty_mean": float(np.mean(rewards))}
    # no vote in the reward: the majority answer is reported for the dashboard only
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers), extras=extras, metrics=metrics)


METHOD = Method(
    name="intuitor",
    title="Intuitor (RLIF)",
    paper="Zhao et al. 2025, Learning to Reason without External Rewards (Intuitor, arXiv:2505.19590)",
    label_free=True,
    description="Reward = self-certainty of the rollout: the mean over its tokens of KL(uniform ‖ p_θ), the "
                "policy's confidence in its own next-token distributions.",
    defaults_source="Intuitor §4 and Table 7 (Qwen2.5-1.5B/3B on MATH) and its recipes/Qwen2.5-3B/intuitor/"
                    "config_demo.yaml: group size 7, 128 problems per update, temperature 0.9, 3,072 completion "
                    "tokens, lr 3e-6 cosine with 10% warmup, KL β 0.005 (§4 and the config; Table 7's 0.0005 read "
                    "as a typo), clip 0.2. Self-certainty at temperature 1, as the released code.",
    hyperparameters=shared(n_votes=7, n_train=7, prompts_per_step=128, prompts_per_update=128, temperature=0.9,
                           max_completion_length=3072, learning_rate=3e-6, warmup_ratio=0.1, kl_coef=0.005),
    scorer=score,
    metric_prefix="intuitor",
    charts=("similarity/mean", "intuitor/self_certainty_mean"),
    search_extras=("self_certainty",),
)
