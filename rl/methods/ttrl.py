"""TTRL (Zuo et al. 2025, arXiv:2504.16084): the majority answer of n_votes rollouts is the pseudo-label."""

from __future__ import annotations

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, shared
from rl.methods.setups import COMPARISON_SETUP, COMPARISON_SOURCE
from rl.voting import ttrl_rewards


def score(group: Group, hp: dict, probe) -> GroupScore:
    majority = majority_vote(group.answers)  # TTRL: y* = the most frequent answer among the n_votes rollouts
    return GroupScore(rewards=ttrl_rewards(group.answers, majority), majority_answer=majority)


METHOD = Method(
    name="ttrl",
    title="TTRL",
    paper="Zuo et al. 2025, TTRL: Test-Time Reinforcement Learning (arXiv:2504.16084)",
    label_free=True,
    description="Majority vote over n_votes rollouts is the pseudo-label; reward 1 for agreeing rollouts.",
    defaults_source=COMPARISON_SOURCE + "; TTRL's own paper used 3,072 tokens.",
    hyperparameters=shared(**COMPARISON_SETUP),
    scorer=score,
    rewards_the_vote=True,  # reward_accuracy (TTRL §4) is charted with labels
    metric_prefix="ttrl",
)
