"""RLVR: GRPO with a verifiable reward against the held-out label, the supervised upper bound (not label-free)."""

from __future__ import annotations

from typing import Sequence

from rl.answers import answers_equal, majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, shared
from rl.methods.setups import COMPARISON_SETUP, COMPARISON_SOURCE


def rlvr_rewards(answers: Sequence[str | None], label: str | None) -> list[float]:
    """1.0 when the answer is equivalent to the held-out label, else 0.0 (supervised: needs labels)."""
    if label is None:
        raise ValueError("rlvr needs a label for every prompt")
    return [1.0 if answers_equal(answer, label) else 0.0 for answer in answers]


def score(group: Group, hp: dict, probe) -> GroupScore:
    # supervised: reward 1 when the answer is equivalent to the label (DeepSeekMath's verifiable reward)
    return GroupScore(rewards=rlvr_rewards(group.answers, group.reference), majority_answer=majority_vote(group.answers))


METHOD = Method(
    name="rlvr",
    title="RLVR (supervised)",
    paper="GRPO with verifiable rewards (Shao et al. 2024, DeepSeekMath) — the supervised upper bound",
    label_free=False,
    description="Reward 1 when the answer is equivalent to the prompt's label: needs labels, not label-free.",
    defaults_source="GRPO on the labels with the setup of the TTRL runs it bounds, " + COMPARISON_SOURCE + "; all "
                    "32 rollouts sampled are trained on, there is no vote to take.",
    hyperparameters=shared(n_votes=32, n_train=32, **COMPARISON_SETUP),
    scorer=score,
    reference_field="label",
)
