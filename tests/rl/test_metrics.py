from itertools import combinations
from math import comb

import numpy as np
import pytest
from hypothesis import given, strategies as st

from rl.metrics import (group_summary, maj_at_k, majority_ratio, pass_at_k, similarity_mean,
                        unique_answers)


def brute_force_pass_at_k(n, c, k):
    correct = [True] * c + [False] * (n - c)
    subsets = list(combinations(range(n), k))
    return sum(any(correct[i] for i in s) for s in subsets) / len(subsets)


@given(st.integers(1, 8).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_matches_brute_force_enumeration(nck):
    n, c, k = nck
    assert pass_at_k(n, c, k) == pytest.approx(brute_force_pass_at_k(n, c, k), abs=1e-12)


def test_pass_at_k_is_stable_for_large_n():
    assert pass_at_k(1000, 1, 1) == pytest.approx(0.001)
    assert pass_at_k(1000, 10, 100) == pytest.approx(1 - comb(990, 100) / comb(1000, 100))


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


def test_maj_at_k_votes_over_the_first_k_answers():
    answers = ["1", "2", "2", "1", "1", "1"]
    assert maj_at_k(answers, "2", 3) == 1.0
    assert maj_at_k(answers, "2", 6) == 0.0


def test_majority_ratio_counts_invalid_answers_in_the_denominator():
    assert majority_ratio(["7", "7", "3", None]) == 0.5
    assert majority_ratio([None, None]) == 0.0


def test_unique_answers_ignores_none_and_spacing():
    assert unique_answers(["x+1", "x + 1", "2", None]) == 2


def test_similarity_mean_averages_the_off_diagonal():
    sim = np.array([[1.0, 0.2, 0.4], [0.2, 1.0, 0.6], [0.4, 0.6, 1.0]])
    assert similarity_mean(sim) == pytest.approx(0.4)
    assert similarity_mean([[1.0]]) is None


def test_group_summary_of_a_worked_group():
    # four rollouts: answers 2, 2, " 2", None and 3 -> in_majority marks the three 2s (the trainer's vote)
    rollouts = [
        {"answer": "2", "in_majority": True, "reward": 1.0},
        {"answer": " 2", "in_majority": True, "reward": 1.0},
        {"answer": None, "in_majority": False, "reward": 0.0},
        {"answer": "3", "in_majority": False, "reward": None},
        {"answer": "2", "in_majority": True, "reward": float("nan")},
    ]
    similarity = [[1, 0.5, 0.1, 0, 0], [0.5, 1, 0, 0, 0], [0.1, 0, 1, 0, 0], [0, 0, 0, 1, 0.4], [0, 0, 0, 0.4, 1]]
    summary = group_summary(rollouts, similarity)
    assert summary["size"] == 5
    assert summary["majority_ratio"] == pytest.approx(3 / 5)  # None counts in the denominator, as in majority_ratio()
    assert summary["unique_answers"] == 2  # "2" and " 2" are one answer; None is none
    assert summary["similarity_mean"] == pytest.approx(2 * (0.5 + 0.1 + 0.4) / 20)  # off-diagonal mean, G(G-1) = 20
    assert summary["reward_mean"] == pytest.approx(2 / 3)  # None and NaN are not rewards


def test_group_summary_of_an_empty_group_has_no_ratios():
    assert group_summary([], None) == {"size": 0, "majority_ratio": None, "unique_answers": None,
                                       "similarity_mean": None, "reward_mean": None}


# ---------------------------------------------------------------- reward accuracy (TTRL §4)


def test_reward_accuracy_counts_the_lucky_hits_of_a_wrong_majority():
    """Worked example (TTRL §4, "lucky hit"): label 5, answers 2, 2, 2, 3, 5, all trained; the vote picks 2.

    The majority reward credits the three 2s (wrong: the label would not) and denies the 5 (right: the label would
    credit it); it denies the 3, as the label would: 1 of 5 rewards agree although the pseudo-label is wrong.
    """
    from rl.metrics import LabelMonitor

    monitor = LabelMonitor({"p": "5"})
    values = monitor.group_metrics("p", ["2", "2", "2", "3", "5"], "2", trained=[True] * 5)
    assert values["label_accuracy"] == 0.0 and values["reward_accuracy"] == pytest.approx(0.2)
    # only the trained rollouts count; an unanswered rollout is credited by neither
    values = monitor.group_metrics("p", ["5", "5", None, "2"], "5", trained=[True, True, True, False])
    assert values["reward_accuracy"] == 1.0
    assert "reward_accuracy" not in monitor.group_metrics("p", ["5"], "5")  # a reward that is not a vote
