"""Self-consistency (baseline in EVOL-RL, conference version): the share of the group that agrees with the answer."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rl.answers import answers_equal, majority_vote, normalize_answer
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, shared
from rl.methods.setups import COMPARISON_SETUP, COMPARISON_SOURCE


def self_consistency_rewards(answers: Sequence[str | None]) -> list[float]:
    """Share of the whole group (itself included) whose answer equals each answer; 0 for None.

    Votes are grouped on normalised strings, then groups that math-verify finds equal are merged.
    """
    size = len(answers)
    if size == 0:
        return []
    keys = [normalize_answer(a) if a is not None else None for a in answers]
    representatives: list[str] = []  # one raw answer per distinct normalised form
    form_of: dict[str, int] = {}
    for answer, key in zip(answers, keys):
        if key is not None and key not in form_of:
            form_of[key] = len(representatives)
            representatives.append(answer)
    counts = np.zeros(len(representatives))
    for key in keys:
        if key is not None:
            counts[form_of[key]] += 1
    # support of each distinct form = votes of every form equivalent to it
    support = np.array([
        sum(counts[j] for j, other in enumerate(representatives) if j == i or answers_equal(rep, other))
        for i, rep in enumerate(representatives)
    ])
    return [float(support[form_of[key]] / size) if key is not None else 0.0 for key in keys]


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
    # no reward_accuracy: the reward is a share of the group, not membership of the vote (issue 38, defect 7)
)
