from itertools import combinations
from math import comb

import numpy as np
import pytest
from hypothesis import given, strategies as st

from rl.metrics import maj_at_k, majority_ratio, mean_at_k, pass_at_k, similarity_mean, unique_answers


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


def test_mean_at_k_is_the_share_of_correct_answers():
    assert mean_at_k(["1", "0.5", None, r"\frac12"], "1/2", 4) == 0.5


def test_majority_ratio_counts_invalid_answers_in_the_denominator():
    assert majority_ratio(["7", "7", "3", None]) == 0.5
    assert majority_ratio([None, None]) == 0.0


def test_unique_answers_ignores_none_and_spacing():
    assert unique_answers(["x+1", "x + 1", "2", None]) == 2


def test_similarity_mean_averages_the_off_diagonal():
    sim = np.array([[1.0, 0.2, 0.4], [0.2, 1.0, 0.6], [0.4, 0.6, 1.0]])
    assert similarity_mean(sim) == pytest.approx(0.4)
    assert similarity_mean([[1.0]]) is None


def test_a_healthy_run_raises_no_collapse_alert():
    from rl.metrics import detect_collapse

    assert detect_collapse([1.0] * 10, [0.6] * 10) == []
    assert detect_collapse([1.0, 0.0], [1.0]) == []  # too short to judge


def test_entropy_falling_to_a_tenth_raises_an_alert():
    from rl.metrics import detect_collapse

    alerts = detect_collapse([1.0] * 5 + [0.05] * 5, [0.5] * 10)
    assert len(alerts) == 1 and alerts[0].startswith("entropy collapse")


def test_unanimous_rollouts_raise_an_alert():
    from rl.metrics import detect_collapse

    alerts = detect_collapse([1.0] * 10, [0.7] * 5 + [1.0] * 5)
    assert len(alerts) == 1 and alerts[0].startswith("answer collapse")
