"""DARL (rl/methods/darl.py): Eq. (3)–(6) on the reference probabilities, and Eq. (5), the mean answer-token
probability, as the policy probe computes it (rl.probes.answer_probabilities_from_ids)."""

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from rl.groups import Group
from rl.methods import METHODS, validate_hyperparameters
from rl.methods.darl import darl_reward
from tests.rl.policies import load_policy
from rl.policy_probe import PolicyProbe
from rl.probes import answer_probabilities_from_ids

WORDS = ["<unk>", "what", "is", "two", "plus", "two", "?", "think", "add", "them", "four", "4", "five", "answer", ":"]


@pytest.fixture(scope="module")
def tokenizer():
    vocab = {word: i for i, word in enumerate(dict.fromkeys(WORDS))}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    return PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>")


@pytest.fixture(scope="module")
def model(tokenizer):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


def ids(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_answer_probability_is_the_mean_probability_of_the_answer_tokens(model, tokenizer):
    # DARL Eq. (5): r(y, z, x) = (1/|y|) Σ_i p_θ(y_i | x, z, y_<i)
    prompt, reasoning, answer = "what is two plus two ?", " think add them answer :", " four 4"
    sequence = ids(tokenizer, prompt + reasoning + answer)
    n_answer = len(ids(tokenizer, answer))
    with torch.no_grad():
        probabilities = torch.softmax(model(torch.tensor([sequence])).logits[0], dim=-1)
    expected = [probabilities[t - 1, sequence[t]].item() for t in range(len(sequence) - n_answer, len(sequence))]
    assert n_answer == 2
    prefix = ids(tokenizer, prompt + reasoning)
    assert answer_probabilities_from_ids(model, tokenizer, [prefix], [answer]) == pytest.approx([sum(expected) / 2],
                                                                                               rel=1e-5)


def test_answer_probability_is_a_probability(model, tokenizer):
    p, empty = answer_probabilities_from_ids(model, tokenizer, [ids(tokenizer, "what is two plus two ? think")] * 2,
                                             [" five", ""])
    assert 0.0 < p < 1.0
    assert empty == 0.0  # no answer token to score


class UniformModel(torch.nn.Module):
    """Logits equal everywhere: every token has probability 1/vocab."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None):
        return type("Output", (), {"logits": torch.zeros(*input_ids.shape, self.vocab)})()


def test_a_uniform_model_gives_one_over_the_vocabulary(tokenizer):
    vocab = len(tokenizer)
    assert answer_probabilities_from_ids(UniformModel(vocab), tokenizer, [[1, 2, 3]], [" four 4"]) == pytest.approx(
        [1 / vocab])


def test_darl_rewards_a_small_deviation_from_the_reference():
    # Δr = 0.05 ≤ r_ref/γ = 0.08: 0.99·0.8 + 0.01·0.05
    assert darl_reward(0.8, 0.75) == pytest.approx(0.7925)


def test_darl_ignores_a_deviation_beyond_the_dynamic_threshold():
    assert darl_reward(0.8, 0.6) == pytest.approx(0.792)  # Δr = 0.2 > 0.08


def test_darl_gives_no_bonus_when_the_generated_answer_is_more_likely():
    assert darl_reward(0.8, 0.9) == pytest.approx(0.792)  # Δr = max(−0.1, 0) = 0


def test_a_static_tau_replaces_the_dynamic_threshold():
    assert darl_reward(0.8, 0.6, tau=0.3) == pytest.approx(0.794)
    assert darl_reward(0.8, 0.75, tau=0.01) == pytest.approx(0.792)


def test_gamma_scales_the_dynamic_threshold():
    assert darl_reward(0.8, 0.6, gamma=2.0) == pytest.approx(0.794)  # 0.2 ≤ 0.4


# ---------------------------------------------------------------- the scorer


class TableProbe:
    """r(y, z_j, x) from a table keyed by (rollout j, answer y): rollout j's reasoning prefix is [j]."""

    def __init__(self, table):
        self.table = table

    def reasoning_prefix_ids(self, group, opener):
        return [[j] for j in range(len(group.texts))]

    def answer_probabilities_from_ids(self, prefix_ids, answers):
        return [self.table[p[0], answer] for p, answer in zip(prefix_ids, answers)]


def darl_group(answers, reference="4"):
    texts = [f"<think>x</think><answer>{a}</answer>" if a is not None else "no answer" for a in answers]
    return Group(prompt_id="p", prompt="q", texts=texts, answers=list(answers), prompt_ids=[1],
                 completion_ids=[[2]] * len(answers), embeddings=np.eye(len(answers)), reference=reference)


def test_the_scorer_gives_the_bonus_only_within_the_threshold():
    """DARL Eq. (3)–(6) on the probe's r_ref = r(y*, z, x) and r_gen = r(y, z, x), β = 0.01, γ = 10:

    #0: r_ref 0.8, its answer 5 at 0.75: Δr = 0.05 ≤ 0.08 → 0.99 · 0.8 + 0.01 · 0.05 = 0.7925 (bonus)
    #1: r_ref 0.8, its answer 6 at 0.6:  Δr = 0.2 > 0.08 → 0.792
    #2: r_ref 0.5, no answer: r_gen = 0, Δr = 0.5 > 0.05 → 0.495
    """
    probe = TableProbe({(0, "4"): 0.8, (1, "4"): 0.8, (2, "4"): 0.5, (0, "5"): 0.75, (1, "6"): 0.6})
    hp = validate_hyperparameters("darl", {"n_votes": 3, "n_train": 3, "format_coefficient": 0.0})
    result = METHODS["darl"].scorer(darl_group(["5", "6", None]), hp, probe)
    assert result.rewards == pytest.approx([0.7925, 0.792, 0.495])
    assert [e["r_gen"] for e in result.extras] == pytest.approx([0.75, 0.6, 0.0])
    assert [e["diversity_bonus"] for e in result.extras] == [True, False, False]
    assert result.metrics["darl/bonus_ratio"] == pytest.approx(1 / 3)
    # a static τ = 0.3 replaces r(y*)/γ: #1's Δr = 0.2 now earns the bonus, 0.792 + 0.002
    assert METHODS["darl"].scorer(darl_group(["5", "6", None]), dict(hp, tau=0.3), probe).rewards == pytest.approx(
        [0.7925, 0.794, 0.495])


@pytest.fixture(scope="module")
def policy():
    model, tokenizer = load_policy("default")
    model.eval()
    return model, tokenizer


def test_with_the_majority_as_reference_the_reference_field_is_ignored(policy):
    probe = PolicyProbe(*policy, temperature=1.0)
    texts = [" <think> 2 + 3 = 5. </think> <answer>5</answer>"] * 3 + [" <think> 2 + 3 = 6. </think> <answer>6</answer>"]
    rule = METHODS["darl"].answer_rule

    def group(reference):
        return Group(prompt_id="p", prompt="What is 2 + 3?", texts=texts, answers=[rule(t) for t in texts],
                     prompt_ids=[5, 6, 7], completion_ids=[[8, 9]] * 4, embeddings=np.eye(4), reference=reference)

    hp = validate_hyperparameters("darl", {"n_votes": 4, "n_train": 4, "use_majority_as_reference": True})
    a = METHODS["darl"].scorer(group("5"), hp, probe)
    b = METHODS["darl"].scorer(group("999"), hp, probe)
    assert a.rewards == b.rewards
    assert {"darl/r_ref_mean", "darl/r_gen_mean"} <= set(a.metrics)
