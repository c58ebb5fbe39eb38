"""COMPASS: Dual-Calibration Answer Reward (DCAR) + Decisive Path Reward (DPR).

Per-token inputs come from the sampler: ``top1``/``top2`` are the probabilities of the
two most likely tokens at each generated position, ``entropy`` the entropy of the
predictive distribution there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rl.answers import answers_equal, normalize_answer


def _as_vector(values: Sequence[float] | np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).reshape(-1)


def trajectory_confidence(top1: Sequence[float] | np.ndarray, top2: Sequence[float] | np.ndarray) -> float:
    """confidence = exp(−std_t(p1 − p2)), population std.  # COMPASS Eq. (2)–(3)

    An empty trajectory has no spread: confidence 1.
    """
    diff = _as_vector(top1) - _as_vector(top2)  # COMPASS Eq. (2): topk_diff
    if diff.size == 0:
        return 1.0
    return float(np.exp(-np.std(diff)))  # np.std is the population std (ddof=0)


@dataclass(frozen=True)
class DcarResult:
    rewards: list[float]
    pseudo_label: str | None
    credibility: float  # 0 when nobody voted
    scores: dict[str, float]  # confidence-weighted vote of each answer (normalised form → sum of confidences)


def confidence_weighted_vote(answers: Sequence[str | None], confidences: Sequence[float]) -> tuple[str | None, dict[str, float]]:
    """The answer with the largest sum of confidences; ties go to the answer seen first.

    # COMPASS Eq. (4)–(5): y* = argmax_y Σ_{i: ŷ_i = y} c_i (the common denominator does not change the argmax)
    Votes are grouped on normalised strings; the pseudo-label is returned as first written.
    """
    scores: dict[str, float] = {}
    first_form: dict[str, str] = {}
    for answer, confidence in zip(answers, confidences):
        if answer is None:
            continue
        key = normalize_answer(answer)
        scores[key] = scores.get(key, 0.0) + float(confidence)
        first_form.setdefault(key, answer)
    if not scores:
        return None, scores
    winner = max(scores, key=scores.__getitem__)  # first maximal key in insertion order
    return first_form[winner], scores


def dcar(
    answers: Sequence[str | None],
    confidences: Sequence[float],
    use_confidence_weighting: bool = True,
    use_credibility: bool = True,
) -> DcarResult:
    """DCAR with its diagnostics (pseudo-label, credibility, vote scores).

    None answers do not vote and get 0, but their confidence still counts towards C_Elite
    (Eq. (7) ranges over all N candidates). The ablation switches replace the weighted vote by
    a plain majority vote and the credibility by 1.
    """
    if len(answers) != len(confidences):
        raise ValueError(f"{len(answers)} answers but {len(confidences)} confidences")
    weights = list(confidences) if use_confidence_weighting else [1.0] * len(answers)
    pseudo_label, scores = confidence_weighted_vote(answers, weights)
    if pseudo_label is None:
        return DcarResult([0.0] * len(answers), None, 0.0, scores)
    agrees = [answers_equal(answer, pseudo_label) for answer in answers]
    c_general = max(c for c, agree in zip(confidences, agrees) if agree)  # COMPASS Eq. (6)
    c_elite = max(confidences)  # COMPASS Eq. (7) / Algorithm 1: max over all N candidates, answered or not
    credibility = float(c_general / c_elite) if use_credibility and c_elite > 0 else 1.0  # COMPASS Eq. (8)
    rewards = [credibility if agree else 0.0 for agree in agrees]  # COMPASS Eq. (9)
    return DcarResult(rewards, pseudo_label, credibility, scores)


def dcar_rewards(answers: Sequence[str | None], confidences: Sequence[float]) -> list[float]:
    """credibility for answers equal to the confidence-weighted pseudo-label, else 0.  # COMPASS Eq. (9)"""
    return dcar(answers, confidences).rewards


def decisive_path_reward(
    top1: Sequence[float] | np.ndarray, top2: Sequence[float] | np.ndarray, entropy: Sequence[float] | np.ndarray
) -> float:
    """Σ_t softmax(H)_t · (p1 − p2)_t.  # COMPASS Eq. (10)–(12)

    0 for an empty trajectory.
    """
    decisiveness = _as_vector(top1) - _as_vector(top2)  # COMPASS Eq. (10)
    entropy = _as_vector(entropy)
    if decisiveness.shape != entropy.shape:
        raise ValueError(f"top1/top2 have {decisiveness.size} tokens but entropy has {entropy.size}")
    if decisiveness.size == 0:
        return 0.0
    weights = np.exp(entropy - entropy.max())  # COMPASS Eq. (11), shifted for stability
    weights /= weights.sum()
    return float(weights @ decisiveness)  # COMPASS Eq. (12)


def compass_rewards(
    answers: Sequence[str | None],
    top1s: Sequence[Sequence[float]],
    top2s: Sequence[Sequence[float]],
    entropies: Sequence[Sequence[float]],
    use_confidence_weighting: bool = True,
    use_credibility: bool = True,
    use_dpr: bool = True,
) -> list[float]:
    """R(y_i) = R_outcome (DCAR) + R_process (DPR).  # COMPASS Eq. (1)"""
    confidences = [trajectory_confidence(t1, t2) for t1, t2 in zip(top1s, top2s)]
    outcome = dcar(answers, confidences, use_confidence_weighting, use_credibility).rewards
    if not use_dpr:
        return outcome
    process = [decisive_path_reward(t1, t2, h) for t1, t2, h in zip(top1s, top2s, entropies)]
    return [o + p for o, p in zip(outcome, process)]
