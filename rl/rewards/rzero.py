"""R-Zero's rewards: the challenger's (uncertainty of the solver minus a BLEU repetition penalty, over the
whole batch of the step) and the solver's (agreement with the question's pseudo-label).

`score_challenger_batch` and `score_solver_group` are what the two GRPO phases give
LabelFreeGRPOTrainer (rl/rzero.py): the first as its batch scorer, the second as a group scorer.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from rl.answers import answers_equal, majority_vote
from rl.groups import Group, GroupScore
from rl.rewards.ttrl import ttrl_rewards
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


def repetition_penalties(questions: Sequence[str], threshold: float = 0.5, lam: float = 1.0,
                         batch_size: int | None = None) -> list[float]:
    """r_rep(x_i) = λ·|C_k|/B for the cluster C_k holding x_i, the clusters formed over `questions`.

    B is `batch_size`: every question of the step's batch, format failures included (R-Zero App. B.4: "B is
    the total number of questions in the batch"); `questions` alone when not given.
    """
    labels = bleu_clusters(questions, threshold)
    if labels.size == 0:
        return []
    sizes = np.bincount(labels)
    b = labels.size if batch_size is None else batch_size
    if b < labels.size:
        raise ValueError(f"a batch of {b} cannot hold {labels.size} questions")
    return [float(lam * sizes[label] / b) for label in labels]  # R-Zero §2.2: r_rep(x_i) = λ|C_k|/B


def challenger_rewards(
    questions: Sequence[str | None],
    solver_answers: Sequence[Sequence[str | None]],
    threshold: float = 0.5,
    lam: float = 1.0,
) -> list[float]:
    """r_i = max(0, r_uncertainty − r_rep) for a well-formed question, 0 for a format failure.

    ``questions`` are all B outputs of the step; ``questions[i]`` is None when the output failed the format
    check (it is in B, in no cluster); ``solver_answers[i]`` are the m solver answers to question i (ignored
    when None).
    """
    return [reward for reward, _ in _challenger_terms(questions, solver_answers, threshold, lam)]


def _challenger_terms(questions, solver_answers, threshold, lam) -> list[tuple[float, float | None]]:
    """(r_i, r_rep(x_i)) per output; the penalty is None for a format failure."""
    if len(questions) != len(solver_answers):
        raise ValueError(f"{len(questions)} questions but {len(solver_answers)} answer lists")
    valid = [i for i, question in enumerate(questions) if question is not None]
    penalties = repetition_penalties([questions[i] for i in valid], threshold, lam, batch_size=len(questions))
    terms: list[tuple[float, float | None]] = [(0.0, None)] * len(questions)  # R-Zero §2.2: format failure → 0
    for i, penalty in zip(valid, penalties):
        # R-Zero §2.2 (composite reward): r_i = max(0, r_uncertainty(x_i; φ) − r_rep(x_i))
        terms[i] = (max(0.0, uncertainty_reward(solver_answers[i]) - penalty), penalty)
    return terms


def score_challenger_batch(groups: Sequence[Group], solver_answers: Sequence[Sequence[Sequence[str | None]]],
                           hp: dict) -> list[GroupScore]:
    """The challenger's GroupScores for one step: every question of every group is one of the batch's B.

    ``groups[k].answers`` are the extracted questions (None: format failure), ``solver_answers[k][j]`` the
    solver's m answers to question j of group k ([] for a format failure). The repetition penalty clusters all
    questions of the step together (a prompt's group is one p0 copy's challenger_rollouts questions; R-Zero
    penalises repeats across the whole batch). Each rollout's `extra` holds p̂, r_uncertainty, r_rep and the
    solver's majority answer; the metrics are the batch's, the same on every group, so that the trainer's mean
    over groups is the batch's value.
    """
    questions = [q for group in groups for q in group.answers]
    answers = [list(a) for per_group in solver_answers for a in per_group]
    terms = _challenger_terms(questions, answers, hp["bleu_threshold"], hp["repetition_weight"])
    valid = [i for i, q in enumerate(questions) if q is not None]
    extras = [{} if q is None else {"p_hat": solver_agreement(a), "uncertainty": uncertainty_reward(a),
                                    "repetition_penalty": penalty, "solver_majority": majority_vote(a)}
              for q, a, (_, penalty) in zip(questions, answers, terms)]
    metrics = {"rzero/format_rate": len(valid) / len(questions)} if questions else {}
    for name, key in (("rzero/uncertainty_mean", "uncertainty"), ("rzero/repetition_penalty_mean",
                                                                  "repetition_penalty"), ("rzero/p_hat_mean", "p_hat")):
        if valid:
            metrics[name] = sum(extras[i][key] for i in valid) / len(valid)
    scores, start = [], 0
    for group in groups:
        rows = slice(start, start + len(group.answers))
        scores.append(GroupScore(rewards=[reward for reward, _ in terms[rows]], majority_answer=None,
                                 extras=extras[rows], metrics=dict(metrics)))
        start += len(group.answers)
    return scores


def score_solver_group(group: Group, hp: dict, probe) -> GroupScore:
    """The solver's reward: r_j = 1 when its answer matches the question's pseudo-label ỹ_i, else 0.

    ỹ_i (``group.reference``) was voted over the solver's m answers in the questions phase and is not
    re-voted from these rollouts.
    """
    if group.reference is None:  # ttrl_rewards would vote one from the rollouts instead
        raise ValueError(f"question {group.prompt_id!r} has no pseudo-label")
    # R-Zero §2.4: r_j = 1 if x_j matches the pseudo-label ỹ_i, 0 otherwise
    return GroupScore(rewards=ttrl_rewards(group.answers, group.reference), majority_answer=group.reference)


def keep_for_solver(solver_answers: Sequence[str | None], low: int = 3, high: int = 7) -> bool:
    """Whether the question goes to the solver: low ≤ #answers matching the majority ≤ high.

    # R-Zero §2.3 / §3: keep when 3..7 of the m = 10 answers agree (|p̂ − ½| ≤ δ = 0.25)
    """
    majority = majority_vote(solver_answers)
    if majority is None:
        return False
    agreeing = sum(answers_equal(answer, majority) for answer in solver_answers)
    return low <= agreeing <= high
