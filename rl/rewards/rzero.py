"""R-Zero challenger rewards: uncertainty of the solver minus a BLEU repetition penalty."""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from rl.answers import answers_equal, majority_vote
from rl.similarity import bleu_distance_matrix

_QUESTION = re.compile(r"<question>(.*?)</question>", re.DOTALL)


def extract_question(text: str | None) -> str | None:
    """The last ``<question>…</question>`` block, stripped; None when absent or empty (format check)."""
    if not text:
        return None
    blocks = _QUESTION.findall(text)
    if not blocks:
        return None
    question = blocks[-1].strip()
    return question or None


def solver_agreement(solver_answers: Sequence[str | None]) -> float:
    """p̂ = share of all m answers equal to their majority; None counts in m, never as the majority.

    # R-Zero §2.2: p̂(x; S_φ) = (1/m) Σ_j 1{y_j = ỹ(x)}
    """
    m = len(solver_answers)
    if m == 0:
        return 0.0
    majority = majority_vote(solver_answers)
    if majority is None:
        return 0.0
    return sum(answers_equal(answer, majority) for answer in solver_answers) / m


def uncertainty_reward(solver_answers: Sequence[str | None]) -> float:
    """r_uncertainty = 1 − 2|p̂ − ½|.  # R-Zero §2.2 (uncertainty reward)"""
    return 1.0 - 2.0 * abs(solver_agreement(solver_answers) - 0.5)


def bleu_clusters(questions: Sequence[str], threshold: float = 0.5) -> np.ndarray:
    """Cluster label of each question: agglomerative clustering, average linkage, on 1 − BLEU.

    # R-Zero App. B.4: precomputed BLEU distances, average linkage, distance threshold τ_BLEU
    """
    if len(questions) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(questions) == 1:
        return np.zeros(1, dtype=np.int64)
    from sklearn.cluster import AgglomerativeClustering

    clustering = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=threshold
    )
    return clustering.fit_predict(bleu_distance_matrix(questions))


def repetition_penalties(questions: Sequence[str], threshold: float = 0.5, lam: float = 1.0) -> list[float]:
    """r_rep(x_i) = λ·|C_k|/B for the cluster C_k holding x_i.  # R-Zero §2.2 (repetition penalty)"""
    labels = bleu_clusters(questions, threshold)
    if labels.size == 0:
        return []
    sizes = np.bincount(labels)
    return [float(lam * sizes[label] / labels.size) for label in labels]


def challenger_rewards(
    questions: Sequence[str | None],
    solver_answers: Sequence[Sequence[str | None]],
    threshold: float = 0.5,
    lam: float = 1.0,
) -> list[float]:
    """r_i = max(0, r_uncertainty − r_rep) for a well-formed question, 0 for a format failure.

    # R-Zero §2.2 (composite reward); the penalty's B is the number of valid questions
    ``questions[i]`` is None when the challenger's output failed the format check;
    ``solver_answers[i]`` are the m solver answers to question i (ignored when None).
    """
    if len(questions) != len(solver_answers):
        raise ValueError(f"{len(questions)} questions but {len(solver_answers)} answer lists")
    valid = [i for i, question in enumerate(questions) if question is not None]
    penalties = repetition_penalties([questions[i] for i in valid], threshold, lam)
    rewards = [0.0] * len(questions)
    for i, penalty in zip(valid, penalties):
        rewards[i] = max(0.0, uncertainty_reward(solver_answers[i]) - penalty)
    return rewards


def keep_for_solver(solver_answers: Sequence[str | None], low: int = 3, high: int = 7) -> bool:
    """Whether the question goes to the solver: low ≤ #answers matching the majority ≤ high.

    # R-Zero §2.3 / §3: keep when 3..7 of the m = 10 answers agree (|p̂ − ½| ≤ δ = 0.25)
    """
    majority = majority_vote(solver_answers)
    if majority is None:
        return False
    agreeing = sum(answers_equal(answer, majority) for answer in solver_answers)
    return low <= agreeing <= high
