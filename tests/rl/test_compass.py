"""COMPASS (rl/methods/compass.py): DCAR (COMPASS Eq. (2)–(9)), DPR (Eq. (10)–(12)) and their sum, the scorer (Eq. (1))."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from rl.answers import majority_vote
from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters
from rl.methods.compass import confidence_weighted_vote, dcar, decisive_path_reward, trajectory_confidence
from rl.probes import TokenStatistics

# COMPASS Figure 5 (AIME 2024, ground truth 116): responses #2, #7 answer 32; #12, #15 answer 116.
CASE_ANSWERS = ["32", "32", "116", "116"]
CASE_CONFIDENCES = [0.8327, 0.7848, 0.8262, 0.7973]


def test_it_breaks_a_tie_by_confidence():
    assert majority_vote(CASE_ANSWERS) == "32"  # TTRL's plain vote picks the first of the tie
    label, scores = confidence_weighted_vote(CASE_ANSWERS, CASE_CONFIDENCES)
    assert label == "116"
    assert scores["116"] == pytest.approx(1.6235) and scores["32"] == pytest.approx(1.6175)


def test_agreeing_answers_get_the_credibility():
    result = dcar(CASE_ANSWERS, CASE_CONFIDENCES)
    credibility = 0.8262 / 0.8327  # C_general (best "116") / C_elite (best overall, a "32")
    assert result.credibility == pytest.approx(credibility)
    assert dcar(CASE_ANSWERS, CASE_CONFIDENCES).rewards == pytest.approx([0.0, 0.0, credibility, credibility])


def test_credibility_is_one_when_the_most_confident_response_agrees():
    assert dcar(["5", "5", "6"], [0.9, 0.5, 0.8]).rewards == pytest.approx([1.0, 1.0, 0.0])


def test_none_answers_do_not_vote_and_get_zero():
    assert dcar([None, "4", "4", "9"], [0.5, 0.6, 0.5, 0.55]).rewards == pytest.approx([0.0, 1.0, 1.0, 0.0])
    assert dcar([None, None], [0.5, 0.5]).rewards == [0.0, 0.0]


def test_the_elite_confidence_is_the_max_over_all_n_candidates():
    """COMPASS Eq. (7) / Algorithm 1: C_Elite = max_{i=1..N} C(ŷ_i), every candidate, answered or not.

    Worked example: answers [None, 4, 4, 9], confidences [0.99, 0.6, 0.5, 0.55]. The vote gives y* = 4
    (1.1 against 0.55); C_General = max(0.6, 0.5) = 0.6; C_Elite = 0.99 (the candidate without an answer)
    → credibility = 0.6 / 0.99, and the two 4s get it. Over the answered candidates alone C_Elite was 0.6
    and the credibility 1.
    """
    result = dcar([None, "4", "4", "9"], [0.99, 0.6, 0.5, 0.55])
    assert result.pseudo_label == "4"
    assert result.credibility == pytest.approx(0.6 / 0.99)
    assert result.rewards == pytest.approx([0.0, 0.6 / 0.99, 0.6 / 0.99, 0.0])


def test_the_ablations_fall_back_to_majority_vote_and_binary_reward():
    assert dcar(CASE_ANSWERS, CASE_CONFIDENCES, use_confidence_weighting=False).pseudo_label == "32"
    assert dcar(CASE_ANSWERS, CASE_CONFIDENCES, use_credibility=False).rewards == [0.0, 0.0, 1.0, 1.0]


def test_confidence_is_exp_of_minus_the_population_std():
    # differences 0.8, 0.3, 0.7: mean 0.6, population variance 0.14 / 3
    assert trajectory_confidence([0.9, 0.6, 0.8], [0.1, 0.3, 0.1]) == pytest.approx(math.exp(-math.sqrt(0.14 / 3)))
    assert trajectory_confidence([0.7, 0.7], [0.2, 0.2]) == 1.0
    assert trajectory_confidence([], []) == 1.0


def test_decisive_path_reward_weights_decisiveness_by_softmax_entropy():
    # weights softmax([0, ln 3]) = [1/4, 3/4]; decisiveness [0.85, 0.1]
    assert decisive_path_reward([0.9, 0.5], [0.05, 0.4], [0.0, math.log(3)]) == pytest.approx(0.2875)
    assert decisive_path_reward([], [], []) == 0.0


def test_decisive_path_reward_is_stable_for_large_entropies():
    assert decisive_path_reward([0.9, 0.5], [0.05, 0.4], [1000.0, 1000.0 + math.log(3)]) == pytest.approx(0.2875)


class StatsProbe:
    """The policy's per-token statistics of each rollout, given (no model)."""

    def __init__(self, top1s, top2s, entropies):
        self.stats = [TokenStatistics(t1, t2, h, [0.0] * len(t1)) for t1, t2, h in zip(top1s, top2s, entropies)]

    def token_statistics(self, group):
        return self.stats


def compass_group(answers):
    return Group(prompt_id="p", prompt="q", texts=[f"\\boxed{{{a}}}" for a in answers], answers=list(answers),
                 prompt_ids=[1], completion_ids=[[2]] * len(answers), embeddings=np.eye(len(answers)))


def test_the_scorer_adds_dcar_and_dpr():
    """COMPASS Eq. (1): R = R_outcome (DCAR) + R_process (DPR). Worked example, three rollouts:

    #0 answers 1: p1 − p2 = 0.8, 0.3, 0.7 → confidence exp(−√(0.14/3)) = 0.8057; DPR softmax(0.1, 0.2, 0.3) · (0.8,
    0.3, 0.7). #1 answers 2: differences 0.85, 0.1 → confidence exp(−0.375) = 0.6873; DPR ¼ · 0.85 + ¾ · 0.1 = 0.2875.
    #2 answers 1: differences 0.5, 0.5 → confidence 1; DPR 0.5. The vote: "1" with 1.8057 against 0.6873; C_General =
    C_Elite = 1 → credibility 1: DCAR 1, 0, 1.
    """
    top1s = [[0.9, 0.6, 0.8], [0.9, 0.5], [0.7, 0.7]]
    top2s = [[0.1, 0.3, 0.1], [0.05, 0.4], [0.2, 0.2]]
    entropies = [[0.1, 0.2, 0.3], [0.0, math.log(3)], [0.5, 0.5]]
    weights = np.exp([0.1, 0.2, 0.3]) / np.exp([0.1, 0.2, 0.3]).sum()
    dpr = [float(weights @ [0.8, 0.3, 0.7]), 0.2875, 0.5]
    probe = StatsProbe(top1s, top2s, entropies)
    hp = validate_hyperparameters("compass", {"n_votes": 3, "n_train": 3})
    result = METHODS["compass"].scorer(compass_group(["1", "2", "1"]), hp, probe)
    assert result.rewards == pytest.approx([1.0 + dpr[0], 0.0 + dpr[1], 1.0 + dpr[2]])
    assert result.majority_answer == "1"
    confidences = [math.exp(-math.sqrt(0.14 / 3)), math.exp(-0.375), 1.0]
    assert [e["confidence"] for e in result.extras] == pytest.approx(confidences)
    assert [e["decisiveness"] for e in result.extras] == pytest.approx(dpr)
    assert result.metrics["compass/credibility_mean"] == 1.0
    assert result.metrics["compass/confidence_mean"] == pytest.approx(np.mean(confidences))
    without_dpr = METHODS["compass"].scorer(compass_group(["1", "2", "1"]), dict(hp, use_dpr=False), probe)
    assert without_dpr.rewards == [1.0, 0.0, 1.0]


def test_the_scorer_rewards_the_credibility_of_the_confidence_weighted_pseudo_label():
    # two 32s and two 116s with confidences 0.9, 0.1, 0.6, 0.5: each rollout's p1 − p2 is 0.5 ± d, whose population
    # std is d, so its confidence is exp(−d) (COMPASS Eq. (2)–(3)); the fake probe's numbers need not be probabilities
    spreads = [-math.log(c) for c in (0.9, 0.1, 0.6, 0.5)]
    top1s = [[0.5 + d, 0.5 - d] for d in spreads]
    top2s = [[0.0, 0.0] for _ in spreads]
    probe = StatsProbe(top1s, top2s, [[0.0, 0.0]] * 4)
    hp = validate_hyperparameters("compass", {"n_votes": 4, "n_train": 4, "use_dpr": False})
    result = METHODS["compass"].scorer(compass_group(["32", "32", "116", "116"]), hp, probe)
    assert [e["confidence"] for e in result.extras] == pytest.approx([0.9, 0.1, 0.6, 0.5])
    # y* = 116 (1.1 against 1.0); C_General = 0.6, C_Elite = 0.9 (a 32) → credibility 2/3 for the 116s
    assert result.majority_answer == "116"
    assert result.rewards == pytest.approx([0.0, 0.0, 0.6 / 0.9, 0.6 / 0.9])
    plain = METHODS["compass"].scorer(compass_group(["32", "32", "116", "116"]),
                                      dict(hp, use_confidence_weighting=False, use_credibility=False), probe)
    assert plain.majority_answer == "32" and plain.rewards == [1.0, 1.0, 0.0, 0.0]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["1", "2", "3", None]), st.floats(0.01, 1.0)), min_size=1, max_size=10))
def test_dcar_rewards_are_in_zero_one_and_equal_within_the_pseudo_label(pairs):
    answers, confidences = zip(*pairs)
    result = dcar(list(answers), list(confidences))
    assert all(0.0 <= r <= 1.0 for r in result.rewards)
    assert len({r for r in result.rewards if r > 0}) <= 1
    if result.pseudo_label is not None:
        assert 0.0 < result.credibility <= 1.0


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.floats(0, 1), st.floats(0, 10)), min_size=1, max_size=20))
def test_dpr_is_a_weighted_mean_of_decisiveness(steps):
    top1, top2, entropy = map(np.array, zip(*steps))
    reward = decisive_path_reward(top1, top2, entropy)
    diff = top1 - top2
    assert diff.min() - 1e-12 <= reward <= diff.max() + 1e-12


def test_compass_averages_token_losses_as_the_ttrl_script_it_follows():
    # issue 38, defect 6: COMPASS below 7B follows the TTRL paper's settings, whose script's loss is 'grpo' here
    from rl.methods import METHODS, validate_hyperparameters

    assert validate_hyperparameters("compass", {})["loss_type"] == "grpo"
    assert "loss_type 'grpo'" in METHODS["compass"].defaults_source
