"""The methods' group scorers (rl/methods/) and the forward passes they rely on (rl.probes, rl.policy_probe)."""

import numpy as np
import pytest
import torch

from rl.groups import Group, reasoning_prefix
from rl.methods import METHODS, validate_hyperparameters
from tests.rl.policies import load_policy
from rl.probes import _chunks, answer_probabilities_from_ids, token_statistics
from rl.policy_probe import PolicyProbe


@pytest.fixture(scope="module")
def policy():
    model, tokenizer = load_policy("default")
    model.eval()
    return model, tokenizer


def make_group(texts, method="ttrl", reference=None, embeddings=None):
    """`baseline` 0.1: what the trainer would have scored before training for a method that asks
    (Method.prompt_baselines: RLPR's frozen r′); the other methods ignore it."""
    rule = METHODS[method].answer_rule
    g = len(texts)
    return Group(prompt_id="p", prompt="What is 2 + 3?", texts=list(texts), answers=[rule(t) for t in texts],
                 prompt_ids=[5, 6, 7], completion_ids=[[8, 9]] * g,
                 embeddings=np.eye(g) if embeddings is None else embeddings, reference=reference, baseline=0.1)


def test_batched_answer_probabilities_equal_a_direct_forward_pass_whatever_the_chunking(policy):
    model, tokenizer = policy
    prompt = "Tom has 3 apples and gets 4 more. How many apples does Tom have?"
    texts = [" 3 + 4 = 7. The answer is \\boxed{", " 3 + 4 = 8. The answer is \\boxed{", " I think \\boxed{"]
    answers = ["7", "8", "12"]
    prefixes = [tokenizer(prompt + t, add_special_tokens=False)["input_ids"] for t in texts]
    batched = answer_probabilities_from_ids(model, tokenizer, prefixes, answers, token_budget=40)
    single = []
    for prefix, answer in zip(prefixes, answers):  # DARL Eq. (5), one pair at a time
        answer_ids = tokenizer(answer, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            probabilities = torch.softmax(model(input_ids=torch.tensor([prefix + answer_ids])).logits[0].float(), -1)
        single.append(np.mean([probabilities[len(prefix) - 1 + i, t].item() for i, t in enumerate(answer_ids)]))
    assert batched == pytest.approx(single, abs=1e-5)
    assert answer_probabilities_from_ids(model, tokenizer, prefixes[:1], [""]) == [0.0]


def test_token_statistics_match_a_direct_forward_pass_whatever_the_chunking(policy):
    model, tokenizer = policy
    prompt_ids = tokenizer("What is 2 + 3?", add_special_tokens=False)["input_ids"]
    completions = [tokenizer(t, add_special_tokens=False)["input_ids"]
                   for t in [" 2 + 3 = 5. The answer is \\boxed{5}.", " 6", " 2 + 3 = 6."]]
    wide = token_statistics(model, [prompt_ids] * 3, completions, temperature=0.7)
    narrow = token_statistics(model, [prompt_ids] * 3, completions, temperature=0.7, token_budget=1)
    for a, b, ids in zip(wide, narrow, completions):
        assert len(a.top1) == len(a.entropy) == len(a.logprob) == len(ids)
        # float32 sums in different chunk shapes: relative agreement for log-probabilities far below 0
        assert a.logprob == pytest.approx(b.logprob, rel=1e-6, abs=1e-5)
        assert a.entropy == pytest.approx(b.entropy, abs=1e-5)
        assert all(t1 >= t2 >= 0 for t1, t2 in zip(a.top1, a.top2))
        assert all(h >= -1e-6 for h in a.entropy)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt_ids + completions[0]])).logits[0] / 0.7
    expected = torch.log_softmax(logits[len(prompt_ids) - 1:-1], -1).gather(1, torch.tensor(completions[0])[:, None])
    assert wide[0].logprob == pytest.approx(expected.squeeze(1).tolist(), abs=1e-5)


def test_chunks_respect_the_token_budget_and_keep_every_row():
    chunks = _chunks([10, 10, 30, 5, 5, 5], budget=30)
    assert [i for c in chunks for i in c] == list(range(6))
    assert chunks == [[0, 1], [2], [3, 4, 5]]


def test_the_reference_field_contract():
    assert METHODS["darl"].reference_field_for({"use_majority_as_reference": False}) == "reference"
    assert METHODS["darl"].reference_field_for({"use_majority_as_reference": True}) is None
    assert METHODS["rlpr"].reference_field_for({}) == "reference"
    assert METHODS["rlvr"].reference_field_for({}) == "label"
    label_free = [m for m in METHODS.values() if m.label_free]
    assert all(m.reference_field_for({}) is None for m in label_free)
    assert METHODS["darl"].to_json()["reference_field"] == "reference"


def test_reasoning_prefix_ends_where_the_final_answer_starts():
    assert reasoning_prefix("a \\boxed{1} then \\boxed{2}.") == "a \\boxed{1} then \\boxed{"
    assert reasoning_prefix("no answer") == "no answer \\boxed{"
    assert reasoning_prefix("<think> 7 </think> <answer>7</answer>", "<answer>") == "<think> 7 </think> <answer>"


@pytest.mark.parametrize("name", sorted(name for name, m in METHODS.items() if m.search_extras))
def test_every_search_extra_is_a_number_its_methods_scorer_writes_on_each_rollout(policy, name):
    # The search orders a run by these through an index of the rollouts that carry them
    # (webapp/explorer/search_indexes.py): a name the scorer never writes would order nothing.
    method = METHODS[name]
    texts = [f" 2 + 3 = {a}. <answer>{a}</answer> \\boxed{{{a}}}" for a in (5, 5, 5, 6)]
    embeddings = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    hp = validate_hyperparameters(name, {"n_votes": 4, "n_train": 4})
    score = method.scorer(make_group(texts, name, reference="5", embeddings=embeddings), hp,
                          PolicyProbe(*policy, temperature=1.0))
    for extra in score.extras:
        for key in method.search_extras:
            assert isinstance(extra[key], float | int) and not isinstance(extra[key], bool), (key, extra)
