import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rl.answers import majority_vote
from rl.rewards.compass import (
    compass_rewards,
    confidence_weighted_vote,
    dcar,
    dcar_rewards,
    decisive_path_reward,
    trajectory_confidence,
)

# COMPASS Figure 5 (AIME 2024, ground truth 116): responses #2, #7 answer 32; #12, #15 answer 116.
CASE_ANSWERS = ["32", "32", "116", "116"]
CASE_CONFIDENCES = [0.8327, 0.7848, 0.8262, 0.7973]


def test_it_breaks_a_tie_by_confidence():
    assert majority_vote(CASE_ANSWERS) == "32"  # TTRL's plain vote picks the first of the tie
    label, scores = confidence_weighted_vote(CASE_ANSWERS, CASE_CONFIDENCES)
    assert label == "116"
    assert scores["116"] == pytest.approx(1.6235) and scores["32"] == pytest.approx(1.6175)


def test_agreeing_answers_get_the_credibility():
    result = dcar(CASE_ANSWERS, CASE_CONFIDENCES)
    credibility = 0.8262 / 0.8327  # C_general (best "116") / C_elite (best overall, a "32")
    assert result.credibility == pytest.approx(credibility)
    assert dcar_rewards(CASE_ANSWERS, CASE_CONFIDENCES) == pytest.approx([0.0, 0.0, credibility, credibility])


def test_credibility_is_one_when_the_most_confident_response_agrees():
    assert dcar_rewards(["5", "5", "6"], [0.9, 0.5, 0.8]) == pytest.approx([1.0, 1.0, 0.0])


def test_none_answers_do_not_vote_and_get_zero():
    assert dcar_rewards([None, "4", "4", "9"], [0.5, 0.6, 0.5, 0.55]) == pytest.approx([0.0, 1.0, 1.0, 0.0])
    assert dcar_rewards([None, None], [0.5, 0.5]) == [0.0, 0.0]


def test_the_elite_confidence_is_the_max_over_all_n_candidates():
    """COMPASS Eq. (7) / Algorithm 1: C_Elite = max_{i=1..N} C(ŷ_i), every candidate, answered or not.

    Worked example: answers [None, 4, 4, 9], confidences [0.99, 0.6, 0.5, 0.55]. The vote gives y* = 4
    (1.1 against 0.55); C_General = max(0.6, 0.5) = 0.6; C_Elite = 0.99 (the candidate without an answer)
    → credibility = 0.6 / 0.99, and the two 4s get it. Over the answered candidates alone C_Elite was 0.6
    and the credibility 1.
    """
    result = dcar([None, "4", "4", "9"], [0.99, 0.6, 0.5, 0.55])
    assert result.pseudo_label == "4"
    assert result.credibility == pytest.approx(0.6 / 0.99)
    assert result.rewards == pytest.approx([0.0, 0.6 / 0.99, 0.6 / 0.99, 0.0])


def test_the_ablations_fall_back_to_majority_vote_and_binary_reward():
    assert dcar(CASE_ANSWERS, CASE_CONFIDENCES, use_confidence_weighting=False).pseudo_label == "32"
    assert dcar(CASE_ANSWERS, CASE_CONFIDENCES, use_credibility=False).rewards == [0.0, 0.0, 1.0, 1.0]


def test_confidence_is_exp_of_minus_the_population_std():
    # differences 0.8, 0.3, 0.7: mean 0.6, population variance 0.14 / 3
    assert trajectory_confidence([0.9, 0.6, 0.8], [0.1, 0.3, 0.1]) == pytest.approx(math.exp(-math.sqrt(0.14 / 3)))
    assert trajectory_confidence([0.7, 0.7], [0.2, 0.2]) == 1.0
    assert trajectory_confidence([], []) == 1.0


def test_decisive_path_reward_weights_decisiveness_by_softmax_entropy():
    # weights softmax([0, ln 3]) = [1/4, 3/4]; decisiveness [0.85, 0.1]
    assert decisive_path_reward([0.9, 0.5], [0.05, 0.4], [0.0, math.log(3)]) == pytest.approx(0.2875)
    assert decisive_path_reward([], [], []) == 0.0


def test_decisive_path_reward_is_stable_for_large_entropies():
    assert decisive_path_reward([0.9, 0.5], [0.05, 0.4], [1000.0, 1000.0 + math.log(3)]) == pytest.approx(0.2875)


def test_compass_adds_dcar_and_dpr():
    top1s = [[0.9, 0.6, 0.8], [0.9, 0.5], [0.7, 0.7]]
    top2s = [[0.1, 0.3, 0.1], [0.05, 0.4], [0.2, 0.2]]
    entropies = [[0.1, 0.2, 0.3], [0.0, math.log(3)], [0.5, 0.5]]
    answers = ["1", "2", "1"]
    confidences = [trajectory_confidence(a, b) for a, b in zip(top1s, top2s)]
    dpr = [decisive_path_reward(a, b, h) for a, b, h in zip(top1s, top2s, entropies)]
    expected = [d + p for d, p in zip(dcar_rewards(answers, confidences), dpr)]
    assert compass_rewards(answers, top1s, top2s, entropies) == pytest.approx(expected)
    assert compass_rewards(answers, top1s, top2s, entropies, use_dpr=False) == pytest.approx(dcar_rewards(answers, confidences))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["1", "2", "3", None]), st.floats(0.01, 1.0)), min_size=1, max_size=10))
def test_dcar_rewards_are_in_zero_one_and_equal_within_the_pseudo_label(pairs):
    answers, confidences = zip(*pairs)
    result = dcar(list(answers), list(confidences))
    assert all(0.0 <= r <= 1.0 for r in result.rewards)
    assert len({r for r in result.rewards if r > 0}) <= 1
    if result.pseudo_label is not None:
        assert 0.0 < result.credibility <= 1.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 10)), min_size=1, max_size=20))
def test_dpr_is_a_weighted_mean_of_decisiveness(steps):
    top1, top2, entropy = map(np.array, zip(*steps))
    reward = decisive_path_reward(top1, top2, entropy)
    diff = top1 - top2
    assert diff.min() - 1e-12 <= reward <= diff.max() + 1e-12
