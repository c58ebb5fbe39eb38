"""The small default policy in rl/assets/: loads offline, answers in \\boxed{}, and is
right often enough, but not too often, for majority voting to carry signal."""

import json
import re

import pytest
import torch

from rl.answers import extract_boxed
from rl.arithmetic import synthetic_problems
from rl.policy import (DEFAULT_POLICY_DIR, SAMPLE_PATH, ModelPathError, heldout_problems, load_policy,
                       resolve_model_path)


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return load_policy("default")


def sample(model, tokenizer, prompts, n, temperature):
    batch = tokenizer([p for p in prompts for _ in range(n)], return_tensors="pt", padding=True)
    kwargs = {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature else {"do_sample": False}
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=64, pad_token_id=tokenizer.pad_token_id, **kwargs)
    return tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)


def test_the_default_policy_loads_offline_and_answers_in_a_box(policy):
    model, tokenizer = policy
    (text,) = sample(model, tokenizer, ["Sam has 23 apples and buys 45 more. How many apples does Sam have now?"],
                     1, temperature=None)
    answer = extract_boxed(text)
    assert answer is not None and answer.isdigit(), text


def test_its_recorded_pass_at_1_leaves_room_for_majority_voting():
    evaluation = json.loads((DEFAULT_POLICY_DIR / "evaluation.json").read_text())
    assert 0.2 <= evaluation["pass@1_temperature_1.0"] <= 0.8
    assert evaluation["problems"] >= 200 and evaluation["samples_per_problem"] >= 4


def test_a_quick_remeasure_agrees_with_the_recorded_pass_at_1(policy):
    model, tokenizer = policy
    torch.manual_seed(1)
    problems = heldout_problems(32)
    texts = sample(model, tokenizer, [p["prompt"] for p in problems], 4, temperature=1.0)
    correct = [extract_boxed(t) == p["answer"] for t, p in zip(texts, [p for p in problems for _ in range(4)])]
    measured = sum(correct) / len(correct)
    recorded = json.loads((DEFAULT_POLICY_DIR / "evaluation.json").read_text())["pass@1_temperature_1.0"]
    assert 0.1 <= measured <= 0.9
    assert abs(measured - recorded) < 0.25, (measured, recorded)
    assert sum(extract_boxed(t) is not None for t in texts) / len(texts) > 0.9  # it keeps the answer format


def test_the_assets_are_small_safetensors():
    files = {p.name: p.stat().st_size for p in DEFAULT_POLICY_DIR.iterdir()}
    assert "model.safetensors" in files and "tokenizer.json" in files
    assert sum(files.values()) < 8 * 2**20


def test_the_tokenizer_round_trips_any_text_and_ends_with_eos(policy):
    _, tokenizer = policy
    text = "Convert $(0,3)$ to polar: é, π, \\frac{1}{2}\n  done"
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    assert tokenizer.eos_token == "</s>" and tokenizer.pad_token == "<pad>"
    assert tokenizer.padding_side == "left"
    assert all(len(tokenizer(d)["input_ids"]) == 1 for d in "0123456789")  # one token per digit


def test_synthetic_problems_are_deterministic_distinct_and_correct():
    first, again, other = synthetic_problems(200, seed=7), synthetic_problems(200, seed=7), synthetic_problems(200, 8)
    assert first == again and first != other
    assert len({p["prompt"] for p in first}) == 200
    for p in first:
        equations = re.findall(r"(\d+) ([-+*]) (\d+) = (\d+)", p["completion"])
        assert equations
        for a, op, b, result in equations:  # every shown step of the working is right
            assert eval(f"{a} {op} {b}") == int(result)
        assert extract_boxed(p["completion"]) == p["answer"] == equations[-1][3]


def test_the_demo_sample_is_the_first_64_held_out_problems():
    rows = json.loads(SAMPLE_PATH.read_text())
    assert len(rows) == 64
    assert rows == [{"prompt": p["prompt"], "answer": p["answer"], "id": p["id"]} for p in heldout_problems(64)]


def test_resolve_model_path_accepts_default_and_rejects_a_folder_without_weights(tmp_path):
    assert resolve_model_path("default") == DEFAULT_POLICY_DIR
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelPathError, match="no weights"):
        resolve_model_path(str(tmp_path))
    with pytest.raises(ModelPathError, match="not a directory"):
        resolve_model_path(str(tmp_path / "missing"))
