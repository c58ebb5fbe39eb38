"""TTRL's reward for agreeing with a pseudo-label, the one rule that three methods share: TTRL (the majority of the
group's rollouts), EVOL-RL's "−Novelty Reward" ablation (the same majority) and R-Zero's solver (the question's
pseudo-label, voted in the questions phase).

It has a module of its own, not rl/methods/ttrl.py, because TTRL takes its defaults from EVOL-RL's comparison setup
(rl/methods/evol_rl.py), and EVOL-RL needs this rule: each importing the other would be a cycle.
"""

from __future__ import annotations

from typing import Sequence

from rl.answers import answers_equal


def ttrl_rewards(answers: Sequence[str | None], pseudo_label: str | None) -> list[float]:
    """1.0 for each answer equivalent to the pseudo-label, else 0.0 (all 0.0 when there is none).

    The callers vote the pseudo-label themselves, over every rollout they were given (TTRL: all n_votes; the
    trainer trains on the first n_train).
    """
    # TTRL rule-based reward: r(y_i, y*) = 1 if y_i = y* else 0, with y* the majority vote
    return [1.0 if answers_equal(answer, pseudo_label) else 0.0 for answer in answers]
