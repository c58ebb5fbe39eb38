"""rl.trainer's plumbing in process: the reward statistics of a step and the rollout-batch step arithmetic."""

from types import SimpleNamespace

import numpy as np
import pytest

from rl.callbacks import at_step_boundary, rollout_step
from rl.trainer import reward_statistics, updates_per_step


def test_reward_mean_and_std_are_over_the_trained_rollouts_and_the_vote_ones_over_all():
    # a crafted group of n_votes = 6, n_train = 3: the untrained half votes differently from the trained half
    rewards = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    trained = [True, True, True, False, False, False]
    values = reward_statistics(rewards, trained)
    assert values["reward/mean"] == pytest.approx(2 / 3)
    assert values["reward/std"] == pytest.approx(np.std([1.0, 1.0, 0.0], ddof=1))
    assert values["reward/vote_mean"] == pytest.approx(1 / 3)
    assert values["reward/vote_std"] == pytest.approx(np.std(rewards, ddof=1))


def test_a_step_with_nothing_trained_reports_only_the_vote_statistics():
    assert set(reward_statistics([1.0, 0.0], [False, False])) == {"reward/vote_mean", "reward/vote_std"}


def test_a_rollout_batch_step_spans_its_optimizer_updates():
    args = SimpleNamespace(steps_per_generation=4, num_iterations=2)  # 8 prompts / 2 per update, 2 epochs
    assert updates_per_step(args) == 8
    assert [rollout_step(args, SimpleNamespace(global_step=g)) for g in (0, 7, 8, 16)] == [0, 0, 1, 2]
    assert [at_step_boundary(args, SimpleNamespace(global_step=g)) for g in (0, 3, 8)] == [True, False, True]
    assert updates_per_step(SimpleNamespace()) == 1
