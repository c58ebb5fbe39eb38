"""RLPR (Yu et al. 2025, arXiv 2506.18254): reward debiasing, standard-deviation filtering, and the
exact-token-id probes RLPR / DARL score with."""

import numpy as np
import pytest
import torch

from rl.methods import METHODS, validate_hyperparameters
from tests.rl.policies import load_policy
from rl.methods.probability_reward import r1_format_reward
from rl.methods.rlpr import rlpr_debiased_reward
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


def rlpr_group(n, reference="5", baseline=0.4):
    """`baseline`: the frozen r′ the trainer scored for the prompt before training (the table's 99 by default)."""
    texts = ["so \\boxed{5}"] * n
    return Group(prompt_id="p", prompt="q", texts=texts, answers=["5"] * n, prompt_ids=[1],
                 completion_ids=[[2]] * n, embeddings=np.eye(n), reference=reference, baseline=baseline)


def test_score_rlpr_is_the_debiased_probability_of_the_reference():
    """Worked example: r = 0.9, 0.5, 0.2, 0.6 under each rollout's reasoning; r′ = 0.4 without reasoning.

    r̂ = clip(r − r′, 0, 1) = 0.5, 0.1, 0, 0.2 (std 0.19 ≥ β: trained).
    """
    probe = TableProbe({0: 0.9, 1: 0.5, 2: 0.2, 3: 0.6, 99: 0.4})
    hp = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4, "format_coefficient": 0.0,
                                           "r_prime": "per_step"})
    score = METHODS["rlpr"].scorer(rlpr_group(4), hp, probe)
    assert score.rewards == pytest.approx([0.5, 0.1, 0.0, 0.2])
    assert [e["r_ref"] for e in score.extras] == pytest.approx([0.9, 0.5, 0.2, 0.6])
    assert all(e["r_ref_without_reasoning"] == pytest.approx(0.4) for e in score.extras)
    assert score.skip_training is False
    no_debias = dict(hp, use_debiasing=False)
    assert METHODS["rlpr"].scorer(rlpr_group(4), no_debias, probe).rewards == pytest.approx([0.9, 0.5, 0.2, 0.6])


# ---------------------------------------------------------------- the release's format reward


def test_the_format_reward_is_the_releases_r1_check():
    # RLPR's verl/workers/reward_manager/prob.py::format_reward (format_mode R1): each tag exactly once, in order
    assert r1_format_reward("<think> 2+3=5 </think> <answer>5</answer>") == 1.0
    assert r1_format_reward("<think>a</think><answer>5</answer> trailing words") == 1.0
    assert r1_format_reward("<answer>5</answer>") == 0.0  # no reasoning block
    assert r1_format_reward("<think>a</think><answer>5</answer><answer>6</answer>") == 0.0  # a tag twice
    assert r1_format_reward("<answer>5</answer><think>a</think>") == 0.0  # out of order


def test_score_rlpr_mixes_in_the_format_reward_at_the_releases_weight():
    """Worked example: r̂ = 0.5, 0.1, 0, 0.2 (as above); rollouts 0 and 2 are well formed.

    prob.py: score = (1 − 0.1) · r̂ + 0.1 · format = 0.55, 0.09, 0.1, 0.18.
    """
    probe = TableProbe({0: 0.9, 1: 0.5, 2: 0.2, 3: 0.6, 99: 0.4})
    group = rlpr_group(4)
    group.texts[0] = group.texts[2] = "<think>x</think><answer>5</answer>"
    hp = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4})
    assert hp["format_coefficient"] == 0.1
    score = METHODS["rlpr"].scorer(group, hp, probe)
    assert score.rewards == pytest.approx([0.55, 0.09, 0.1, 0.18])
    assert [e["format"] for e in score.extras] == [1.0, 0.0, 1.0, 0.0]
    paper = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4, "format_coefficient": 0.0})
    assert METHODS["rlpr"].scorer(group, paper, probe).rewards == pytest.approx([0.5, 0.1, 0.0, 0.2])


# ---------------------------------------------------------------- the release's repetition penalty


def test_a_ten_word_window_repeated_ten_times_is_penalised_as_the_release_detects_it():
    # RLPR's verl/utils/reward_score/repetition.py detect_repetition_with_hash(window_size=10,
    # max_repetitions_limit=10, as ray_trainer.py passes it): words split on whitespace and '_'; -1 when a window of
    # 10 words occurs 10 or more times, else 0
    from rl.methods.probability_reward import repetition_penalty

    loop = "one two three four five six seven eight nine ten "
    assert repetition_penalty(loop * 10) == -1.0  # the window "one ... ten" starts at words 0, 10, ..., 90: 10 times
    assert repetition_penalty(loop * 9 + "eleven") == 0.0  # 9 times
    assert repetition_penalty("_".join(["a"] * 19)) == -1.0  # 19 words by '_': the window of ten "a" occurs 10 times
    assert repetition_penalty("_".join(["a"] * 18)) == 0.0
    assert repetition_penalty("a b c") == 0.0  # no more words than the window


def test_score_rlpr_adds_the_penalty_to_a_rollouts_non_zero_reward():
    """Worked example: r̂ = 0.5, 0.1, 0, 0.2 (format weight 0); rollouts 0 and 2 repeat a window 20 times.

    ray_trainer.py adds the penalty where the reward tensor is non-zero: 0.5 − 1, 0.1, 0 (kept), 0.2.
    """
    probe = TableProbe({0: 0.9, 1: 0.5, 2: 0.2, 3: 0.6, 99: 0.4})
    group = rlpr_group(4)
    group.texts[0] = group.texts[2] = "a " * 29
    hp = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4, "format_coefficient": 0.0})
    assert hp["repetition_penalty"] is True
    score = METHODS["rlpr"].scorer(group, hp, probe)
    assert score.rewards == pytest.approx([-0.5, 0.1, 0.0, 0.2])
    assert [e["repetition_penalty"] for e in score.extras] == [-1.0, 0.0, -1.0, 0.0]
    assert score.metrics["rlpr/repetition_penalty_rate"] == 0.5
    off = dict(hp, repetition_penalty=False)
    assert METHODS["rlpr"].scorer(group, off, probe).rewards == pytest.approx([0.5, 0.1, 0.0, 0.2])


# ---------------------------------------------------------------- the adaptive standard-deviation filter


def release_filter(**values):
    hp = validate_hyperparameters("rlpr", values)
    return METHODS["rlpr"].step_filter(hp)


def test_the_filter_follows_an_ema_of_the_batchs_reward_std_from_the_step_the_release_starts_it():
    """RLPR's ray_trainer.py, filter_mode EMA (reproduce_qwen.sh: beta 0.5, ratio 0.99, EMA from step 6, filter
    from step 11). Each step has two groups; their Bessel-corrected reward stds are s and 3s, mean 2s.

    Steps 1-5: nothing. Steps 6-10: no filter; the step means 2s are collected. Step 11: EMA = their mean,
    threshold = 0.5 EMA. Step 12: EMA = 0.99 EMA + 0.01 (step 11's mean), threshold = 0.5 EMA.
    """
    f = release_filter()
    thresholds = {}
    for step in range(1, 13):
        s = 0.01 * step  # two rewards 0.5 ± d have a Bessel std of d·√2
        groups = [[0.5 - s / 2 ** 0.5, 0.5 + s / 2 ** 0.5], [0.5 - 3 * s / 2 ** 0.5, 0.5 + 3 * s / 2 ** 0.5]]
        skips, metrics = f.apply(step, groups)
        thresholds[step] = metrics.get("rlpr/std_threshold")
        if step < 11:
            assert skips == [False, False] and thresholds[step] is None
    ema = sum(2 * 0.01 * step for step in range(6, 11)) / 5  # 0.16
    assert thresholds[11] == pytest.approx(0.5 * ema)  # 0.08: step 11's stds 0.11 and 0.33 are both kept
    ema = 0.99 * ema + 0.01 * (2 * 0.11)
    assert thresholds[12] == pytest.approx(0.5 * ema)


def test_groups_below_the_threshold_are_left_out_and_the_share_is_reported():
    f = release_filter(std_filter_ema_start_step=1, std_filter_start_step=2)
    f.apply(1, [[0.0, 0.2], [0.0, 0.6]])  # stds 0.141 and 0.424: mean 0.283, threshold from step 2: 0.141
    skips, metrics = f.apply(2, [[0.5, 0.6], [0.0, 1.0]])  # std 0.0707 < 0.141 (left out), 0.707 kept
    assert skips == [True, False]
    assert metrics["rlpr/filtered_ratio"] == 0.5
    assert metrics["rlpr/std_threshold"] == pytest.approx(0.5 * (0.2 / 2 ** 0.5 + 0.6 / 2 ** 0.5) / 2)


def test_a_fixed_threshold_replaces_the_adaptive_one_and_beta_0_turns_the_filter_off():
    skips, metrics = release_filter(std_filter_threshold=0.1).apply(1, [[0.5, 0.52], [0.0, 1.0]])
    assert skips == [True, False] and metrics["rlpr/std_threshold"] == 0.1
    off = release_filter(std_filter_beta=0.0, std_filter_ema_start_step=1, std_filter_start_step=2)
    for step in (1, 2, 3):
        assert off.apply(step, [[0.5, 0.5]])[0] == [False]


def test_the_filters_state_survives_a_checkpoint():
    f = release_filter(std_filter_ema_start_step=1, std_filter_start_step=3)
    for step in (1, 2, 3):
        f.apply(step, [[0.0, 0.2 * step]])
    resumed = release_filter(std_filter_ema_start_step=1, std_filter_start_step=3)
    resumed.load_state_dict(f.state_dict())
    assert resumed.apply(4, [[0.0, 1.0]]) == f.apply(4, [[0.0, 1.0]])


def test_the_filter_must_collect_before_it_starts():
    from rl.params import FieldError
    with pytest.raises(FieldError) as refused:
        validate_hyperparameters("rlpr", {"std_filter_ema_start_step": 11, "std_filter_start_step": 11})
    assert refused.value.field == "std_filter_start_step"


def test_rlpr_and_darl_default_to_the_releases_batches_and_constant_schedule():
    for method in ("rlpr", "darl"):
        hp = validate_hyperparameters(method, {})
        assert (hp["prompts_per_step"], hp["prompts_per_update"], hp["n_votes"]) == (768, 192, 8)
        assert (hp["learning_rate"], hp["lr_schedule"], hp["warmup_ratio"]) == (1e-6, "constant", 0.0)
        assert (hp["std_filter_beta"], hp["std_filter_threshold"], hp["format_coefficient"]) == (0.5, None, 0.1)
        source = METHODS[method].defaults_source
        assert "reproduce_qwen.sh" in source and "768" in source and "constant" in source


def test_rlpr_and_darl_default_to_the_releases_weight_decay():
    # issue 38, defect 3: the release's AdamW (its verl's ppo_trainer.yaml actor.optim.weight_decay) is 0.01, which
    # neither its script nor its config overrides; Evolab's shared default is 0
    for method in ("rlpr", "darl"):
        assert validate_hyperparameters(method, {})["weight_decay"] == 0.01
        assert "weight decay 0.01" in METHODS[method].defaults_source


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
    hp = validate_hyperparameters("rlpr", {"n_votes": 3, "n_train": 3, "r_prime": "per_step"})
    extras = METHODS["rlpr"].scorer(group, hp, probe).extras
    assert extras[0]["r_ref_without_reasoning"] == pytest.approx(r_prime, abs=1e-5)
    # DARL scores the same ids: r(y*, z, x) equal to RLPR's r
    darl = METHODS["darl"].scorer(group, validate_hyperparameters("darl", {"n_votes": 3, "n_train": 3}), probe)
    assert [e["r_ref"] for e in darl.extras] == pytest.approx(expected, abs=1e-5)
