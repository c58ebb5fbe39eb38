"""RLVR (rl/methods/rlvr.py): the supervised upper bound, reward 1 for an answer equivalent to the label."""

import numpy as np
import pytest

from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters


def score(answers, label):
    group = Group(prompt_id="p", prompt="q", texts=["t"] * len(answers), answers=list(answers), prompt_ids=[1],
                  completion_ids=[[2]] * len(answers), embeddings=np.eye(len(answers)), reference=label)
    return METHODS["rlvr"].scorer(group, validate_hyperparameters("rlvr", {}), None)


def test_rlvr_rewards_answers_equal_to_the_label():
    assert score(["1/2", "2", None], "0.5").rewards == [1.0, 0.0, 0.0]


def test_rlvr_needs_a_label():
    with pytest.raises(ValueError):
        score(["1"], None)
