"""TTRL (rl/methods/ttrl.py): the majority of the group is the pseudo-label; agreeing rollouts get 1."""

import numpy as np

from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters
from rl.voting import ttrl_rewards


def score(texts):
    rule = METHODS["ttrl"].answer_rule
    group = Group(prompt_id="p", prompt="q", texts=list(texts), answers=[rule(t) for t in texts], prompt_ids=[1],
                  completion_ids=[[2]] * len(texts), embeddings=np.eye(len(texts)))
    return METHODS["ttrl"].scorer(group, validate_hyperparameters("ttrl", {}), None)


def test_answers_equal_to_the_majority_get_one():
    result = score(["\\boxed{4}", "\\boxed{4}", "\\boxed{5}", "no answer"])
    assert result.rewards == [1.0, 1.0, 0.0, 0.0] and result.majority_answer == "4"


def test_equivalent_forms_of_the_majority_are_rewarded():
    result = score(["\\boxed{0.5}", "\\boxed{0.5}", "\\boxed{\\frac{1}{2}}", "\\boxed{3}"])
    assert result.rewards == [1.0, 1.0, 1.0, 0.0]


def test_a_group_without_answers_gets_zero():
    result = score(["no answer", "none either"])
    assert result.rewards == [0.0, 0.0] and result.majority_answer is None


def test_the_reward_is_agreement_with_the_pseudo_label_given():
    # R-Zero's solver passes its question's pseudo-label, voted over other rollouts than these
    assert ttrl_rewards(["1", "2", None], "2") == [0.0, 1.0, 0.0]
    assert ttrl_rewards(["1", "2"], None) == [0.0, 0.0]
