"""TTRL: the majority answer of the group is the pseudo-label."""

from __future__ import annotations

from typing import Sequence

from rl.answers import answers_equal, majority_vote


def ttrl_rewards(answers: Sequence[str | None], majority: str | None = None) -> list[float]:
    """1.0 for each answer equivalent to the majority answer, else 0.0.

    ``majority`` may be passed when it was voted over a larger set than ``answers``
    (TTRL votes over all n_votes rollouts and trains on the first n_train).
    """
    if majority is None:
        majority = majority_vote(answers)
    if majority is None:
        return [0.0] * len(answers)
    # TTRL rule-based reward: r(y_i, y*) = 1 if y_i = y* else 0, with y* the majority vote
    return [1.0 if answers_equal(answer, majority) else 0.0 for answer in answers]
