"""How a final answer is read from a rollout that Evolab did not generate (DESIGN §4.8).

A run trained elsewhere has no `Method` whose `answer_rule` decides; its answer rule is a setting of
the run (`boxed` unless it says otherwise): one of the rules below, or the name of a method, whose own
rule is then used (`evol_rl`: a box with a digit in it). The majority, the distinct answers and the
label accuracy of its groups are read with it.
"""
from __future__ import annotations

import re
from typing import Callable

from rl.answers import extract_boxed
from rl.methods import METHODS
from rl.prompts import extract_think_answer

# verl's GSM8K reward reads the last "#### <number>" of the response's last 300 characters
_GSM8K_CLIP_CHARS = 300
_GSM8K_ANSWER = re.compile(r"#### (\-?[0-9\.\,]+)")


def extract_gsm8k(text: str | None) -> str | None:
    """The answer after the last ``#### `` (commas and dollar signs dropped), as verl's GSM8K reward reads it.

    # verl/utils/reward_score/gsm8k.py::extract_solution(method="strict"): findall over the last 300 chars, last match
    """
    if not text:
        return None
    found = _GSM8K_ANSWER.findall(text[-_GSM8K_CLIP_CHARS:])
    return found[-1].replace(",", "").replace("$", "") if found else None


ANSWER_RULES: dict[str, Callable[[str | None], str | None]] = {
    "boxed": extract_boxed,  # the last \boxed{...}: the papers' format (DESIGN §6)
    "answer_tag": extract_think_answer,  # <answer>...</answer>: DARL's and RLPR's template
    "gsm8k": extract_gsm8k,  # "#### 42": verl's GSM8K example
}
DEFAULT_ANSWER_RULE = "boxed"


def answer_rule_names() -> list[str]:
    return [*ANSWER_RULES, *METHODS]


def answer_rule(name: str | None) -> Callable[[str | None], str | None]:
    """The rule called `name` (a rule above or a method's), the default for None or ""; ValueError naming the
    choices for anything else."""
    name = name or DEFAULT_ANSWER_RULE
    if name in ANSWER_RULES:
        return ANSWER_RULES[name]
    if name in METHODS:
        return METHODS[name].answer_rule
    raise ValueError(f"unknown answer rule {name!r}: expected one of {', '.join(answer_rule_names())}")
