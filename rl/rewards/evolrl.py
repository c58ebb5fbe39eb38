"""EVOL-RL: majority selects, semantic novelty varies (DESIGN §6 fixes the edge cases).

Rewards live in non-overlapping bands: majority [0.5, 1], minority [−1, −0.5],
invalid −1, so every majority response beats every minority response and novelty
only re-ranks within a band.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rl.answers import answers_equal, extract_boxed, majority_vote
from rl.rewards.ttrl import ttrl_rewards
from rl.similarity import cosine_similarity_matrix

# EVOL-RL App. C.5: ε_norm in the min–max normalisation
EPS_NORM = 1e-8
LONE_RESPONSE_SIMILARITY = 0.5  # DESIGN §6: a lone valid response has similarity 0.5
EQUAL_SCORES_NOVELTY = 0.5  # normalised novelty of a group whose raw scores are all equal (→ ±0.75)
SINGLE_MEMBER_NOVELTY = 1.0  # → 1.0 for a lone majority response, −0.5 for a lone minority one
INVALID_REWARD = -1.0

_DIGIT = re.compile(r"\d")


def evol_rl_answer(completion: str) -> str | None:
    """The voting answer of a completion, or None when it is invalid.

    # EVOL-RL App. C.4: valid only if the last \\boxed{} exists and contains a digit
    """
    answer = extract_boxed(completion)
    if answer is None or not _DIGIT.search(answer):
        return None
    return answer


@dataclass(frozen=True)
class NoveltyScores:
    """Per-response diagnostics (None for invalid responses), for rewards and the dashboard."""

    in_majority: list[bool | None]
    mean_similarity: list[float | None]  # s̄_i: mean over the other members of its own group
    max_similarity: list[float | None]  # m_i: max over all other valid responses
    raw: list[float | None]  # u_i
    normalized: list[float | None]  # ũ_i, min–max within its group
    similarity: np.ndarray  # G×G cosine similarity clipped to [0, 1]; NaN where a response is invalid
    majority: str | None


def novelty_scores(
    answers: Sequence[str | None],
    embeddings: np.ndarray | Sequence[Sequence[float]],
    alpha: float = 0.5,
    majority: str | None = None,
) -> NoveltyScores:
    """Raw and group-normalised novelty of every valid response.

    ``answers[i]`` is None for an invalid response; ``embeddings`` is G×d and the rows of
    invalid responses are ignored. ``majority`` may be passed when it was voted over more
    rollouts than are scored here.
    """
    size = len(answers)
    vectors = np.asarray(embeddings, dtype=np.float64).reshape(size, -1) if size else np.zeros((0, 1))
    valid = np.array([answer is not None for answer in answers], dtype=bool)
    if majority is None:
        majority = majority_vote(answers)
    in_majority = np.array([answer is not None and answers_equal(answer, majority) for answer in answers], dtype=bool)

    similarity = np.full((size, size), np.nan)
    mean_sim = np.full(size, np.nan)
    max_sim = np.full(size, np.nan)
    valid_index = np.flatnonzero(valid)
    n_valid = valid_index.size
    if n_valid == 1:
        mean_sim[valid_index] = max_sim[valid_index] = LONE_RESPONSE_SIMILARITY
        similarity[valid_index, valid_index] = 1.0
    elif n_valid > 1:
        # EVOL-RL App. C.5: S = V Vᵀ on L2-normalised embeddings; clipped to [0, 1] as in the released code
        sub = np.clip(cosine_similarity_matrix(vectors[valid_index]), 0.0, 1.0)
        similarity[np.ix_(valid_index, valid_index)] = sub
        others = ~np.eye(n_valid, dtype=bool)
        # m_i: max similarity to any other valid response
        max_sim[valid_index] = np.where(others, sub, -np.inf).max(axis=1)
        sub_majority = in_majority[valid_index]
        for members in (sub_majority, ~sub_majority):
            count = int(members.sum())
            if count == 0:
                continue
            rows = np.flatnonzero(members)
            if count == 1:
                # a one-member group has no peers: fall back to the mean over all other valid responses
                peers = others[rows]
                mean_sim[valid_index[rows]] = (sub[rows] * peers).sum(axis=1) / (n_valid - 1)
            else:
                block = sub[np.ix_(rows, rows)]
                mean_sim[valid_index[rows]] = (block.sum(axis=1) - np.diag(block)) / (count - 1)

    # EVOL-RL §3 (B.2): u_i = 1 − (α·s̄_i + (1 − α)·m_i)
    raw = 1.0 - (alpha * mean_sim + (1.0 - alpha) * max_sim)
    normalized = np.full(size, np.nan)
    for members in (valid & in_majority, valid & ~in_majority):
        normalized[members] = _min_max_within_group(raw[members])

    def as_list(values: np.ndarray) -> list[float | None]:
        return [float(v) if ok else None for v, ok in zip(values, valid)]

    return NoveltyScores(
        in_majority=[bool(m) if ok else None for m, ok in zip(in_majority, valid)],
        mean_similarity=as_list(mean_sim),
        max_similarity=as_list(max_sim),
        raw=as_list(raw),
        normalized=as_list(normalized),
        similarity=similarity,
        majority=majority,
    )


def _min_max_within_group(raw: np.ndarray) -> np.ndarray:
    """ũ = (u − min u) / (max u − min u + ε_norm)  # EVOL-RL App. C.5

    DESIGN §6 edge cases: a one-member group gets 1, a group of equal scores 0.5.
    """
    if raw.size == 0:
        return raw
    if raw.size == 1:
        return np.array([SINGLE_MEMBER_NOVELTY])
    spread = raw.max() - raw.min()
    if spread < EPS_NORM:
        return np.full(raw.shape, EQUAL_SCORES_NOVELTY)
    return (raw - raw.min()) / (spread + EPS_NORM)


def evol_rl_rewards(
    answers: Sequence[str | None],
    embeddings: np.ndarray | Sequence[Sequence[float]],
    alpha: float = 0.5,
    majority: str | None = None,
    use_novelty: bool = True,
) -> list[float]:
    """EVOL-RL reward of each response.

    # EVOL-RL §3 (B.2) reward mapping: −1 invalid; 0.5 + 0.5ũ majority; −1 + 0.5ũ minority
    With ``use_novelty=False`` (the "−Novelty Reward" ablation of EVOL-RL Table 4) the
    novelty-aware reward is removed and TTRL's reward remains: 1 for the majority answer, else 0.
    """
    if not use_novelty:
        return ttrl_rewards(answers, majority)
    scores = novelty_scores(answers, embeddings, alpha=alpha, majority=majority)
    rewards = []
    for in_majority, novelty in zip(scores.in_majority, scores.normalized):
        if in_majority is None:
            rewards.append(INVALID_REWARD)
        elif in_majority:
            rewards.append(0.5 + 0.5 * novelty)
        else:
            rewards.append(-1.0 + 0.5 * novelty)
    return rewards
