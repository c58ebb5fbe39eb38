"""What a method's scorer sees and returns: one prompt's rollouts in, one reward per rollout out.

A scorer (`Method.scorer`, rl/methods/) sees a `Group` (the prompt, the rollouts' texts,
answers, token ids and embeddings) and, only for the reference methods, `group.reference`.
Held-out labels never reach a label-free scorer: the trainer fills `reference` only for a
method whose `Method.reference_field_for(hyperparameters)` names a field. Scorers that need
the policy (COMPASS, the entropy-minimisation baselines, RLPR, DARL, Intuitor) get it through
`probe`, an rl.policy_probe.PolicyProbe. No torch here: the method records import this.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Group:
    """One prompt's rollouts at one step, as the scorers see them."""

    prompt_id: str
    prompt: str
    texts: list[str]
    answers: list[str | None]  # extracted with the method's own rule (Method.answer_rule)
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    embeddings: np.ndarray  # G×d, L2-normalised, of rl.similarity.reasoning_part(text)
    reference: str | None = None  # the row's `reference` (DARL, RLPR) or label (RLVR); None for label-free methods
    # what the method scored for this prompt once, before training (Method.prompt_baselines: RLPR's frozen r′)
    baseline: float | None = None
    # (run seed, step, the group's place in the step): keys a draw that must not depend on the text (random_reward)
    draw: tuple[int, ...] = ()


@dataclass
class GroupScore:
    """A method's verdict on one prompt's rollouts."""

    rewards: list[float]
    majority_answer: str | None
    extras: list[dict] | None = None  # one dict per rollout: the event's `extra`
    metrics: dict[str, float] = field(default_factory=dict)  # method-prefixed, averaged over groups by the trainer
    skip_training: bool = False  # e.g. RLPR's std filtering: the trainer leaves this group out of the update


BOXED_OPENER = "\\boxed{"  # where a final answer starts in the papers' boxed-answer format


def reasoning_prefix(text: str, opener: str = BOXED_OPENER) -> str:
    """z: the rollout up to where its final answer starts (after the last `opener`), or all of it plus `opener`."""
    index = text.rfind(opener)
    return text[: index + len(opener)] if index >= 0 else text + " " + opener
