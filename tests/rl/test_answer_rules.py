"""Answer rules of runs trained elsewhere (rl/answer_rules.py), on worked examples."""
import pytest

from rl.answer_rules import answer_rule, extract_gsm8k


def test_the_default_rule_reads_the_last_box():
    assert answer_rule(None)("first \\boxed{3}, then \\boxed{\\frac{1}{2}}") == "\\frac{1}{2}"


@pytest.mark.parametrize("text, answer", [
    ("Natalia sold 48 + 24 = 72 clips.\n#### 72", "72"),
    ("#### 1,000 dollars", "1000"),
    ("#### -3.5", "-3.5"),
    ("#### 4 ... actually #### 5", "5"),  # the last one, as verl reads it
    ("The answer is 72.", None),  # strict: no #### marker, no answer
    ("x" * 400 + "#### 9", "9"),
    ("#### 9" + "x" * 400, None),  # only the last 300 characters are read
])
def test_gsm8k_reads_as_verls_strict_reward_does(text, answer):
    assert extract_gsm8k(text) == answer


def test_answer_tag_and_a_methods_own_rule():
    assert answer_rule("answer_tag")("<think>hmm</think><answer> 12 </answer>") == "12"
    evol_rl = answer_rule("evol_rl")
    assert evol_rl("\\boxed{x}") is None and evol_rl("\\boxed{x=2}") == "x=2"


def test_an_unknown_rule_names_the_choices():
    with pytest.raises(ValueError, match="boxed, answer_tag, gsm8k"):
        answer_rule("last_word")
