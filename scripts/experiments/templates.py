"""Three-operation word problems solved with several distinct solution templates (issue 22's template policy).

The template policy (rl/assets/template_policy/, trained by scripts/train_template_policy.py) is asked
these problems under the step-by-step system prompt only (rl.arithmetic.ANSWER_FORMATS["step_by_step"]).
Each problem starts from a number and applies three changes, at least one a gain and one a loss:

    "Sam has 34 apples, gets 25 more, gives 12 to a friend and then finds 9 more. How many apples ..."

and every training completion solves it with one of TEMPLATES, drawn uniformly:

- "chain", left to right: " 34 + 25 = 59. 59 - 12 = 47. 47 + 9 = 56. The answer is \\boxed{56}."
- "running", a running total in words: " Start with 34. Add 25 to get 59. Take away 12 to get 47. Add 9 to get 56.
  So the answer is \\boxed{56}."
- "grouped", gains and losses summed first, then combined: " Gains: 25 + 9 = 34. Losses: 12. 34 + 34 = 68.
  68 - 12 = 56. The answer is \\boxed{56}."

`template_of(text)` names the template a completion follows (by its shape, whatever its numbers), or None.
Pure functions of their seeds: the held-out set (TEMPLATE_HELDOUT_SEED), the validation set and the
training data are reproducible and disjoint.
"""

from __future__ import annotations

import random
import re

from rl.arithmetic import FRIENDS, NAMES, OBJECTS, distinct_problems
from rl.policy import ASSETS_DIR, HELDOUT_SEED

TEMPLATE_POLICY_DIR = ASSETS_DIR / "template_policy"
TEMPLATE_HELDOUT_SEED = HELDOUT_SEED  # a different generator from rl.arithmetic's, so different problems
TEMPLATE_VALIDATION_SEED = 2000
TEMPLATES = ("chain", "running", "grouped")

GAINS = ["gets {n} more", "buys {n} more", "finds {n} more", "is given {n} more"]
LOSSES = ["gives {n} to {friend}", "loses {n}", "sells {n}", "uses {n}"]
# the sign patterns of the three changes: every problem has a gain and a loss, so "grouped" always has both sums
SIGN_PATTERNS = [(1, 1, -1), (1, -1, 1), (-1, 1, 1), (1, -1, -1), (-1, 1, -1), (-1, -1, 1)]


def _sum_text(numbers: list[int]) -> str:
    """"25 + 9 = 34" for several numbers, "12" for one."""
    return str(numbers[0]) if len(numbers) == 1 else " + ".join(map(str, numbers)) + f" = {sum(numbers)}"


def solve(start: int, changes: list[int], template: str) -> str:
    """The completion for `start` followed by signed `changes`, written with `template`."""
    totals, total = [], start
    for change in changes:
        total += change
        totals.append(total)
    answer = f"\\boxed{{{total}}}."
    if template == "chain":
        steps, before = [], start
        for change, after in zip(changes, totals):
            steps.append(f"{before} {'+' if change > 0 else '-'} {abs(change)} = {after}.")
            before = after
        return " " + " ".join(steps) + f" The answer is {answer}"
    if template == "running":
        steps = [f"Start with {start}."] + [f"{'Add' if c > 0 else 'Take away'} {abs(c)} to get {t}."
                                           for c, t in zip(changes, totals)]
        return " " + " ".join(steps) + f" So the answer is {answer}"
    if template == "grouped":
        gains, losses = [c for c in changes if c > 0], [-c for c in changes if c < 0]
        up = start + sum(gains)
        return (f" Gains: {_sum_text(gains)}. Losses: {_sum_text(losses)}. {start} + {sum(gains)} = {up}. "
                f"{up} - {sum(losses)} = {total}. The answer is {answer}")
    raise ValueError(f"unknown template {template!r}")


_N = r"\d+"
_SUM = rf"{_N}(?: \+ {_N})* = {_N}|{_N}"
TEMPLATE_PATTERNS = {
    "chain": re.compile(rf"{_N} [+-] {_N} = {_N}\.(?: {_N} [+-] {_N} = {_N}\.)* The answer is \\boxed\{{-?{_N}\}}\."),
    "running": re.compile(rf"Start with {_N}\.(?: (?:Add|Take away) {_N} to get -?{_N}\.)+ "
                          rf"So the answer is \\boxed\{{-?{_N}\}}\."),
    "grouped": re.compile(rf"Gains: (?:{_SUM})\. Losses: (?:{_SUM})\. {_N} \+ {_N} = {_N}\. {_N} - {_N} = -?{_N}\. "
                          rf"The answer is \\boxed\{{-?{_N}\}}\."),
}


def template_of(text: str | None) -> str | None:
    """The template ("chain", "running" or "grouped") whose shape the whole completion has; None for any other text.

    Only the shape is read, not the arithmetic: a completion with a wrong sum still has its template.
    """
    if not text:
        return None
    stripped = text.strip()
    for name, pattern in TEMPLATE_PATTERNS.items():
        if pattern.fullmatch(stripped):
            return name
    return None


def make_problem(rng: random.Random) -> dict:
    """One problem {prompt, answer, start, changes}; every running total stays positive."""
    signs = rng.choice(SIGN_PATTERNS)
    while True:
        start = rng.randint(20, 99)
        changes = [sign * rng.randint(10, 59) for sign in signs]
        totals = [start + sum(changes[:i + 1]) for i in range(3)]
        if min(totals) >= 1:
            break
    name, friend, obj = rng.choice(NAMES), rng.choice(FRIENDS), rng.choice(OBJECTS)
    phrases = [rng.choice(GAINS if c > 0 else LOSSES).format(n=abs(c), friend=friend) for c in changes]
    prompt = (f"{name} has {start} {obj}, {phrases[0]}, {phrases[1]} and then {phrases[2]}. "
              f"How many {obj} does {name} have now?")
    return {"prompt": prompt, "answer": str(totals[-1]), "start": start, "changes": changes}


def template_problems(n: int, seed: int = 0, exclude: set[str] | None = None) -> list[dict]:
    """`n` distinct problems `{id, prompt, answer, start, changes}`, deterministic in `seed`, none in `exclude`."""
    return distinct_problems(n, make_problem, random.Random(f"template-problems-{seed}"), f"tmpl-{seed}", exclude)


def heldout_template_problems(n: int = 256) -> list[dict]:
    """The template policy's held-out problems (its training and validation data exclude them)."""
    return template_problems(n, seed=TEMPLATE_HELDOUT_SEED)


def assign_templates(n: int, seed: int) -> list[str]:
    """The template of each of `n` training completions, uniform over TEMPLATES, deterministic in `seed`."""
    rng = random.Random(f"templates-{seed}")
    return [rng.choice(TEMPLATES) for _ in range(n)]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n >= k samples with c correct (Chen et al. 2021): 1 - C(n-c, k) / C(n, k)."""
    if n < k:
        raise ValueError(f"pass@{k} needs at least {k} samples, got {n}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


__all__ = ["TEMPLATE_POLICY_DIR", "TEMPLATES", "template_of", "solve", "template_problems",
           "heldout_template_problems", "assign_templates", "pass_at_k"]
