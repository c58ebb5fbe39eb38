"""Synthetic arithmetic word problems for the small default policy.

Each problem is a short story with one or two operations (+, -, small *). It comes
with one completion per answer format the default policy is trained on
(`ANSWER_FORMATS`), both showing the same working:

- `completion`, the answer to the step-by-step system prompt (SimpleRL-Zoo / EVOL-RL /
  R-Zero's solver, `rl.prompts.STEP_BY_STEP_SYSTEM_PROMPT`) and to no system prompt:
  `" 37 + 31 = 68. The answer is \\boxed{68}."`;
- `think_completion`, the answer to DARL's system prompt (`rl.prompts.THINK_ANSWER_SYSTEM_PROMPT`):
  `" <think> 37 + 31 = 68. </think> <answer>68</answer>"`.

The policy sees a problem as `rl.prompts.format_prompt(tokenizer, prompt, system)`. The
generator is a pure function of its seed, so the default policy, its held-out set and
the tests are reproducible.
"""

from __future__ import annotations

import random
from typing import Callable, NamedTuple

from rl.answers import extract_boxed
from rl.prompts import STEP_BY_STEP_SYSTEM_PROMPT, THINK_ANSWER_SYSTEM_PROMPT, extract_think_answer

NAMES = ["Sam", "Ana", "Ben", "Mia", "Leo", "Zoe", "Tom", "Ivy", "Max", "Eva", "Kai", "Lily"]
FRIENDS = ["a friend", "a neighbour", "the teacher", "a cousin", "a classmate"]
OBJECTS = ["apples", "books", "coins", "cards", "stamps", "pencils", "shells", "marbles"]

# One template per story shape: (operation, prompt text). Placeholders: name, friend, obj, a, b, c.
TEMPLATES = [
    ("add", "{name} has {a} {obj} and buys {b} more. How many {obj} does {name} have now?"),
    ("add", "{name} found {a} {obj} on Monday and {b} {obj} on Tuesday. How many {obj} did {name} find in total?"),
    ("add", "A box holds {a} {obj}. {name} puts in {b} more. How many {obj} are in the box?"),
    ("sub", "{name} had {a} {obj} and gave {b} to {friend}. How many {obj} does {name} have left?"),
    ("sub", "There are {a} {obj} on the table. {name} takes {b} of them. How many {obj} are left?"),
    ("mul", "{name} buys {a} bags with {b} {obj} in each bag. How many {obj} does {name} buy?"),
    ("add_sub", "{name} has {a} {obj}, gets {b} more and then loses {c}. How many {obj} does {name} have now?"),
]


def _numbers(op: str, rng: random.Random) -> tuple[int, int, int]:
    """Operands sized so a tiny model gets some, not all, of them right."""
    if op == "add":
        return rng.randint(10, 99), rng.randint(10, 99), 0
    if op == "sub":
        a = rng.randint(20, 99)
        return a, rng.randint(1, a - 1), 0
    if op == "mul":
        return rng.randint(2, 9), rng.randint(2, 12), 0
    a, b = rng.randint(10, 60), rng.randint(10, 39)
    return a, b, rng.randint(1, a + b - 1)


def _working(op: str, a: int, b: int, c: int) -> tuple[str, int]:
    """The reasoning line shown in the completion, and the answer it reaches."""
    if op == "add":
        return f"{a} + {b} = {a + b}.", a + b
    if op == "sub":
        return f"{a} - {b} = {a - b}.", a - b
    if op == "mul":
        return f"{a} * {b} = {a * b}.", a * b
    s = a + b
    return f"{a} + {b} = {s}. {s} - {c} = {s - c}.", s - c


def make_problem(rng: random.Random) -> dict:
    """One random problem: {prompt, completion, answer} (answer as a string)."""
    op, template = rng.choice(TEMPLATES)
    a, b, c = _numbers(op, rng)
    prompt = template.format(name=rng.choice(NAMES), friend=rng.choice(FRIENDS),
                             obj=rng.choice(OBJECTS), a=a, b=b, c=c)
    working, answer = _working(op, a, b, c)
    return {"prompt": prompt, "completion": f" {working} The answer is \\boxed{{{answer}}}.",
            "think_completion": f" <think> {working} </think> <answer>{answer}</answer>", "answer": str(answer)}


class AnswerFormat(NamedTuple):
    """One way the default policy is asked and answers: the system prompt, the completion key, the extractor."""
    system: str | None
    completion_key: str
    extract: Callable[[str | None], str | None]


# The formats the default policy is trained on, with their share of the training problems. The two papers'
# system prompts are the point; "plain" (the user turn alone) answers as step-by-step does, so a prompt formatted
# without a system prompt still gets a boxed answer.
ANSWER_FORMATS = {
    "step_by_step": AnswerFormat(STEP_BY_STEP_SYSTEM_PROMPT, "completion", extract_boxed),
    "think_answer": AnswerFormat(THINK_ANSWER_SYSTEM_PROMPT, "think_completion", extract_think_answer),
    "plain": AnswerFormat(None, "completion", extract_boxed),
}
FORMAT_SHARES = {"step_by_step": 0.4, "think_answer": 0.4, "plain": 0.2}


def synthetic_problems(n: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`n` distinct problems `{id, prompt, answer, completion, think_completion}`, deterministic in `seed`.

    `exclude` holds prompts that must not appear (the held-out set, when drawing
    training data).
    """
    return distinct_problems(n, make_problem, random.Random(seed), f"arith-{seed}", exclude)


def distinct_problems(n: int, make, rng: random.Random, id_prefix: str, exclude: set[str] | None = None) -> list[dict]:
    """`n` problems drawn with `make(rng)`, no prompt twice nor in `exclude`, ids `{id_prefix}-{index}`."""
    seen = set(exclude or ())
    problems = []
    while len(problems) < n:
        problem = make(rng)
        if problem["prompt"] in seen:
            continue
        seen.add(problem["prompt"])
        problems.append({"id": f"{id_prefix}-{len(problems)}", **problem})
    return problems


# The R-Zero challenger's task (paper App. B.2, shortened for a 1M-parameter model): asked to
# set a problem, the policy writes a new one between <question> tags, which is the format check
# of the challenger reward. Without it the default policy would fail that check on every sample
# and an R-Zero run on it would have no signal. It is the user turn, with no system prompt:
# the policy is trained on `rl.prompts.format_prompt(tokenizer, CHALLENGER_PROMPT, None)`.
CHALLENGER_PROMPT = ("You are a problem setter. Write one new arithmetic word problem. "
                     "Output it as <question> problem </question>.")


def challenger_examples(n: int, seed: int = 0) -> list[dict]:
    """`n` challenger-task examples `{prompt, completion}`: the prompt above, a fresh problem as the answer.

    Its own random stream (seeded apart from `synthetic_problems`), so adding these examples to
    training leaves the arithmetic data and the held-out set unchanged.
    """
    rng = random.Random(f"challenger-{seed}")
    return [{"prompt": CHALLENGER_PROMPT, "completion": f" <question> {make_problem(rng)['prompt']} </question>"}
            for _ in range(n)]
