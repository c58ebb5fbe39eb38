"""Evaluation metrics (pass@k, maj@k) and the label-free health signals of
DESIGN §5 (majority_ratio, unique_answers, similarity/mean)."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rl.answers import answers_equal, majority_vote, normalize_answer


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct.

    # Codex (Chen et al. 2021) Eq. (1): pass@k = 1 − C(n−c, k) / C(n, k)
    Computed as a product so that large n does not overflow.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got n={n}, c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"need 1 <= k <= n, got n={n}, k={k}")
    if n - c < k:
        return 1.0  # every k-subset contains a correct sample
    # C(n−c, k)/C(n, k) = Π_{i=n−c+1}^{n} (1 − k/i)
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def _first_k(answers: Sequence[str | None], k: int) -> Sequence[str | None]:
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if len(answers) < k:
        raise ValueError(f"need at least k={k} answers, got {len(answers)}")
    return answers[:k]


def maj_at_k(answers: Sequence[str | None], label: str | None, k: int) -> float:
    """1.0 when the majority vote over the first k answers equals the label, else 0.0."""
    majority = majority_vote(_first_k(answers, k))
    return 1.0 if majority is not None and answers_equal(majority, label) else 0.0


def majority_ratio(answers: Sequence[str | None], majority: str | None = None) -> float:
    """Share of all answers (None included in the count) equivalent to the majority answer.

    1.0 means the group has collapsed onto one answer. 0.0 for an empty group or when
    every answer is None.
    """
    if not answers:
        return 0.0
    if majority is None:
        majority = majority_vote(answers)
    if majority is None:
        return 0.0
    return sum(answers_equal(answer, majority) for answer in answers) / len(answers)


def unique_answers(answers: Sequence[str | None]) -> int:
    """Number of distinct non-None answers (compared as normalised strings)."""
    return len({normalize_answer(answer) for answer in answers if answer is not None})


def similarity_mean(similarity: np.ndarray | Sequence[Sequence[float]] | None) -> float | None:
    """Mean off-diagonal entry of a G×G similarity matrix; None when G < 2 or no matrix."""
    if similarity is None:
        return None
    matrix = np.asarray(similarity, dtype=np.float64)
    g = matrix.shape[0]
    if g < 2:
        return None
    off_diagonal = matrix.sum() - np.trace(matrix)
    return float(off_diagonal / (g * (g - 1)))


def group_summary(rollouts: Sequence[dict], similarity=None) -> dict:
    """One group's health from its logged rollouts (the `group` event), what a prompt's history
    shows per step: `size`; `majority_ratio`, the share of rollouts the trainer marked
    `in_majority` (it compared them with math-verify, as majority_ratio() does, so the share is that
    function's value without comparing again); `unique_answers` (unique_answers()); `similarity_mean`
    (similarity_mean() of the G×G matrix); `reward_mean`, the mean of the rewards that are numbers."""
    size = len(rollouts)
    rewards = [r["reward"] for r in rollouts
               if isinstance(r.get("reward"), (int, float)) and not isinstance(r.get("reward"), bool)
               and np.isfinite(r["reward"])]
    return {
        "size": size,
        "majority_ratio": sum(bool(r.get("in_majority")) for r in rollouts) / size if size else None,
        "unique_answers": unique_answers([None if r.get("answer") is None else str(r["answer"]) for r in rollouts])
        if size else None,
        "similarity_mean": similarity_mean(similarity) if isinstance(similarity, list) and similarity else None,
        "reward_mean": float(np.mean(rewards)) if rewards else None,
    }


class LabelMonitor:
    """Held-out labels by prompt id, used only for the monitoring metrics of DESIGN section 5."""

    def __init__(self, labels: dict[str, str]):
        self._labels = {k: v for k, v in labels.items() if v is not None}

    def __bool__(self) -> bool:
        return bool(self._labels)

    def group_metrics(self, prompt_id: str, answers: Sequence[str | None], majority: str | None,
                      trained: Sequence[bool] | None = None) -> dict | None:
        """label_accuracy, pass@1 and, with at least 16 votes, maj@16 and pass@16; None when unlabelled.

        `trained` (which rollouts the update uses), given for a method whose reward credits agreeing with the
        vote, adds reward_accuracy.
        """
        label = self._labels.get(prompt_id)
        if label is None:
            return None
        n = len(answers)
        right = [a is not None and answers_equal(a, label) for a in answers]
        correct = sum(right)
        values = {
            "label_accuracy": float(majority is not None and answers_equal(majority, label)),
            "pass@1": pass_at_k(n, correct, 1),
        }
        if trained is not None and any(trained):
            # TTRL §4 reward accuracy: the share of trained rollouts whose majority reward (credited when in the
            # majority) agrees with the label's (credited when right); above label_accuracy: the "lucky hits"
            credited = [a is not None and majority is not None and answers_equal(a, majority) for a in answers]
            agree = [c == r for c, r, t in zip(credited, right, trained) if t]
            values["reward_accuracy"] = sum(agree) / len(agree)
        if n >= 16:  # fewer votes cannot estimate them; the names promise 16 samples
            values["maj@16"] = maj_at_k(answers, label, 16)
            values["pass@16"] = pass_at_k(n, correct, 16)
        return values



# --- the health figures ingestion derives from a step's rollouts, for every method (docs/teams-and-alerts.md) ---


def step_health(rollouts: Sequence[tuple], max_completion_length: int | None = None) -> dict[str, float]:
    """`invalid_ratio` (no valid answer), `truncated_ratio` (length at max_completion_length, when it is known) and
    `zero_variance_groups` (prompts whose trained rollouts all got one reward: GRPO's advantages are zero and the
    step teaches nothing) of one step's rollouts, each given as (group, valid, length, reward, trained)."""
    if not rollouts:
        return {}
    derived = {"invalid_ratio": sum(not valid for _, valid, _, _, _ in rollouts) / len(rollouts)}
    if isinstance(max_completion_length, int) and max_completion_length > 0:
        derived["truncated_ratio"] = sum((length or 0) >= max_completion_length
                                         for _, _, length, _, _ in rollouts) / len(rollouts)
    rewards: dict = {}
    for group, _, _, reward, trained in rollouts:
        if trained and reward is not None:
            rewards.setdefault(group, []).append(reward)
    if rewards:
        flat = sum(1 for values in rewards.values() if max(values) - min(values) < 1e-9)
        derived["zero_variance_groups"] = flat / len(rewards)
    return derived


def majority_changes(groups: Sequence[dict], previous: dict[str, str | None],
                     labels: dict[str, str] | None = None) -> dict[str, float]:
    """How the step's prompts' majority answers moved since each was last seen (`previous`: prompt id -> its
    majority answer then), the signals that see a collapse coming (docs/teams-and-alerts.md):
    `majority_flip_rate`, the share of the revisited prompts whose majority answer changed; and, where held-out
    labels exist, `correct_to_wrong`, the share of the revisited labelled prompts whose majority was right and is
    now wrong (TTRL-Guard's "correct-answer extinction"). Empty when no prompt of the step was seen before."""
    revisited = [g for g in groups if g["prompt_id"] in previous]
    if not revisited:
        return {}

    def same(a, b):
        return a == b or (a is not None and b is not None and answers_equal(a, b))

    out = {"majority_flip_rate": sum(not same(g["majority_answer"], previous[g["prompt_id"]])
                                     for g in revisited) / len(revisited)}
    labelled = [g for g in revisited if labels and labels.get(g["prompt_id"]) is not None]
    if labelled:
        def right(answer, prompt_id):
            return answer is not None and answers_equal(answer, labels[prompt_id])

        lost = sum(right(previous[g["prompt_id"]], g["prompt_id"]) and not right(g["majority_answer"], g["prompt_id"])
                   for g in labelled)
        out["correct_to_wrong"] = lost / len(labelled)
    return out
