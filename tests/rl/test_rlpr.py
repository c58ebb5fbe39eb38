"""RLPR (Yu et al. 2025, arXiv 2506.18254): reward debiasing, standard-deviation filtering, and the
exact-token-id probes RLPR / DARL score with."""

import numpy as np
import pytest
import torch

from rl.methods import METHODS, validate_hyperparameters
from rl.policy import load_policy
from rl.rewards.baselines import rlpr_debiased_reward, rlpr_std_filter
from rl.groups import Group
from rl.policy_probe import PolicyProbe


@pytest.fixture(scope="module")
def policy():
    model, tokenizer = load_policy("default")
    model.eval()
    return model, tokenizer


# ---------------------------------------------------------------- debiasing: r̂ = clip(r − r′, 0, 1)


def test_debiasing_subtracts_the_probability_without_reasoning_and_clips():
    assert rlpr_debiased_reward(0.7, 0.2) == pytest.approx(0.5)  # the reasoning raised p(y*) by 0.5
    assert rlpr_debiased_reward(0.3, 0.5) == 0.0  # the reasoning lowered it: clipped at 0
    assert rlpr_debiased_reward(1.0, 0.0) == 1.0


class TableProbe:
    """Mean answer-token probabilities from a table keyed by the first id of the scored prefix.

    Rollout j's reasoning prefix is [j]; the prompt-only prefix (no reasoning) is [99].
    """

    def __init__(self, table):
        self.table = table

    def reasoning_prefix_ids(self, group, opener="\\boxed{"):
        return [[j] for j in range(len(group.texts))]

    def answer_prefix_ids(self, group, opener="\\boxed{"):
        return [99]

    def answer_probabilities_from_ids(self, prefix_ids, answers):
        return [self.table[p[0]] for p in prefix_ids]


def rlpr_group(n, reference="5"):
    texts = ["so \\boxed{5}"] * n
    return Group(prompt_id="p", prompt="q", texts=texts, answers=["5"] * n, prompt_ids=[1],
                 completion_ids=[[2]] * n, embeddings=np.eye(n), reference=reference)


def test_score_rlpr_is_the_debiased_probability_of_the_reference():
    """Worked example: r = 0.9, 0.5, 0.2, 0.6 under each rollout's reasoning; r′ = 0.4 without reasoning.

    r̂ = clip(r − r′, 0, 1) = 0.5, 0.1, 0, 0.2 (std 0.19 ≥ β: trained).
    """
    probe = TableProbe({0: 0.9, 1: 0.5, 2: 0.2, 3: 0.6, 99: 0.4})
    hp = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4})
    score = METHODS["rlpr"].scorer(rlpr_group(4), hp, probe)
    assert score.rewards == pytest.approx([0.5, 0.1, 0.0, 0.2])
    assert [e["r_ref"] for e in score.extras] == pytest.approx([0.9, 0.5, 0.2, 0.6])
    assert all(e["r_ref_without_reasoning"] == pytest.approx(0.4) for e in score.extras)
    assert score.skip_training is False
    no_debias = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4, "use_debiasing": False})
    assert METHODS["rlpr"].scorer(rlpr_group(4), no_debias, probe).rewards == pytest.approx([0.9, 0.5, 0.2, 0.6])


# ---------------------------------------------------------------- standard-deviation filtering


def test_the_std_filter_skips_groups_whose_reward_std_is_below_the_threshold():
    # population std of [0.5, 0.5, 0.5, 0.52] = 0.00866 < 0.01: skipped; of [0, 1, 0, 1] = 0.5: kept
    assert rlpr_std_filter([0.5, 0.5, 0.5, 0.52], 0.01) is True
    assert rlpr_std_filter([0.0, 1.0, 0.0, 1.0], 0.01) is False
    assert rlpr_std_filter([0.3, 0.3], 0.0) is False  # β = 0 turns the filter off


def test_score_rlpr_marks_a_low_std_group_as_not_trained():
    assert METHODS["rlpr"].defaults()["std_filter_threshold"] > 0.0
    # every reasoning gives r = 0.9, r′ = 0.4: r̂ = 0.5 for all, std 0 < β
    probe = TableProbe({0: 0.9, 1: 0.9, 2: 0.9, 3: 0.9, 99: 0.4})
    hp = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4})
    score = METHODS["rlpr"].scorer(rlpr_group(4), hp, probe)
    assert score.rewards == pytest.approx([0.5] * 4) and score.skip_training is True
    assert score.metrics["rlpr/filtered_ratio"] == 1.0
    off = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4, "std_filter_threshold": 0.0})
    assert METHODS["rlpr"].scorer(rlpr_group(4), off, probe).skip_training is False


def test_the_trainer_leaves_a_skipped_group_out_of_the_update():
    from types import SimpleNamespace

    from rl.trainer import LabelFreeGRPOTrainer

    # 2 groups of 4 votes, 2 trained each; the second group's score asked to be skipped
    trainer = SimpleNamespace(num_generations=4, n_train=2, _skipped=[False, True])
    trained = [LabelFreeGRPOTrainer._is_trained(trainer, row) for row in range(8)]
    assert trained == [True, True, False, False, False, False, False, False]


# ---------------------------------------------------------------- exact token ids


def _direct_mean_probability(model, prefix_ids, answer_ids):
    with torch.no_grad():
        probabilities = torch.softmax(model(input_ids=torch.tensor([prefix_ids + answer_ids])).logits[0].float(), -1)
    start = len(prefix_ids)
    return float(np.mean([probabilities[start - 1 + i, t].item() for i, t in enumerate(answer_ids)]))


def test_the_probes_score_the_exact_generated_ids_bos_included(policy):
    """A Llama-style prompt starts with BOS, which re-tokenising the decoded text drops.

    The reasoning prefix must be the prompt ids (BOS first) followed by the completion's own ids up to
    and including where the answer starts (RLPR/DARL's template: `<answer>`); r(y*) must equal a direct
    forward pass on those ids plus y*.
    """
    model, tokenizer = policy
    bos, eos = tokenizer.bos_token_id, tokenizer.eos_token_id
    prompt = "What is 2 + 3?"
    prompt_ids = [bos] + tokenizer(prompt, add_special_tokens=False)["input_ids"]
    completions = [" <think> 2 + 3 = 5. </think> <answer>5</answer>", " <think> guess </think> <answer>6</answer>",
                   " no idea"]
    completion_ids = [tokenizer(c, add_special_tokens=False)["input_ids"] + [eos] for c in completions]
    texts = [tokenizer.decode(ids, skip_special_tokens=True) for ids in completion_ids]
    group = Group(prompt_id="p", prompt=prompt, texts=texts, answers=["5", "6", None], prompt_ids=prompt_ids,
                  completion_ids=completion_ids, embeddings=np.eye(3), reference="5")
    probe = PolicyProbe(model, tokenizer, temperature=1.0)
    opener = METHODS["rlpr"].answer_opener
    assert opener == "<answer>"
    prefixes = probe.reasoning_prefix_ids(group, opener)
    for ids, prefix, text in zip(completion_ids, prefixes, texts):
        assert prefix[: len(prompt_ids)] == prompt_ids  # BOS kept
        z = prefix[len(prompt_ids):]
        if opener in text:
            assert z == ids[: len(z)]  # the completion's own ids, not a re-tokenisation
            assert tokenizer.decode(z).endswith(opener)
        else:  # no answer: the whole completion (EOS left out) and then the answer opener
            assert z[: len(ids) - 1] == ids[:-1] and eos not in z
    answer_ids = tokenizer("5", add_special_tokens=False)["input_ids"]
    expected = [_direct_mean_probability(model, prefix, answer_ids) for prefix in prefixes]
    hp = validate_hyperparameters("rlpr", {"n_votes": 3, "n_train": 3, "use_debiasing": False})
    assert [e["r_ref"] for e in METHODS["rlpr"].scorer(group, hp, probe).extras] == pytest.approx(expected, abs=1e-5)
    # r′: the prompt ids (BOS first) and the answer opener, without the reasoning
    assert probe.answer_prefix_ids(group, opener)[: len(prompt_ids)] == prompt_ids
    r_prime = _direct_mean_probability(model, probe.answer_prefix_ids(group, opener), answer_ids)
    hp = validate_hyperparameters("rlpr", {"n_votes": 3, "n_train": 3})
    extras = METHODS["rlpr"].scorer(group, hp, probe).extras
    assert extras[0]["r_ref_without_reasoning"] == pytest.approx(r_prime, abs=1e-5)
    # DARL scores the same ids: r(y*, z, x) equal to RLPR's r
    darl = METHODS["darl"].scorer(group, validate_hyperparameters("darl", {"n_votes": 3, "n_train": 3}), probe)
    assert [e["r_ref"] for e in darl.extras] == pytest.approx(expected, abs=1e-5)
