"""EM-RL-Token and EM-RL-Sequence (rl/methods/entropy_minimisation.py; Agarwal et al. 2025, arXiv 2505.15134)."""

import math

import numpy as np
import pytest

from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters
from rl.methods.entropy_minimisation import em_sequence_reward, em_token_reward
from rl.probes import TokenStatistics


def test_em_token_reward_is_minus_the_summed_entropy():
    # Agarwal et al. 2025 (arXiv 2505.15134) EM-RL-token: r = −Σ_t H_t. Worked example: H = 0.5, 1.5, 1.0 → −3.0
    assert em_token_reward([0.5, 1.5, 1.0]) == pytest.approx(-3.0)
    assert em_token_reward([]) == 0.0


def test_em_sequence_reward_is_the_sequence_log_probability():
    # Agarwal et al. 2025 EM-RL-sequence: r = log π(y|x) = Σ_t log p_t. Worked example: log 0.5 + log 0.25 = −3 log 2
    assert em_sequence_reward([math.log(0.5), math.log(0.25)]) == pytest.approx(-3 * math.log(2))
    assert em_sequence_reward([]) == 0.0


def test_the_mean_aggregation_is_the_length_normalised_variant():
    assert em_token_reward([0.5, 1.5, 1.0], aggregation="mean") == pytest.approx(-1.0)
    assert em_sequence_reward([math.log(0.5), math.log(0.25)], aggregation="mean") == pytest.approx(-1.5 * math.log(2))
    with pytest.raises(ValueError):
        em_token_reward([1.0], aggregation="max")


class _StatsProbe:
    """A probe whose token statistics are fixed numbers (no model)."""

    def __init__(self, stats):
        self.stats = stats

    def token_statistics(self, group):
        return self.stats


def _em_group(n):
    return Group(prompt_id="p", prompt="q", texts=["\\boxed{1}"] * n, answers=["1"] * n, prompt_ids=[1],
                 completion_ids=[[2, 3]] * n, embeddings=np.eye(n))


def test_the_em_scorers_sum_by_default_and_follow_the_aggregation_hyperparameter():
    stats = [TokenStatistics(top1=[0.9, 0.9], top2=[0.1, 0.1], entropy=[0.5, 1.5], logprob=[math.log(0.5), math.log(0.25)])] * 2
    for method in ("em_token", "em_sequence"):
        assert METHODS[method].defaults()["aggregation"] == "sum"
    hp = validate_hyperparameters("em_token", {"n_votes": 2, "n_train": 2})
    assert METHODS["em_token"].scorer(_em_group(2), hp, _StatsProbe(stats)).rewards == pytest.approx([-2.0, -2.0])
    hp = validate_hyperparameters("em_token", {"n_votes": 2, "n_train": 2, "aggregation": "mean"})
    assert METHODS["em_token"].scorer(_em_group(2), hp, _StatsProbe(stats)).rewards == pytest.approx([-1.0, -1.0])
    hp = validate_hyperparameters("em_sequence", {"n_votes": 2, "n_train": 2})
    assert METHODS["em_sequence"].scorer(_em_group(2), hp, _StatsProbe(stats)).rewards == pytest.approx([-3 * math.log(2)] * 2)
