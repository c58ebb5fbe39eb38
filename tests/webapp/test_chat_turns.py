"""A prompt written with chat markup is shown as its turns (webapp/runs/templatetags/rollout_text.py chat_turns)."""
from webapp.runs.templatetags.rollout_text import chat_turns


def test_plain_text_has_no_turns():
    assert chat_turns("What is 2+3?") is None and chat_turns(None) is None


def test_chatml_becomes_its_turns_and_the_open_assistant_turn_is_dropped():
    text = "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is\n2+3?<|im_end|>\n<|im_start|>assistant\n"
    assert chat_turns(text) == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is\n2+3?"}]


def test_llama3_markup_becomes_its_turns():
    text = ("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n")
    assert chat_turns(text) == [{"role": "user", "content": "Hi"}]


def test_text_outside_every_turn_is_kept_as_its_own():
    assert chat_turns("Intro <|im_start|>user\nQ<|im_end|> trailing") == [
        {"role": "text", "content": "Intro"}, {"role": "user", "content": "Q"}, {"role": "text", "content": "trailing"}]


def test_an_unclosed_turn_runs_to_the_next_one():
    assert chat_turns("<|im_start|>user\nQ\n<|im_start|>assistant\nA") == [
        {"role": "user", "content": "Q"}, {"role": "assistant", "content": "A"}]
