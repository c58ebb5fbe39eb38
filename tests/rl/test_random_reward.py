"""random_reward, the negative control of Spurious Rewards (Shao et al. 2025): r ~ Bernoulli(γ), whatever the text."""
import numpy as np
import pytest

from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters

SCORE = METHODS["random_reward"].scorer


def group(texts, draw):
    return Group(prompt_id="p", prompt="q", texts=texts, answers=[t[-1] for t in texts], prompt_ids=[1],
                 completion_ids=[[2]] * len(texts), embeddings=np.eye(len(texts)), draw=draw)


def test_rewards_are_zero_or_one_at_the_rate_gamma():
    hp = validate_hyperparameters("random_reward", {"n_votes": 8, "n_train": 8})
    assert hp["probability"] == 0.5
    rewards = [r for k in range(500) for r in SCORE(group(["a 1"] * 8, (0, 1, k)), hp, None).rewards]
    assert set(rewards) == {0.0, 1.0}
    assert np.mean(rewards) == pytest.approx(0.5, abs=0.03)  # 4,000 draws: 3 standard errors is 0.024
    skewed = validate_hyperparameters("random_reward", {"n_votes": 8, "n_train": 8, "probability": 0.2})
    assert np.mean([r for k in range(500) for r in SCORE(group(["a 1"] * 8, (0, 1, k)), skewed, None).rewards]) == \
        pytest.approx(0.2, abs=0.03)


def test_the_reward_ignores_the_text_and_follows_the_draw_key():
    hp = validate_hyperparameters("random_reward", {"n_votes": 8, "n_train": 8})
    right = SCORE(group(["so 4"] * 8, (7, 3, 0)), hp, None).rewards
    wrong = SCORE(group([f"answer {i}" for i in range(8)], (7, 3, 0)), hp, None).rewards
    assert right == wrong  # the same run, step and place: the same draws, whatever was written
    others = [SCORE(group(["so 4"] * 8, key), hp, None).rewards for key in ((8, 3, 0), (7, 4, 0), (7, 3, 1))]
    assert all(o != right for o in others)  # another seed, step or group: another draw


def test_gamma_zero_and_one_reward_nothing_and_everything():
    for gamma, expected in ((0.0, 0.0), (1.0, 1.0)):
        hp = validate_hyperparameters("random_reward", {"n_votes": 4, "n_train": 4, "probability": gamma})
        assert SCORE(group(["x 1"] * 4, (0, 1, 0)), hp, None).rewards == [expected] * 4
