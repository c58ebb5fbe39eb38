"""rl.prompts: the papers' system prompts, the chat/plain formatting, one BOS in what TRL generates from,
and DARL's <think>/<answer> answers."""

import copy
from types import SimpleNamespace

import pytest
from tokenizers.processors import TemplateProcessing
from transformers import AutoTokenizer
from trl import GRPOTrainer

from rl.policy import DEFAULT_POLICY_DIR
from rl.prompts import (PLAIN_SEPARATOR, STEP_BY_STEP_SYSTEM_PROMPT, THINK_ANSWER_SYSTEM_PROMPT, adds_bos_itself,
                        encode_prompt, extract_think_answer, format_messages, format_prompt)

PROBLEM = "Sam has 23 apples and buys 45 more. How many apples does Sam have now?"


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(DEFAULT_POLICY_DIR, local_files_only=True)


@pytest.fixture(scope="module")
def plain_tokenizer(tokenizer):
    """The default tokenizer without a chat template."""
    plain = copy.deepcopy(tokenizer)
    del plain.chat_template
    assert not getattr(plain, "chat_template", None)
    return plain


@pytest.fixture(scope="module")
def bos_adding_tokenizer(tokenizer):
    """The default tokenizer made Llama-like: it prepends BOS itself, and its chat template writes one too."""
    llama_like = copy.deepcopy(tokenizer)
    llama_like.backend_tokenizer.post_processor = TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tokenizer.bos_token_id)])
    assert llama_like("a")["input_ids"][0] == tokenizer.bos_token_id
    return llama_like


def trl_prompt_ids(tokenizer, prompts: list) -> list[list[int]]:
    """The prompt ids TRL 1.16's GRPOTrainer generates from, computed by its own code."""
    trainer = SimpleNamespace(processing_class=tokenizer, _is_vlm=False, environment_factories=None, tools=None,
                              chat_template=None, chat_template_kwargs={})
    prompt_ids, _, _ = GRPOTrainer._tokenize_prompts(trainer, prompts)
    return [list(ids) for ids in prompt_ids]


def test_the_system_prompts_are_the_papers_verbatim():
    assert STEP_BY_STEP_SYSTEM_PROMPT == "Please reason step by step, and put your final answer within \\boxed{}."
    assert THINK_ANSWER_SYSTEM_PROMPT.startswith("A conversation between User and Assistant. The user asks a "
                                                 "question, and the Assistant solves it. The assistant first thinks")
    assert THINK_ANSWER_SYSTEM_PROMPT.endswith(
        "i.e., <think> reasoning process here </think> <answer> answer here </answer>.")
    assert "  " not in THINK_ANSWER_SYSTEM_PROMPT


@pytest.mark.parametrize("system", [STEP_BY_STEP_SYSTEM_PROMPT, THINK_ANSWER_SYSTEM_PROMPT])
def test_with_a_chat_template_the_system_prompt_is_the_system_message(tokenizer, system):
    text = format_prompt(tokenizer, PROBLEM, system)
    assert text == tokenizer.apply_chat_template(
        [{"role": "system", "content": system}, {"role": "user", "content": PROBLEM}],
        tokenize=False, add_generation_prompt=True)
    assert text == f"<s><|system|>{system}\n<|user|>{PROBLEM}\n<|assistant|>"  # the default policy's template


@pytest.mark.parametrize("system", [None, ""])
def test_with_a_chat_template_and_no_system_prompt_there_is_no_system_message(tokenizer, system):
    text = format_prompt(tokenizer, PROBLEM, system)
    assert text == "<s><|user|>" + PROBLEM + "\n<|assistant|>"
    assert "<|system|>" not in text


def test_without_a_chat_template_the_system_prompt_is_a_plain_prefix(plain_tokenizer):
    assert PLAIN_SEPARATOR == "\n\n"
    assert format_prompt(plain_tokenizer, PROBLEM, STEP_BY_STEP_SYSTEM_PROMPT) == \
        f"{STEP_BY_STEP_SYSTEM_PROMPT}\n\n{PROBLEM}\n"
    assert format_prompt(plain_tokenizer, PROBLEM, None) == PROBLEM
    assert format_prompt(plain_tokenizer, PROBLEM, "") == PROBLEM


def test_a_chat_style_prompt_keeps_its_own_system_message(tokenizer, plain_tokenizer):
    messages = [{"role": "system", "content": "Answer in French."}, {"role": "user", "content": PROBLEM}]
    assert format_messages(tokenizer, messages, STEP_BY_STEP_SYSTEM_PROMPT) == \
        f"<s><|system|>Answer in French.\n<|user|>{PROBLEM}\n<|assistant|>"
    assert format_messages(plain_tokenizer, messages, STEP_BY_STEP_SYSTEM_PROMPT) == f"Answer in French.\n\n{PROBLEM}\n"
    user_only = [{"role": "user", "content": PROBLEM}]
    assert format_messages(tokenizer, user_only, THINK_ANSWER_SYSTEM_PROMPT) == \
        format_prompt(tokenizer, PROBLEM, THINK_ANSWER_SYSTEM_PROMPT)


@pytest.mark.parametrize("system", [STEP_BY_STEP_SYSTEM_PROMPT, THINK_ANSWER_SYSTEM_PROMPT, None])
def test_trl_generates_from_exactly_one_bos_and_the_same_ids_as_its_chat_path(tokenizer, system):
    """TRL tokenizes a string prompt with special tokens on; the default tokenizer adds none, its template one BOS."""
    text = format_prompt(tokenizer, PROBLEM, system)
    (ids,) = trl_prompt_ids(tokenizer, [text])
    assert ids == encode_prompt(tokenizer, text)
    assert ids.count(tokenizer.bos_token_id) == 1 and ids[0] == tokenizer.bos_token_id
    assert not adds_bos_itself(tokenizer)
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": PROBLEM}]
    assert trl_prompt_ids(tokenizer, [messages]) == [ids]  # as if the prompt had been given as messages
    assert tokenizer.decode(ids, skip_special_tokens=True).endswith(PROBLEM + "\n")


def test_a_tokenizer_that_adds_bos_itself_does_not_get_a_second_one(bos_adding_tokenizer):
    tokenizer = bos_adding_tokenizer
    assert adds_bos_itself(tokenizer)
    text = format_prompt(tokenizer, PROBLEM, STEP_BY_STEP_SYSTEM_PROMPT)
    assert text.startswith("<|system|>")  # the template's BOS left to the tokenizer
    (ids,) = trl_prompt_ids(tokenizer, [text])
    assert ids.count(tokenizer.bos_token_id) == 1 and ids[0] == tokenizer.bos_token_id
    messages = [{"role": "system", "content": STEP_BY_STEP_SYSTEM_PROMPT}, {"role": "user", "content": PROBLEM}]
    assert trl_prompt_ids(tokenizer, [messages]) == [ids]
    # what rendering the template alone would have given TRL: two BOS
    rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert trl_prompt_ids(tokenizer, [rendered])[0][:2] == [tokenizer.bos_token_id] * 2


def test_a_plain_prefix_gets_the_bos_of_the_tokenizer_only(plain_tokenizer):
    text = format_prompt(plain_tokenizer, PROBLEM, STEP_BY_STEP_SYSTEM_PROMPT)
    (ids,) = trl_prompt_ids(plain_tokenizer, [text])
    assert plain_tokenizer.bos_token_id not in ids  # the default tokenizer adds none of its own
    assert plain_tokenizer.decode(ids) == text


@pytest.mark.parametrize("text, answer", [
    ("<think> 23 + 45 = 68. </think> <answer>68</answer>", "68"),
    ("<think>x</think><answer>  \\frac{1}{2} \n</answer>", "\\frac{1}{2}"),
    # a \boxed{} inside the answer is unwrapped, nesting respected
    ("<think>r</think> <answer>The answer is \\boxed{\\frac{\\sqrt{2}}{2}}.</answer>", "\\frac{\\sqrt{2}}{2}"),
    ("<answer>\\boxed{1} or rather \\boxed{{2}}</answer>", "{2}"),
    # several answers: the last complete one
    ("<think>first <answer>3</answer> no</think> <answer>4</answer> <answer>5</answer>", "5"),
    ("<answer>4</answer> then <answer>5", "4"),
    ("<answer>a <answer>b</answer>", "b"),
    # an unclosed box is kept as written
    ("<answer>\\boxed{7</answer>", "\\boxed{7"),
    # the <think> block is not required
    ("<answer>12</answer>", "12"),
])
def test_extract_think_answer_takes_the_last_answer(text, answer):
    assert extract_think_answer(text) == answer


@pytest.mark.parametrize("text", [
    None, "", "<think> 23 + 45 = 68. </think> The answer is \\boxed{68}.",  # no answer tags
    "<think> 23 + 45 = 68. </think> <answer>68",  # truncated before </answer>
    "68</answer>",  # no opening tag
    "<think>r</think> <answer>  </answer>", "<answer>\\boxed{}</answer>",  # empty answers
])
def test_extract_think_answer_is_none_without_a_complete_answer(text):
    assert extract_think_answer(text) is None
