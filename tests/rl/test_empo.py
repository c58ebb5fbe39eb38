"""EMPO (Zhang et al. 2025, arXiv 2504.05812): meaning classes, class-share rewards, semantic entropy, filter."""

import math

import pytest

from rl.methods.empo import class_probabilities, empo_rewards, keep_prompt, semantic_classes, semantic_entropy

# 8 responses: three ways of writing 4, one 5, two ways of writing 1/2, two without an answer
ANSWERS = ["4", "4.0", "4", "5", None, "\\frac{1}{2}", "0.5", None]


def test_equivalent_forms_share_a_class_and_each_unanswered_response_is_its_own():
    # math-verify merges 4 ≡ 4.0 and \frac{1}{2} ≡ 0.5; unanswered responses are never merged
    # (EMPO verl compute_metrics.py, post_semantic_cluster)
    assert semantic_classes(ANSWERS) == [0, 0, 0, 1, 2, 3, 3, 4]
    assert semantic_classes(["", "  ", None]) == [0, 1, 2]  # blank = EMPO's "" = no answer
    assert semantic_classes([]) == []


def test_rewards_are_class_shares():
    # Eq. (3)/(6): r_i = |c_j| / G with G = 8: {4}: 3/8, {5}: 1/8, each None: 1/8, {1/2}: 2/8
    expected = [3 / 8, 3 / 8, 3 / 8, 1 / 8, 1 / 8, 2 / 8, 2 / 8, 1 / 8]
    assert empo_rewards(ANSWERS) == pytest.approx(expected)
    assert class_probabilities(semantic_classes(ANSWERS)) == pytest.approx([3 / 8, 1 / 8, 1 / 8, 2 / 8, 1 / 8])
    assert empo_rewards(ANSWERS, classes=[0, 0, 0, 1, 2, 3, 3, 4]) == pytest.approx(expected)
    assert empo_rewards(["7"] * 5) == [1.0] * 5
    assert empo_rewards([]) == []
    with pytest.raises(ValueError):
        empo_rewards(["1", "2"], classes=[0])


def test_semantic_entropy_worked_example():
    # Eq. (4): class sizes 3, 1, 1, 2, 1 of 8 → H = −[⅜ log ⅜ + 3·⅛ log ⅛ + ¼ log ¼] = 1.4942...
    expected = -(3 / 8 * math.log(3 / 8) + 3 * (1 / 8) * math.log(1 / 8) + 2 / 8 * math.log(2 / 8))
    assert expected == pytest.approx(1.494175, abs=1e-6)
    assert semantic_entropy(ANSWERS) == pytest.approx(expected, abs=1e-12)
    assert semantic_entropy(classes=[0, 0, 0, 1, 2, 3, 3, 4]) == pytest.approx(expected, abs=1e-12)
    assert semantic_entropy(["2", "2.0", "2"]) == 0.0  # one meaning
    assert semantic_entropy(["1", "2", "3", None]) == math.log(4)  # all different: the maximum, exactly
    assert semantic_entropy([None, None]) == math.log(2)  # unanswered responses are distinct meanings
    assert semantic_entropy([]) == 0.0
    with pytest.raises(ValueError):
        semantic_entropy()


def test_the_entropy_filter_is_strict_and_bounds_are_optional():
    # Eq. (7): δ_low < H < δ_high
    h = semantic_entropy(ANSWERS)
    assert keep_prompt(h) is True
    assert keep_prompt(h, low=0.0, high=math.log(8)) is True
    assert keep_prompt(h, low=h) is False and keep_prompt(h, high=h) is False
    # the TRL release: keep iff H < log G, i.e. drop only a group whose G answers are all different
    g = 4
    assert keep_prompt(semantic_entropy(["1", "2", "3", "4"]), high=math.log(g)) is False
    assert keep_prompt(semantic_entropy(["1", "1", "3", "4"]), high=math.log(g)) is True
    assert keep_prompt(semantic_entropy(["1", "1", "1", "1"]), high=math.log(g)) is True
    assert keep_prompt(0.0, low=0.0) is False  # a unanimous group is dropped once δ_low = 0 is set


def test_a_response_joins_the_class_of_the_first_member_it_matches():
    # greedy clustering against each class's first member (not any member): with "within 1" as equality,
    # 2 joins 1's class, 3 is 2 away from 1 and opens a new class although it is within 1 of 2
    def within_one(a, b):
        return abs(float(a) - float(b)) <= 1

    assert semantic_classes(["1", "2", "3", "4"], equal=within_one) == [0, 0, 1, 1]
    assert semantic_classes(["3", "1", "2"], equal=within_one) == [0, 1, 0]


def test_rewards_use_no_labels():
    # the reward is a function of the group's answers only: nothing to pass a label to
    assert empo_rewards(["5", "5", "6"]) == pytest.approx([2 / 3, 2 / 3, 1 / 3])


# ---------------------------------------------------------------- the method record (rl/methods/empo.py)


def _group(answers):
    import numpy as np

    from rl.groups import Group
    return Group(prompt_id="p", prompt="q", texts=["t"] * len(answers), answers=list(answers), prompt_ids=[1],
                 completion_ids=[[2]] * len(answers), embeddings=np.eye(len(answers)))


def test_the_empo_scorer_rewards_class_shares_and_reports_the_semantic_entropy():
    from rl.methods import METHODS, validate_hyperparameters

    answers = ["4", "4.0", "4", "5", None, "\\frac{1}{2}", "0.5", "7"]
    score = METHODS["empo"].scorer(_group(answers), validate_hyperparameters("empo", {}), None)
    assert score.rewards == pytest.approx([3 / 8, 3 / 8, 3 / 8, 1 / 8, 1 / 8, 2 / 8, 2 / 8, 1 / 8])
    assert [e["semantic_class"] for e in score.extras] == [0, 0, 0, 1, 2, 3, 3, 4]
    assert score.metrics["empo/semantic_entropy_mean"] == pytest.approx(1.494175, abs=1e-6)
    assert score.skip_training is False  # the released recipes apply no entropy filter


def test_the_empo_entropy_thresholds_leave_prompts_out_of_the_update():
    from rl.methods import METHODS, validate_hyperparameters

    scorer = METHODS["empo"].scorer
    distinct = _group(["1", "2", "3", "4"])  # H = log 4: the TRL release's δ_high drops it
    assert scorer(distinct, validate_hyperparameters("empo", {"entropy_high": math.log(4)}), None).skip_training
    agreed = _group(["1", "1", "1", "1"])  # H = 0: not above δ_low
    assert scorer(agreed, validate_hyperparameters("empo", {"entropy_low": 0.0}), None).skip_training
    assert not scorer(agreed, validate_hyperparameters("empo", {"entropy_high": 1.0}), None).skip_training


def test_empo_uses_its_papers_settings():
    from rl.methods import validate_hyperparameters

    hp = validate_hyperparameters("empo", {})
    # EMPO §4.1 and its verl recipe: 16 responses, 256 prompts per step in mini-batches of 32, lr 5e-7 constant, no KL
    assert (hp["n_votes"], hp["n_train"], hp["prompts_per_step"], hp["prompts_per_update"]) == (16, 16, 256, 32)
    assert (hp["learning_rate"], hp["lr_schedule"], hp["warmup_ratio"], hp["kl_coef"]) == (5e-7, "constant", 0.0, 0.0)
    assert (hp["entropy_low"], hp["entropy_high"]) == (None, None)
