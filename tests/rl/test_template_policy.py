"""The template policy in rl/assets/template_policy/ (scripts/train_template_policy.py): it loads offline, solves
three-change problems with several distinct templates under the step-by-step system prompt, its answers parse,
and it is right on about 30% of its samples at temperature 1.0."""

import json
import re

import pytest
import torch

from rl.answers import extract_boxed
from tests.rl.policies import load_policy
from rl.prompts import STEP_BY_STEP_SYSTEM_PROMPT, format_prompt
from scripts.experiments.templates import (TEMPLATE_POLICY_DIR, TEMPLATES, heldout_template_problems, pass_at_k,
                                           solve, template_of, template_problems)


@pytest.fixture(scope="module")
def policy():
    return load_policy(str(TEMPLATE_POLICY_DIR))


@pytest.fixture(scope="module")
def evaluation():
    return json.loads((TEMPLATE_POLICY_DIR / "evaluation.json").read_text())


def sample(model, tokenizer, prompts, n, temperature=1.0, max_new_tokens=64):
    batch = tokenizer([p for p in prompts for _ in range(n)], return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                             do_sample=True, temperature=temperature, top_k=0)
    return tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)


def test_each_template_is_recognised_and_every_step_it_writes_is_right():
    for problem in template_problems(300, seed=3):
        for name in TEMPLATES:
            text = solve(problem["start"], problem["changes"], name)
            assert template_of(text) == name, text
            for a, op, b, result in re.findall(r"(\d+) ([-+]) (\d+) = (\d+)", text):
                assert eval(f"{a} {op} {b}") == int(result), text
            assert extract_boxed(text) == problem["answer"]
    assert template_of(" 37 + 31 = 68. The answer is \\boxed{68}") is None  # unfinished
    assert template_of("Start with 5. The answer is \\boxed{5}.") is None and template_of(None) is None


def test_held_out_problems_are_deterministic_and_not_in_the_training_stream():
    heldout = heldout_template_problems(64)
    assert heldout == heldout_template_problems(64) and len({p["prompt"] for p in heldout}) == 64
    train = template_problems(2000, seed=1, exclude={p["prompt"] for p in heldout})
    assert not {p["prompt"] for p in heldout} & {p["prompt"] for p in train}


def test_the_policy_samples_at_least_three_templates_and_its_answers_parse(policy):
    model, tokenizer = policy
    torch.manual_seed(0)
    problems = heldout_template_problems(8)
    prompts = [format_prompt(tokenizer, p["prompt"], STEP_BY_STEP_SYSTEM_PROMPT) for p in problems]
    texts = sample(model, tokenizer, prompts, 8)
    templates = [template_of(t) for t in texts]
    assert set(TEMPLATES) <= set(templates), texts
    assert sum(t is not None for t in templates) / len(texts) >= 0.9, texts
    answers = [extract_boxed(t) for t in texts]
    assert sum(a is not None and a.lstrip("-").isdigit() for a in answers) / len(texts) >= 0.9, texts


def test_its_recorded_pass_at_1_is_about_a_third_and_every_template_has_a_fair_share(evaluation):
    assert 0.2 <= evaluation["pass@1_temperature_1.0"] <= 0.45
    assert evaluation["pass@1_temperature_1.0"] < evaluation["pass@16_temperature_1.0"] <= 1.0
    assert evaluation["samples_per_problem"] >= 32 and evaluation["problems"] >= 200
    assert evaluation["system_prompt"] == STEP_BY_STEP_SYSTEM_PROMPT
    assert evaluation["answer_rate_temperature_1.0"] >= 0.9
    for name in TEMPLATES:
        assert 0.2 <= evaluation["template_shares"][name] <= 0.47, evaluation["template_shares"]
    assert evaluation["command"].startswith("HF_HUB_OFFLINE=1 .venv/bin/python scripts/train_template_policy.py")
    assert isinstance(evaluation["train_steps"], int) and isinstance(evaluation["seed"], int)


def test_pass_at_k_is_the_unbiased_estimate():
    assert pass_at_k(32, 0, 16) == 0.0 and pass_at_k(32, 17, 16) == 1.0
    assert pass_at_k(32, 1, 16) == pytest.approx(0.5)
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        pass_at_k(8, 0, 16)  # fewer samples than k: no estimate


def test_the_assets_are_small_safetensors():
    files = {p.name: p.stat().st_size for p in TEMPLATE_POLICY_DIR.iterdir()}
    assert {"model.safetensors", "tokenizer.json", "config.json", "evaluation.json"} <= set(files)
    assert sum(files.values()) < 8 * 2**20
