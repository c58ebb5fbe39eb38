from rl.rewards.ttrl import ttrl_rewards


def test_answers_equal_to_the_majority_get_one():
    assert ttrl_rewards(["4", "4", "5", None]) == [1.0, 1.0, 0.0, 0.0]


def test_equivalent_forms_of_the_majority_are_rewarded():
    assert ttrl_rewards(["0.5", "0.5", r"\frac{1}{2}", "3"]) == [1.0, 1.0, 1.0, 0.0]


def test_a_group_without_answers_gets_zero():
    assert ttrl_rewards([None, None]) == [0.0, 0.0]


def test_a_majority_voted_over_more_rollouts_can_be_passed_in():
    assert ttrl_rewards(["1", "2"], majority="2") == [0.0, 1.0]
