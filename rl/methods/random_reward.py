"""Random reward (Shao et al. 2025, Spurious Rewards: Rethinking Training Signals in RLVR, arXiv:2506.10947).

The negative control: each rollout's reward is drawn without looking at it, so a method that does not beat this run
on the same prompts and settings has shown nothing beyond what GRPO's optimiser does with noise.
"""

from __future__ import annotations

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, float_param, shared
from rl.methods.setups import COMPARISON_SETUP, COMPARISON_SOURCE


def score(group: Group, hp: dict, probe) -> GroupScore:
    # Spurious Rewards, "random reward": r ~ Bernoulli(γ), independent of the response. The draw is keyed by the run's
    # seed, the step and the group's place in it (Group.draw): every rank and a resumed step draw the same rewards
    rng = np.random.default_rng(list(group.draw))
    rewards = (rng.random(len(group.texts)) < hp["probability"]).astype(float).tolist()
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers))


METHOD = Method(
    name="random_reward",
    title="Random reward (control)",
    paper="Shao et al. 2025, Spurious Rewards: Rethinking Training Signals in RLVR (arXiv:2506.10947)",
    label_free=True,
    description="Negative control: each rollout gets reward 1 with probability γ, drawn independently of its text "
                "and seeded by the run's seed; a method should beat it on the same data and settings.",
    defaults_source="Spurious Rewards §2: γ = 0.5. The rest is " + COMPARISON_SOURCE + ", so a control run at the "
                    "defaults differs from TTRL or EVOL-RL in its reward only.",
    hyperparameters=shared(**COMPARISON_SETUP) + (
        float_param("probability", 0.5, "γ: the chance that a rollout is rewarded 1 (else 0), whatever it says.",
                    0.0, 1.0),
    ),
    scorer=score,
    metric_prefix="random_reward",
)
