"""Baseline rewards: entropy minimisation (token and sequence), self-consistency, supervised RLVR."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rl.answers import answers_equal, normalize_answer

EM_AGGREGATIONS = ("sum", "mean")


def _aggregate(values: Sequence[float] | np.ndarray, aggregation: str) -> float:
    if aggregation not in EM_AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {EM_AGGREGATIONS}, got {aggregation!r}")
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return 0.0
    return float(values.sum() if aggregation == "sum" else values.mean())


def em_token_reward(token_entropies: Sequence[float] | np.ndarray, aggregation: str = "sum") -> float:
    """− the summed token entropy of the rollout (or, with aggregation="mean", the mean); 0 for no tokens.

    # Agarwal et al. 2025 (arXiv 2505.15134), EM-RL-token reward: r(y) = −Σ_t H(π_θ(·|x, y_<t))
    """
    return -_aggregate(token_entropies, aggregation)


def em_sequence_reward(token_logprobs: Sequence[float] | np.ndarray, aggregation: str = "sum") -> float:
    """The sequence log-probability of the rollout (or, with aggregation="mean", per token); 0 for no tokens.

    # Agarwal et al. 2025 (arXiv 2505.15134), EM-RL-sequence reward: r(y) = log π_θ(y|x) = Σ_t log π_θ(y_t|x, y_<t)
    """
    return _aggregate(token_logprobs, aggregation)


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
