import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rl.rewards.evolrl import evol_rl_answer, evol_rl_rewards, novelty_scores


def test_a_worked_example_matches_the_hand_computation():
    # cos(e0, e1) = 0.6, cos(e0, e2) = 0, cos(e1, e2) = 0.8; "1" is the majority {0, 1}, "2" a lone minority.
    embeddings = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [5.0, 5.0]])
    scores = novelty_scores(["1", "1", "2", None], embeddings, alpha=0.5)
    assert scores.mean_similarity[:3] == pytest.approx([0.6, 0.6, 0.4])  # the lone minority falls back to all others
    assert scores.max_similarity[:3] == pytest.approx([0.6, 0.8, 0.8])
    assert scores.raw[:3] == pytest.approx([0.4, 0.3, 0.4])  # u = 1 − (½ s̄ + ½ m)
    assert scores.normalized[:3] == pytest.approx([1.0, 0.0, 1.0])
    assert scores.raw[3] is None and scores.in_majority == [True, True, False, None]
    rewards = evol_rl_rewards(["1", "1", "2", None], embeddings)
    assert rewards == pytest.approx([1.0, 0.5, -0.5, -1.0])


def test_invalid_responses_get_minus_one_and_their_rows_are_ignored():
    valid_rows = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    with_garbage = np.vstack([valid_rows, [[np.nan, np.nan]]])
    answers = ["1", "1", "2", None]
    assert evol_rl_rewards(answers, with_garbage) == pytest.approx(evol_rl_rewards(answers[:3], valid_rows) + [-1.0])


def test_every_response_invalid_gives_minus_one_everywhere():
    assert evol_rl_rewards([None, None, None], np.zeros((3, 4))) == [-1.0, -1.0, -1.0]


def test_a_lone_valid_response_has_similarity_one_half_and_gets_one():
    scores = novelty_scores([None, "7", None], np.eye(3))
    assert scores.mean_similarity[1] == scores.max_similarity[1] == 0.5
    assert scores.raw[1] == pytest.approx(0.5)
    assert evol_rl_rewards([None, "7", None], np.eye(3)) == [-1.0, 1.0, -1.0]


def test_a_group_with_equal_scores_gets_three_quarters():
    same = np.array([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 2)
    rewards = evol_rl_rewards(["5", "5", "5", "6", "6"], same)
    assert rewards == pytest.approx([0.75, 0.75, 0.75, -0.75, -0.75])


def test_a_single_member_majority_gets_one_and_a_single_member_minority_minus_one_half():
    # "3" and "4" tie at one vote each; the first seen wins.
    rewards = evol_rl_rewards(["3", "4"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    assert rewards == [1.0, -0.5]


def test_negative_cosine_similarity_is_clipped_to_zero():
    scores = novelty_scores(["1", "1"], np.array([[1.0, 0.0], [-1.0, 0.0]]))
    assert scores.max_similarity == [0.0, 0.0]
    assert np.nanmin(scores.similarity) == 0.0


def test_the_mean_is_over_the_own_group_and_the_max_over_everyone():
    # 0 and 1 are majority peers at 0.6; 2 (minority) is a near-duplicate of 1.
    embeddings = np.array([[1.0, 0.0, 0.0], [0.6, 0.8, 0.0], [0.6, 0.8, 0.0], [0.0, 0.0, 1.0]])
    scores = novelty_scores(["1", "1", "2", "2"], embeddings)
    assert scores.mean_similarity[1] == pytest.approx(0.6)
    assert scores.max_similarity[1] == pytest.approx(1.0)


def test_a_majority_voted_over_more_rollouts_can_be_passed_in():
    rewards = evol_rl_rewards(["1", "2"], np.eye(2), majority="2")
    assert rewards == [-0.5, 1.0]


def test_without_novelty_the_reward_falls_back_to_ttrl():
    # EVOL-RL Table 4 "−Novelty Reward": the novelty-aware reward is removed, TTRL's 1/0 majority reward remains
    assert evol_rl_rewards(["1", "1", "2", None], np.eye(4), use_novelty=False) == [1.0, 1.0, 0.0, 0.0]


def test_a_valid_answer_needs_a_box_with_a_digit():
    assert evol_rl_answer(r"so \boxed{12}") == "12"
    assert evol_rl_answer(r"so \boxed{x}") is None
    assert evol_rl_answer("no box 12") is None


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(["1", "2", "3", None]), min_size=1, max_size=12).flatmap(
        lambda answers: st.tuples(
            st.just(answers),
            st.lists(st.lists(st.floats(-1, 1), min_size=3, max_size=3), min_size=len(answers), max_size=len(answers)),
            st.floats(0, 1),
        )
    )
)
def test_every_majority_reward_is_above_every_minority_reward(case):
    answers, embeddings, alpha = case
    rewards = evol_rl_rewards(answers, np.array(embeddings), alpha=alpha)
    scores = novelty_scores(answers, np.array(embeddings), alpha=alpha)
    majority = [r for r, m in zip(rewards, scores.in_majority) if m is True]
    minority = [r for r, m in zip(rewards, scores.in_majority) if m is False]
    invalid = [r for r, m in zip(rewards, scores.in_majority) if m is None]
    assert all(0.5 <= r <= 1.0 for r in majority)
    assert all(-1.0 <= r <= -0.5 for r in minority)
    assert all(r == -1.0 for r in invalid)
    if majority and minority:
        assert min(majority) > max(minority)
