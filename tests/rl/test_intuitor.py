"""Intuitor / RLIF self-certainty (Zhao et al. 2025, arXiv 2505.19590, Eq. (4)): the policy probe's per-token
KL(U ‖ p) (rl.probes.token_statistics) and the method's reward, their mean (rl/methods/intuitor.py)."""

import math

import numpy as np
import pytest
import torch

from rl.methods.intuitor import self_certainty_reward
from rl.probes import SELF_CERTAINTY_TEMPERATURE, TokenStatistics, token_statistics


def kl_uniform(p):
    """Eq. (4) written out: −(1/|V|) Σ_j log(|V| · p_j)."""
    p = np.asarray(p, dtype=np.float64)
    return float(-np.mean(np.log(len(p) * p)))


class _FixedLogits(torch.nn.Module):
    """A 'model' whose logits at every position are a given row."""

    def __init__(self, row):
        super().__init__()
        self.row = torch.tensor(np.asarray(row, dtype=np.float32))
        self.dummy = torch.nn.Parameter(torch.zeros(1))

    def forward(self, input_ids, attention_mask=None):
        class Out:
            pass

        out = Out()
        out.logits = self.row.expand(input_ids.size(0), input_ids.size(1), -1).clone()
        return out


def self_certainty(logits, temperature=1.0):
    """KL(U ‖ softmax(logits)) as the probe computes it for a token predicted from these logits (float32)."""
    return token_statistics(_FixedLogits(logits), [[1]], [[0]], temperature=temperature)[0].self_certainty[0]


def test_a_uniform_distribution_has_zero_self_certainty():
    assert self_certainty(np.zeros(5)) == pytest.approx(0.0, abs=1e-6)
    assert self_certainty([3.7] * 1000) == pytest.approx(0.0, abs=1e-6)  # any constant row is uniform


def test_worked_example_against_equation_4():
    # p = (0.7, 0.1, 0.1, 0.1), |V| = 4: −¼ [log 2.8 + 3 log 0.4] = 0.42981...
    p = [0.7, 0.1, 0.1, 0.1]
    expected = -(math.log(2.8) + 3 * math.log(0.4)) / 4
    assert expected == pytest.approx(0.429813, abs=1e-6)
    assert self_certainty(np.log(p)) == pytest.approx(expected, abs=1e-6)  # log-probabilities are logits
    assert self_certainty(np.log(p) + 11.0) == pytest.approx(expected, abs=1e-5)  # shift-invariant
    assert kl_uniform(p) == pytest.approx(expected, abs=1e-12)


def test_one_hot_ish_distributions_are_far_from_uniform():
    # one logit c above |V| − 1 zeros: KL(U ‖ p) = log(e^c + |V| − 1) − c/|V| − log|V| (closed form).
    vocab, c = 1000, 50.0
    logits = np.zeros(vocab)
    logits[7] = c
    closed_form = math.log(math.exp(c) + vocab - 1) - c / vocab - math.log(vocab)
    assert self_certainty(logits) == pytest.approx(closed_form, rel=1e-5)
    # Mode-seeking (paper Sec. 3.3): unlike KL(p ‖ U) = log|V| − H(p), which tends to log|V| for a one-hot p,
    # KL(U ‖ p) is unbounded. p_max = 1 − δ, the rest δ/(|V|−1):
    # KL = ((|V|−1)/|V|) log((|V|−1)/δ) − log(1−δ)/|V| − log|V|
    values = []
    for delta in (1e-2, 1e-4, 1e-8):
        p = np.full(vocab, delta / (vocab - 1))
        p[0] = 1 - delta
        value = self_certainty(np.log(p))
        closed_form = ((vocab - 1) / vocab * math.log((vocab - 1) / delta) - math.log(1 - delta) / vocab
                       - math.log(vocab))
        assert value == pytest.approx(closed_form, rel=1e-5) and closed_form == pytest.approx(kl_uniform(p), rel=1e-9)
        values.append(value)
    assert values == sorted(values) and values[-1] > 2 * math.log(vocab)  # past log|V| and still growing
    assert values[0] == pytest.approx(4.592668, abs=1e-4)  # δ = 0.01 is still below log 1000 = 6.9078


def test_the_released_code_drops_the_constant_log_v():
    # intuitor_trainer.py / verl torch_functional.py: logsumexp(z) − mean(z) = Eq. (4) + log|V|
    rng = np.random.default_rng(0)
    for z in rng.normal(size=(3, 50)):
        code = np.log(np.exp(z).sum()) - z.mean()
        assert self_certainty(z) == pytest.approx(code - math.log(50), abs=1e-5)


def test_self_certainty_is_at_temperature_one_whatever_the_sampling_temperature():
    z = np.array([0.0, 1.0, 2.0])
    assert SELF_CERTAINTY_TEMPERATURE == 1.0
    assert self_certainty(z, temperature=0.5) == pytest.approx(self_certainty(z), abs=1e-6) and self_certainty(z) > 0
    assert self_certainty(z) == pytest.approx(kl_uniform(np.exp(z) / np.exp(z).sum()), abs=1e-6)


def test_the_reward_is_the_per_token_mean():
    # Eq. (4): (1/|o|) Σ_i KL_i. Worked example: (0.2 + 0.4 + 0.9) / 3 = 0.5
    assert self_certainty_reward([0.2, 0.4, 0.9]) == pytest.approx(0.5)
    assert self_certainty_reward(np.array([1.25])) == 1.25
    assert self_certainty_reward([]) == 0.0  # released code: an empty completion scores 0


# --- rl.probes.token_statistics: the same number from the policy's forward pass --------------------------

@pytest.fixture(scope="module")
def policy():
    from tests.rl.policies import load_policy

    model, tokenizer = load_policy("default")
    model.eval()
    return model, tokenizer


def test_the_probe_matches_a_direct_computation_on_the_default_policy(policy):
    model, tokenizer = policy
    assert SELF_CERTAINTY_TEMPERATURE == 1.0
    prompt_ids = tokenizer("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    completions = [tokenizer(t, add_special_tokens=False)["input_ids"]
                   for t in [" 2 + 3 = 5. The answer is \\boxed{5}.", " 6", " 2 + 3 = 6."]]
    # sampled at 0.7: top1/entropy/logprob at 0.7, self-certainty on the raw logits (T = 1)
    stats = token_statistics(model, [prompt_ids] * 3, completions, temperature=0.7)
    narrow = token_statistics(model, [prompt_ids] * 3, completions, temperature=0.7, token_budget=1)
    at_one = token_statistics(model, [prompt_ids] * 3, completions, temperature=1.0)
    for k, ids in enumerate(completions):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([prompt_ids + ids])).logits[0].float()
        rows = logits[len(prompt_ids) - 1 : -1].double()  # the logits that predicted each completion token
        vocab = rows.size(-1)
        assert vocab == model.get_output_embeddings().weight.size(0)  # |V| = the output layer's width
        direct = (-(torch.log_softmax(rows, -1) + math.log(vocab)).mean(-1)).tolist()  # −(1/|V|) Σ log(|V| p)
        assert len(stats[k].self_certainty) == len(ids)
        assert stats[k].self_certainty == pytest.approx(direct, abs=1e-4)
        assert narrow[k].self_certainty == pytest.approx(stats[k].self_certainty, abs=1e-5)
        assert at_one[k].self_certainty == pytest.approx(stats[k].self_certainty, abs=1e-4)  # both code paths
        assert all(v >= 0.0 for v in stats[k].self_certainty)
        # the other fields are unchanged: still at the sampling temperature
        expected_logp = torch.log_softmax(rows / 0.7, -1).gather(1, torch.tensor(ids)[:, None]).squeeze(1)
        assert stats[k].logprob == pytest.approx(expected_logp.tolist(), abs=1e-4)
        assert len(stats[k].top1) == len(stats[k].top2) == len(stats[k].entropy) == len(ids)
    reward = self_certainty_reward(stats[0].self_certainty)
    assert reward == pytest.approx(float(np.mean(stats[0].self_certainty))) and reward > 0


def test_the_probe_on_hand_made_logits():
    vocab = 64
    uniform = token_statistics(_FixedLogits([0.5] * vocab), [[1, 2]], [[3, 4, 5]], temperature=0.9)[0]
    assert uniform.self_certainty == pytest.approx([0.0] * 3, abs=1e-6)
    assert uniform.entropy == pytest.approx([math.log(vocab)] * 3, abs=1e-5)
    c = 30.0
    row = [0.0] * vocab
    row[3] = c
    peaked = token_statistics(_FixedLogits(row), [[1, 2]], [[3, 3]], temperature=0.9)[0]
    closed_form = math.log(math.exp(c) + vocab - 1) - c / vocab - math.log(vocab)  # at T = 1, not 0.9
    assert peaked.self_certainty == pytest.approx([closed_form] * 2, rel=1e-5)
    assert closed_form == pytest.approx(c * (1 - 1 / vocab) - math.log(vocab), abs=1e-6)
    assert token_statistics(_FixedLogits(row), [[1]], [[]])[0] == TokenStatistics([], [], [], [], [])


def test_token_statistics_keep_their_positional_constructor():
    # callers and older tests build TokenStatistics with four lists; self_certainty defaults to empty
    stats = TokenStatistics([0.9], [0.1], [0.3], [-0.1])
    assert stats.self_certainty == []


# ---------------------------------------------------------------- the method record (rl/methods/intuitor.py)


class _StatsProbe:
    def __init__(self, per_rollout):
        self.per_rollout = per_rollout

    def token_statistics(self, group):
        return [TokenStatistics([1.0] * len(v), [0.0] * len(v), [0.0] * len(v), [0.0] * len(v), list(v))
                for v in self.per_rollout]


def _group(answers):
    from rl.groups import Group
    return Group(prompt_id="p", prompt="q", texts=[f"\\boxed{{{a}}}" for a in answers], answers=list(answers),
                 prompt_ids=[1], completion_ids=[[2, 3]] * len(answers), embeddings=np.eye(len(answers)))


def test_the_intuitor_scorer_rewards_each_rollout_with_its_mean_self_certainty():
    from rl.methods import METHODS, validate_hyperparameters

    method = METHODS["intuitor"]
    score = method.scorer(_group(["4", "4", "5"]), validate_hyperparameters("intuitor", {}),
                          _StatsProbe([[1.0, 3.0], [0.5], [2.0, 2.0, 5.0]]))
    assert score.rewards == pytest.approx([2.0, 0.5, 3.0])
    assert [e["self_certainty"] for e in score.extras] == pytest.approx([2.0, 0.5, 3.0])
    assert score.metrics["intuitor/self_certainty_mean"] == pytest.approx(5.5 / 3)
    assert score.majority_answer == "4"  # reported, never part of the reward


def test_intuitor_uses_its_papers_settings():
    from rl.methods import METHODS, validate_hyperparameters

    hp = validate_hyperparameters("intuitor", {})
    # Intuitor §4 / Table 7: G = 7, 128 problems per update, T = 0.9, lr 3e-6 cosine with 10% warmup, β 0.005
    assert (hp["n_votes"], hp["n_train"], hp["prompts_per_step"], hp["prompts_per_update"]) == (7, 7, 128, 128)
    assert (hp["temperature"], hp["learning_rate"], hp["lr_schedule"], hp["warmup_ratio"], hp["kl_coef"]) == (
        0.9, 3e-6, "cosine", 0.1, 0.005)
    assert METHODS["intuitor"].label_free and METHODS["intuitor"].reference_field_for(hp) is None
