"""Baseline rewards: RLPR, entropy minimisation (token and sequence), self-consistency, supervised RLVR."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from rl.answers import answers_equal, normalize_answer
from rl.rewards.darl import answer_probability


def rlpr_reward(model: Any, tokenizer: Any, prompt: str, reasoning: str, reference: str) -> float:
    """Mean token probability of the reference answer given the prompt and the sampled reasoning.

    # RLPR (as used by DARL Eq. (5)): r = (1/|y*|) Σ_i p_θ(y*_i | x, z, y*_<i)
    """
    return answer_probability(model, tokenizer, prompt, reasoning, reference)


def em_token_reward(token_entropies: Sequence[float] | np.ndarray) -> float:
    """− mean token entropy of the rollout (EM-RL-Token, Agarwal et al. 2025); 0 for no tokens."""
    entropies = np.asarray(token_entropies, dtype=np.float64)
    return float(-entropies.mean()) if entropies.size else 0.0


def em_sequence_reward(token_logprobs: Sequence[float] | np.ndarray) -> float:
    """Mean token log-probability of the rollout (EM-RL-Sequence, Agarwal et al. 2025); 0 for no tokens."""
    logprobs = np.asarray(token_logprobs, dtype=np.float64)
    return float(logprobs.mean()) if logprobs.size else 0.0


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


def rlvr_rewards(answers: Sequence[str | None], label: str | None) -> list[float]:
    """1.0 when the answer is equivalent to the held-out label, else 0.0 (supervised: needs labels)."""
    if label is None:
        raise ValueError("rlvr needs a label for every prompt")
    return [1.0 if answers_equal(answer, label) else 0.0 for answer in answers]
