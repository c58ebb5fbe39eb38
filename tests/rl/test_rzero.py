import pytest
from hypothesis import given, strategies as st

from rl.rewards.rzero import (
    challenger_rewards,
    extract_question,
    keep_for_solver,
    repetition_penalties,
    solver_agreement,
    uncertainty_reward,
)

NEAR_DUPLICATES = [
    "What is the sum of the first ten positive integers ?",
    "What is the sum of the first ten positive integers ?",
    "What is the sum of the first twelve positive integers ?",
]
DIFFERENT = "A circle has radius 3 . Find its area in terms of pi ."


def test_uncertainty_is_one_when_half_the_solver_agrees():
    assert uncertainty_reward(["7"] * 5 + ["1", "2", "3", "4", "5"]) == 1.0


def test_uncertainty_is_zero_when_the_solver_is_unanimous():
    assert uncertainty_reward(["7"] * 10) == 0.0


def test_uncertainty_follows_one_minus_twice_the_distance_from_one_half():
    assert uncertainty_reward(["7"] * 3 + [str(i) for i in range(7)]) == pytest.approx(0.6)


def test_none_answers_count_in_m_but_never_form_the_majority():
    answers = ["4"] * 4 + [None] * 6
    assert solver_agreement(answers) == 0.4
    assert uncertainty_reward(answers) == pytest.approx(0.8)
    assert uncertainty_reward([None] * 10) == 0.0


@given(st.integers(0, 10))
def test_uncertainty_is_symmetric_around_one_half(k):
    answers = ["1"] * max(k, 1) + [str(100 + i) for i in range(10 - max(k, 1))]
    p = max(k, 1) / 10
    assert uncertainty_reward(answers) == pytest.approx(1 - 2 * abs(p - 0.5))


def test_near_duplicate_questions_share_the_penalty_of_their_cluster():
    assert repetition_penalties(NEAR_DUPLICATES + [DIFFERENT]) == pytest.approx([0.75, 0.75, 0.75, 0.25])
    assert repetition_penalties(NEAR_DUPLICATES + [DIFFERENT], lam=2.0) == pytest.approx([1.5, 1.5, 1.5, 0.5])


def test_a_threshold_of_zero_puts_every_question_alone():
    assert repetition_penalties(NEAR_DUPLICATES, threshold=0.0) == pytest.approx([1 / 3] * 3)


def test_a_single_question_is_its_own_cluster():
    assert repetition_penalties(["one question"]) == [1.0]
    assert repetition_penalties([]) == []


def test_challenger_reward_is_uncertainty_minus_penalty_floored_at_zero():
    questions = NEAR_DUPLICATES[:1] + [DIFFERENT, None]
    half = ["7"] * 5 + ["1", "2", "3", "4", "5"]
    rewards = challenger_rewards(questions, [half, half, half])
    # two valid questions in separate clusters: penalty 1/2 each, B counts only valid questions
    assert rewards == pytest.approx([0.5, 0.5, 0.0])
    assert challenger_rewards(NEAR_DUPLICATES, [half] * 3) == [0.0, 0.0, 0.0]


def test_extract_question_takes_the_last_block():
    text = "<question> first </question> scratch <question>\n Find x. \n</question> \\boxed{2}"
    assert extract_question(text) == "Find x."
    assert extract_question("no tags") is None
    assert extract_question("<question>   </question>") is None
    assert extract_question("<question> unclosed") is None


@pytest.mark.parametrize("agreeing, kept", [(2, False), (3, True), (5, True), (7, True), (8, False)])
def test_the_solver_keeps_questions_with_three_to_seven_of_ten_agreeing(agreeing, kept):
    answers = ["9"] * agreeing + [str(i) for i in range(10 - agreeing)]
    assert keep_for_solver(answers) is kept


def test_a_question_without_any_answer_is_not_kept():
    assert keep_for_solver([None] * 10) is False
