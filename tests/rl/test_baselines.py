import math

import pytest

from rl.rewards.baselines import em_sequence_reward, em_token_reward, rlvr_rewards, self_consistency_rewards


def test_em_token_reward_is_minus_the_mean_entropy():
    assert em_token_reward([0.5, 1.5, 1.0]) == pytest.approx(-1.0)
    assert em_token_reward([]) == 0.0


def test_em_sequence_reward_is_the_mean_log_probability():
    assert em_sequence_reward([math.log(0.5), math.log(0.25)]) == pytest.approx(-1.5 * math.log(2))


def test_self_consistency_is_the_share_of_the_group_agreeing():
    assert self_consistency_rewards(["1", "1", "2", None]) == [0.5, 0.5, 0.25, 0.0]


def test_self_consistency_merges_equivalent_forms():
    assert self_consistency_rewards(["0.5", r"\frac{1}{2}", "3"]) == pytest.approx([2 / 3, 2 / 3, 1 / 3])


def test_rlvr_rewards_answers_equal_to_the_label():
    assert rlvr_rewards(["1/2", "2", None], "0.5") == [1.0, 0.0, 0.0]


def test_rlvr_needs_a_label():
    with pytest.raises(ValueError):
        rlvr_rewards(["1"], None)
