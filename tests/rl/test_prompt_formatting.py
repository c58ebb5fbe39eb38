"""The trainer gives the policy each prompt as its paper does (DESIGN §6): chat template + the paper's system prompt."""

import json

import pytest
from transformers import AutoTokenizer

from rl.methods import METHODS
from rl.policy import DEFAULT_POLICY_DIR
from rl.prompts import STEP_BY_STEP_SYSTEM_PROMPT, THINK_ANSWER_SYSTEM_PROMPT, format_prompt
from rl.params import FieldError
from rl.run_config import formatted_prompt, read_prompts


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(DEFAULT_POLICY_DIR, local_files_only=True)


def test_a_boxed_answer_method_gets_the_step_by_step_system_prompt_through_the_chat_template(tokenizer):
    text = formatted_prompt(tokenizer, METHODS["evol_rl"], {"prompt": "What is 2 + 3?"})
    assert text == format_prompt(tokenizer, "What is 2 + 3?", STEP_BY_STEP_SYSTEM_PROMPT)
    assert STEP_BY_STEP_SYSTEM_PROMPT in text and text.index(STEP_BY_STEP_SYSTEM_PROMPT) < text.index("What is 2 + 3?")
    assert text != "What is 2 + 3?"


def test_darl_and_rlpr_get_their_think_answer_template_and_read_answer_tags(tokenizer):
    for name in ("darl", "rlpr"):
        method = METHODS[name]
        assert THINK_ANSWER_SYSTEM_PROMPT in formatted_prompt(tokenizer, method, {"prompt": "q"})
        assert method.answer_rule("<think> 2 + 3 = 5 </think> <answer>5</answer>") == "5"
        assert method.answer_opener == "<answer>"


def test_a_rows_own_system_message_replaces_the_papers(tokenizer):
    text = formatted_prompt(tokenizer, METHODS["ttrl"], {"prompt": "q", "system": "Answer tersely."})
    assert "Answer tersely." in text and STEP_BY_STEP_SYSTEM_PROMPT not in text


def test_the_prompt_file_carries_the_system_message(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_text(json.dumps({"id": "a", "prompt": "q", "system": "S"}) + "\n" + json.dumps({"id": "b", "prompt": "r"}))
    assert [row["system"] for row in read_prompts(str(path), "prompts")] == ["S", None]
    path.write_text(json.dumps({"id": "a", "prompt": "q", "system": 3}) + "\n")
    with pytest.raises(FieldError) as error:
        read_prompts(str(path), "prompts")
    assert error.value.field == "prompts" and "row 1" in str(error.value) and "'system'" in str(error.value)
