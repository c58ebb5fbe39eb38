"""Self-consistency (rl/methods/self_consistency.py): the share of the group agreeing with each answer."""

import numpy as np
import pytest

from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters


def score(answers):
    group = Group(prompt_id="p", prompt="q", texts=["t"] * len(answers), answers=list(answers), prompt_ids=[1],
                  completion_ids=[[2]] * len(answers), embeddings=np.eye(len(answers)))
    return METHODS["self_consistency"].scorer(group, validate_hyperparameters("self_consistency", {}), None)


def test_self_consistency_is_the_share_of_the_group_agreeing():
    result = score(["1", "1", "2", None])
    assert result.rewards == [0.5, 0.5, 0.25, 0.0] and result.majority_answer == "1"


def test_self_consistency_merges_equivalent_forms():
    assert score(["0.5", r"\frac{1}{2}", "3"]).rewards == pytest.approx([2 / 3, 2 / 3, 1 / 3])
