"""TRL's completions as Evolab's rollouts: the text of a prompt or completion (plain or conversational), and the
rows of the completions table TRL logs to W&B (`log_completions=True`). Standard library only."""
from __future__ import annotations

import math

NOT_REWARDS = ("step", "prompt", "completion", "advantage", "image", "images")


def prompt_text(value) -> str:
    """A prompt as text: conversational ones are lists of {role, content} messages."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n\n".join(f"{m.get('role', '')}: {_content(m.get('content'))}" if isinstance(m, dict) else str(m)
                           for m in value)
    return str(value)


def _content(content) -> str:
    if isinstance(content, list):  # multimodal parts: keep the text ones
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content)


def completion_text(value) -> str:
    if isinstance(value, list):  # [{"role": "assistant", "content": ...}]
        return "".join(_content(m.get("content")) if isinstance(m, dict) else str(m) for m in value)
    return str(value)


def finite(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None


def rollout(step: int, prompt: str, completion: str, index: int, rewards: dict, weights: dict,
            advantage=None) -> dict:
    """One rollout line of Evolab's endpoint: each reward function's reward, and GRPOTrainer's total, the weighted
    sum of those that scored it."""
    rewards = {name: value for name, value in rewards.items() if finite(value) is not None}
    line = {"step": step, "prompt": prompt, "completion": completion, "index": index, "rewards": rewards}
    if rewards:
        line["reward"] = sum(weights.get(name, 1.0) * value for name, value in rewards.items())
    if finite(advantage) is not None:
        line["advantage"] = advantage
    return line


def rollouts_from_table(step: int, table: dict, weights: list | None = None) -> list[dict]:
    """The rows of TRL's completions table (columns step, prompt, completion, one per reward function in
    reward_funcs' order, advantage) as rollouts, numbered per prompt in table order; none when its columns are not
    those (any other table). `weights`: GRPOConfig's reward_weights (None: each 1)."""
    columns, rows = table.get("columns") or [], table.get("data") or []
    if "prompt" not in columns or "completion" not in columns:
        return []
    names = [c for c in columns if c not in NOT_REWARDS]
    weight_of = dict(zip(names, [float(w) for w in weights])) if weights and len(weights) == len(names) else {}
    seen: dict[str, int] = {}
    lines = []
    for row in rows:
        values = dict(zip(columns, row))
        prompt = prompt_text(values["prompt"])
        index = seen.get(prompt, 0)
        seen[prompt] = index + 1
        at = values.get("step")
        lines.append(rollout(at if isinstance(at, int) and not isinstance(at, bool) else step, prompt,
                             completion_text(values["completion"]), index, {n: values.get(n) for n in names},
                             weight_of, values.get("advantage")))
    return lines
