"""EVOL-RL (rl/methods/evol_rl.py): the reward bands and the novelty within them, through the method's scorer."""

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters
from rl.methods.evol_rl import evol_rl_answer, novelty_scores


def evol_group(answers, embeddings):
    """A group whose texts carry `answers` (None: no box, an invalid response) with the given embeddings."""
    texts = [f"so \\boxed{{{a}}}" if a is not None else "no answer" for a in answers]
    return Group(prompt_id="p", prompt="What is 2 + 3?", texts=texts, answers=[evol_rl_answer(t) for t in texts],
                 prompt_ids=[5, 6, 7], completion_ids=[[8, 9]] * len(texts), embeddings=np.asarray(embeddings))


def score(answers, embeddings, **hyperparameters):
    hp = validate_hyperparameters("evol_rl", {"n_votes": 4, "n_train": 4, **hyperparameters})
    return METHODS["evol_rl"].scorer(evol_group(answers, embeddings), hp, None)


def test_a_worked_example_matches_the_hand_computation():
    # cos(e0, e1) = 0.6, cos(e0, e2) = 0, cos(e1, e2) = 0.8; "1" is the majority {0, 1}, "2" a lone minority.
    embeddings = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0], [5.0, 5.0]])
    scores = novelty_scores(["1", "1", "2", None], embeddings, alpha=0.5)
    assert scores.mean_similarity[:3] == pytest.approx([0.6, 0.6, 0.4])  # the lone minority falls back to all others
    assert scores.max_similarity[:3] == pytest.approx([0.6, 0.8, 0.8])
    assert scores.raw[:3] == pytest.approx([0.4, 0.3, 0.4])  # u = 1 − (½ s̄ + ½ m)
    assert scores.normalized[:3] == pytest.approx([1.0, 0.0, 1.0])
    assert scores.raw[3] is None and scores.in_majority == [True, True, False, None]
    # reward mapping: 0.5 + 0.5ũ in the majority, −1 + 0.5ũ in the minority, −1 invalid
    result = score(["1", "1", "2", None], embeddings, alpha=0.5)
    assert result.rewards == pytest.approx([1.0, 0.5, -0.5, -1.0])
    assert result.majority_answer == "1"
    assert [e["novelty"] for e in result.extras] == [pytest.approx(1.0), pytest.approx(0.0), pytest.approx(1.0), None]
    assert result.metrics["evol_rl/invalid_ratio"] == 0.25
    assert result.metrics["evol_rl/novelty_mean"] == pytest.approx(np.mean([0.4, 0.3, 0.4]))


def test_invalid_responses_get_minus_one_and_their_rows_are_ignored():
    valid_rows = np.array([[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]])
    with_garbage = np.vstack([valid_rows, [[np.nan, np.nan]]])
    answers = ["1", "1", "2", None]
    assert score(answers, with_garbage).rewards == pytest.approx(score(answers[:3], valid_rows).rewards + [-1.0])


def test_every_response_invalid_gives_minus_one_everywhere():
    result = score([None, None, None], np.zeros((3, 4)))
    assert result.rewards == [-1.0, -1.0, -1.0] and result.majority_answer is None


def test_a_box_without_a_digit_is_invalid_and_the_bands_hold():
    # EVOL-RL App. C.4: valid only if the last \boxed{} exists and contains a digit
    texts = ["so \\boxed{5}", "so \\boxed{5}", "so \\boxed{6}", "so \\boxed{x}"]
    group = Group(prompt_id="p", prompt="q", texts=texts, answers=[evol_rl_answer(t) for t in texts],
                  prompt_ids=[1], completion_ids=[[2]] * 4, embeddings=np.eye(4))
    result = METHODS["evol_rl"].scorer(group, validate_hyperparameters("evol_rl", {"n_votes": 4, "n_train": 4}), None)
    assert result.majority_answer == "5"
    assert result.rewards[3] == -1.0
    assert all(0.5 <= r <= 1.0 for r in result.rewards[:2]) and -1.0 <= result.rewards[2] <= -0.5
    assert {"novelty_raw", "novelty"} <= set(result.extras[0]) and "evol_rl/novelty_mean" in result.metrics


def test_a_lone_valid_response_has_similarity_one_half_and_gets_one():
    scores = novelty_scores([None, "7", None], np.eye(3))
    assert scores.mean_similarity[1] == scores.max_similarity[1] == 0.5
    assert scores.raw[1] == pytest.approx(0.5)
    assert score([None, "7", None], np.eye(3)).rewards == [-1.0, 1.0, -1.0]


def test_a_group_with_equal_scores_gets_three_quarters():
    same = np.array([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 2)
    assert score(["5", "5", "5", "6", "6"], same).rewards == pytest.approx([0.75, 0.75, 0.75, -0.75, -0.75])


def test_a_single_member_majority_gets_one_and_a_single_member_minority_minus_one_half():
    # "3" and "4" tie at one vote each; the first seen wins.
    assert score(["3", "4"], np.array([[1.0, 0.0], [0.0, 1.0]])).rewards == [1.0, -0.5]


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


def test_the_majority_given_decides_who_is_in_it():
    scores = novelty_scores(["1", "2"], np.eye(2), majority="2")
    assert scores.in_majority == [False, True] and scores.normalized == [1.0, 1.0]


def test_without_novelty_the_reward_falls_back_to_ttrl():
    # EVOL-RL Table 4 "−Novelty Reward": the novelty-aware reward is removed, TTRL's 1/0 majority reward remains
    result = score(["1", "1", "2", None], np.eye(4), use_novelty=False)
    assert result.rewards == [1.0, 1.0, 0.0, 0.0] and result.majority_answer == "1"
    assert result.extras[0]["novelty"] is None


def test_novelty_is_scored_over_all_n_votes_and_the_first_n_train_are_trained():
    """A worked example (α = 0.5): the novelty of the two trained rollouts depends on the two untrained ones.

    Embeddings e0 = e2 = (1, 0), e1 = e3 = (0, 1); answers 5, 5, 5, 6 (majority 5 = {0, 1, 2}, minority {3}).
    Clipped cosines: s01 = 0, s02 = 1, s12 = 0, s03 = 0, s13 = 1, s23 = 0.
      r0: s̄ = (s01 + s02)/2 = 0.5 (own group), m = max(s01, s02, s03) = 1 → u = 1 − (0.25 + 0.5) = 0.25
      r1: s̄ = (s01 + s12)/2 = 0,   m = max(s01, s12, s13) = 1 → u = 0.5
      r2: s̄ = 0.5, m = 1 → u = 0.25
      r3: lone minority: s̄ = mean over all others = 1/3, m = 1 → u = 1/3, normalised 1 → reward −0.5
    Majority min–max: 0, 1, 0 → rewards 0.5, 1.0, 0.5. Over the first n_train = 2 alone (the old bug) both
    trained rollouts would be equally novel (0.75, 0.75).
    """
    embeddings = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    result = score(["5", "5", "5", "6"], embeddings, n_train=2)
    assert result.rewards == pytest.approx([0.5, 1.0, 0.5, -0.5])
    assert [e["novelty_raw"] for e in result.extras] == pytest.approx([0.25, 0.5, 0.25, 1 / 3])
    assert [e["novelty"] for e in result.extras] == pytest.approx([0.0, 1.0, 0.0, 1.0])  # untrained ones too
    assert [e["mean_similarity"] for e in result.extras] == pytest.approx([0.5, 0.0, 0.5, 1 / 3])
    assert [e["max_similarity"] for e in result.extras] == pytest.approx([1.0, 1.0, 1.0, 1.0])
    assert result.metrics["evol_rl/novelty_mean"] == pytest.approx(np.mean([0.25, 0.5, 0.25, 1 / 3]))


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
    rewards = score(answers, np.array(embeddings), alpha=alpha).rewards
    scores = novelty_scores(answers, np.array(embeddings), alpha=alpha)
    majority = [r for r, m in zip(rewards, scores.in_majority) if m is True]
    minority = [r for r, m in zip(rewards, scores.in_majority) if m is False]
    invalid = [r for r, m in zip(rewards, scores.in_majority) if m is None]
    assert all(0.5 <= r <= 1.0 for r in majority)
    assert all(-1.0 <= r <= -0.5 for r in minority)
    assert all(r == -1.0 for r in invalid)
    if majority and minority:
        assert min(majority) > max(minority)
