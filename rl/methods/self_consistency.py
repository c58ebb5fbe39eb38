"""Self-consistency (baseline in EVOL-RL, conference version): the share of the group that agrees with the answer."""

from __future__ import annotations

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.evol_rl import COMPARISON_SETUP, COMPARISON_SOURCE
from rl.methods.schema import Method, shared
from rl.rewards.baselines import self_consistency_rewards


def score(group: Group, hp: dict, probe) -> GroupScore:
    return GroupScore(rewards=self_consistency_rewards(group.answers), majority_answer=majority_vote(group.answers))


METHOD = Method(
    name="self_consistency",
    title="Self-Consistency",
    paper="Self-consistency reward (baseline in EVOL-RL, conference version)",
    label_free=True,
    description="Reward = share of the group whose answer agrees with the rollout's answer.",
    defaults_source=COMPARISON_SOURCE + ".",
    hyperparameters=shared(**COMPARISON_SETUP),
    scorer=score,
    rewards_the_vote=True,  # reward_accuracy (TTRL §4) is charted with labels
)
