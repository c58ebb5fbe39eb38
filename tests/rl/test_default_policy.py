"""The small default policy in rl/assets/: loads offline, has a chat template, answers in \\boxed{}
under the step-by-step system prompt and in <think>/<answer> under DARL's, and is right often
enough, but not too often, under both, for majority voting to carry signal."""

import json
import re

import pytest
import torch

from rl.answers import extract_boxed
from rl.arithmetic import ANSWER_FORMATS, CHALLENGER_PROMPT, synthetic_problems
from rl.policy import (DEFAULT_POLICY_DIR, SAMPLE_PATH, ModelPathError, heldout_problems,
                       resolve_model_path)
from rl.prompts import (STEP_BY_STEP_SYSTEM_PROMPT, THINK_ANSWER_SYSTEM_PROMPT, encode_prompt, extract_think_answer,
                        format_prompt)
from rl.methods.r_zero import extract_question
from tests.rl.policies import load_policy

PAPER_FORMATS = ["step_by_step", "think_answer"]


@pytest.fixture(scope="module")
def policy():
    torch.manual_seed(0)
    return load_policy("default")


def sample(model, tokenizer, prompts, n, temperature, max_new_tokens=64):
    """`n` completions per prompt text, tokenized as TRL does (special tokens on), left-padded."""
    batch = tokenizer([p for p in prompts for _ in range(n)], return_tensors="pt", padding=True)
    kwargs = {"do_sample": True, "temperature": temperature, "top_k": 0} if temperature else {"do_sample": False}
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id, **kwargs)
    return tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)


def test_the_default_policy_has_a_chat_template_that_opens_the_assistant_turn(policy):
    _, tokenizer = policy
    messages = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) == \
        "<s><|system|>S\n<|user|>U\n<|assistant|>"
    assert tokenizer.apply_chat_template(messages + [{"role": "assistant", "content": " A"}], tokenize=False) == \
        "<s><|system|>S\n<|user|>U\n<|assistant|> A</s>"
    # the system prompts were in the BPE's corpus (as the template writes them, newline included): each adds a
    # token or two to a formatted prompt, which stays as short as the bare problem
    problem = heldout_problems(1)[0]["prompt"]
    bare = len(encode_prompt(tokenizer, format_prompt(tokenizer, problem, None)))
    for system in (STEP_BY_STEP_SYSTEM_PROMPT, THINK_ANSWER_SYSTEM_PROMPT):
        assert len(encode_prompt(tokenizer, format_prompt(tokenizer, problem, system))) <= bare + 3


@pytest.mark.parametrize("fmt", PAPER_FORMATS + ["plain"])
def test_the_default_policy_loads_offline_and_answers_in_the_format_of_the_system_prompt(policy, fmt):
    model, tokenizer = policy
    answer_format = ANSWER_FORMATS[fmt]
    prompt = format_prompt(tokenizer, "Sam has 23 apples and buys 45 more. How many apples does Sam have now?",
                           answer_format.system)
    (text,) = sample(model, tokenizer, [prompt], 1, temperature=None)
    answer = answer_format.extract(text)
    assert answer is not None and answer.isdigit(), text
    if fmt == "think_answer":
        assert re.fullmatch(r" <think> .+ </think> <answer>\d+</answer>", text), text
        assert extract_boxed(text) is None
    else:
        assert "<answer>" not in text and text.endswith("The answer is \\boxed{" + answer + "}."), text


def test_its_recorded_pass_at_1_leaves_room_for_majority_voting_under_both_system_prompts():
    evaluation = json.loads((DEFAULT_POLICY_DIR / "evaluation.json").read_text())
    for fmt in PAPER_FORMATS:
        assert 0.2 <= evaluation["pass@1_temperature_1.0"][fmt] <= 0.8, fmt
        assert evaluation["formats"][fmt]["system_prompt"] == ANSWER_FORMATS[fmt].system
    assert evaluation["problems"] >= 200 and evaluation["samples_per_problem"] >= 4


@pytest.mark.parametrize("fmt", PAPER_FORMATS)
def test_a_quick_remeasure_agrees_with_the_recorded_pass_at_1(policy, fmt):
    model, tokenizer = policy
    answer_format = ANSWER_FORMATS[fmt]
    torch.manual_seed(1)
    problems = heldout_problems(32)
    prompts = [format_prompt(tokenizer, p["prompt"], answer_format.system) for p in problems]
    texts = sample(model, tokenizer, prompts, 4, temperature=1.0)
    answers = [answer_format.extract(t) for t in texts]
    correct = [a == p["answer"] for a, p in zip(answers, [p for p in problems for _ in range(4)])]
    measured = sum(correct) / len(correct)
    recorded = json.loads((DEFAULT_POLICY_DIR / "evaluation.json").read_text())["pass@1_temperature_1.0"][fmt]
    assert 0.2 <= measured <= 0.8, measured
    assert abs(measured - recorded) < 0.2, (measured, recorded)
    assert sum(a is not None for a in answers) / len(answers) > 0.9  # it keeps the format's answer


def test_asked_to_set_a_problem_it_writes_one_between_question_tags(policy):
    model, tokenizer = policy
    torch.manual_seed(2)
    texts = sample(model, tokenizer, [format_prompt(tokenizer, CHALLENGER_PROMPT, None)], 16, temperature=1.0,
                   max_new_tokens=96)
    assert sum(extract_question(t) is not None for t in texts) >= 12, texts


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
        assert extract_think_answer(p["think_completion"]) == p["answer"]
        assert p["think_completion"] == f" <think> {p['completion'].split(' The answer')[0].strip()} </think> " \
                                       f"<answer>{p['answer']}</answer>"


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


def test_a_policy_is_trained_with_fp32_weights_even_from_a_bf16_checkpoint(tmp_path):
    # AdamW on bf16 weights rounds the papers' 5e-7 updates away; bf16 is the GPU's compute type only
    import torch
    from transformers import AutoModelForCausalLM

    from rl.policy import DEFAULT_POLICY_DIR, load_trainable_model

    AutoModelForCausalLM.from_pretrained(DEFAULT_POLICY_DIR, dtype=torch.bfloat16).save_pretrained(tmp_path)
    assert {p.dtype for p in AutoModelForCausalLM.from_pretrained(tmp_path, dtype="auto").parameters()} == \
        {torch.bfloat16}
    assert {p.dtype for p in load_trainable_model(tmp_path).parameters()} == {torch.float32}
