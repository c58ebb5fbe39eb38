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


def test_rlvr_starts_from_the_setup_of_the_label_free_run_it_bounds():
    # issue 38, defect 6: it said "the setup every method starts from" but ran 3,072 tokens with loss_type dapo while
    # TTRL, the run it is compared with, runs 12,288 with grpo; only the reward and the vote's size differ now
    from rl.methods import validate_hyperparameters

    rlvr, ttrl = validate_hyperparameters("rlvr", {}), validate_hyperparameters("ttrl", {})
    differing = {name for name in ttrl if rlvr.get(name) != ttrl[name]}
    assert differing == {"n_votes"}  # 32 sampled and all trained, where TTRL votes with 64 and trains 32
    assert (rlvr["max_completion_length"], rlvr["loss_type"]) == (12288, "grpo")
