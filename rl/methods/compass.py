"""COMPASS: a confidence-weighted vote with credibility (DCAR) plus the decisiveness of the path (DPR).

Per-token inputs come from the policy probe (rl.probes.token_statistics): ``top1``/``top2`` are the probabilities of
the two most likely tokens at each generated position, ``entropy`` the entropy of the predictive distribution there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rl.answers import answers_equal, normalize_answer
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, bool_param, shared


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


def score(group: Group, hp: dict, probe) -> GroupScore:
    stats = probe.token_statistics(group)
    confidences = [trajectory_confidence(s.top1, s.top2) for s in stats]  # COMPASS Eq. (2)–(3)
    verdict = dcar(group.answers, confidences, hp["use_confidence_weighting"], hp["use_credibility"])
    # COMPASS Eq. (10)–(12): entropy-weighted decisiveness of the path
    decisiveness = [decisive_path_reward(s.top1, s.top2, s.entropy) for s in stats]
    # COMPASS Eq. (1): R = R_outcome (DCAR) + R_process (DPR)
    rewards = [o + (d if hp["use_dpr"] else 0.0) for o, d in zip(verdict.rewards, decisiveness)]
    extras = [{"confidence": c, "decisiveness": d, "credibility": verdict.credibility}
              for c, d in zip(confidences, decisiveness)]
    metrics = {"compass/credibility_mean": verdict.credibility, "compass/confidence_mean": float(np.mean(confidences)),
               "compass/decisiveness_mean": float(np.mean(decisiveness))}
    return GroupScore(rewards=rewards, majority_answer=verdict.pseudo_label, extras=extras, metrics=metrics)


METHOD = Method(
    name="compass",
    title="COMPASS",
    paper="Rewarding the Journey, Not Just the Destination: A Composite Path and Answer Self-Scoring Reward "
          "Mechanism (COMPASS)",
    label_free=True,
    description="Confidence-weighted vote with credibility (DCAR) plus entropy-weighted decisiveness of the path (DPR).",
    defaults_source="COMPASS §4.1: GRPO, lr 5e-7 cosine (AdamW), 64 responses for the vote at temperature 0.6 "
                    "(1.0 for Qwen2.5-Math), 32 trained; below 7B the settings of the TTRL paper (the shared "
                    "defaults: 8 prompts a step, 3,072 tokens) with its script's token means over micro-batches of "
                    "rollouts: loss_type 'grpo'.",
    hyperparameters=shared(temperature=0.6, loss_type="grpo") + (
        bool_param("use_confidence_weighting", True, "Ablation: with false the pseudo-label is a plain majority vote."),
        bool_param("use_credibility", True, "Ablation: with false agreeing answers get 1 instead of the credibility."),
        bool_param("use_dpr", True, "Ablation: with false the Decisive Path Reward is left out."),
    ),
    scorer=score,
    rewards_the_vote=True,  # reward_accuracy (TTRL §4) is charted with labels
    metric_prefix="compass",
    charts=("similarity/mean", "compass/credibility_mean"),
    search_extras=("confidence", "credibility"),
)
