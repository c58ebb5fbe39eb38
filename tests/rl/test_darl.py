import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from rl.rewards.darl import answer_probability, answer_token_probabilities, darl_reward

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


def test_answer_probability_is_the_mean_probability_of_the_answer_tokens(model, tokenizer):
    prompt, reasoning, answer = "what is two plus two ?", " think add them answer :", " four 4"
    ids = tokenizer(prompt + reasoning + answer, add_special_tokens=False)["input_ids"]
    n_answer = len(tokenizer(answer, add_special_tokens=False)["input_ids"])
    with torch.no_grad():
        probabilities = torch.softmax(model(torch.tensor([ids])).logits[0], dim=-1)
    expected = [probabilities[t - 1, ids[t]].item() for t in range(len(ids) - n_answer, len(ids))]
    assert n_answer == 2
    assert answer_probability(model, tokenizer, prompt, reasoning, answer) == pytest.approx(sum(expected) / 2, rel=1e-5)


def test_answer_probability_is_a_probability(model, tokenizer):
    p = answer_probability(model, tokenizer, "what is two plus two ?", " think", " five")
    assert 0.0 < p < 1.0
    assert answer_probability(model, tokenizer, "what", " is", "") == 0.0


class UniformModel(torch.nn.Module):
    """Logits equal everywhere: every token has probability 1/vocab."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab = vocab
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids):
        return type("Output", (), {"logits": torch.zeros(*input_ids.shape, self.vocab)})()


def test_a_uniform_model_gives_one_over_the_vocabulary():
    assert answer_token_probabilities(UniformModel(8), [1, 2, 3], [4, 5]) == pytest.approx([0.125, 0.125])


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


def test_rlpr_reward_is_the_probability_of_the_reference(model, tokenizer):
    from rl.rewards.baselines import rlpr_reward

    args = ("what is two plus two ?", " think add them answer :", " four")
    assert rlpr_reward(model, tokenizer, *args) == answer_probability(model, tokenizer, *args)
