"""The reference-probability reward's parts that RLPR and DARL share, as RLPR's release computes them: the policy's
probability of y* and of its own answer after its reasoning, the format reward, the repetition penalty and the
adaptive standard-deviation filter."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from rl.groups import Group

_R1_FORMAT = re.compile(r"<think>.*</think>.*<answer>.*</answer>.*", re.DOTALL)


def r1_format_reward(text: str) -> float:
    """1 when the response is <think>…</think> … <answer>…</answer> with each tag exactly once, else 0.

    RLPR's verl/workers/reward_manager/prob.py::format_reward, format_mode "R1".
    """
    if any(text.count(tag) != 1 for tag in ("<think>", "</think>", "<answer>", "</answer>")):
        return 0.0
    return 1.0 if _R1_FORMAT.fullmatch(text) else 0.0


def with_format_reward(rewards: Sequence[float], texts: Sequence[str], hp: dict) -> tuple[list[float], list[float]]:
    """prob.py: score = (1 − c) · reward + c · format; the format of each rollout alongside."""
    c = hp["format_coefficient"]
    formats = [r1_format_reward(text) for text in texts]
    return [(1.0 - c) * r + c * f for r, f in zip(rewards, formats)], formats


def repetition_penalty(text: str, window: int = 10, limit: int = 10) -> float:
    """−1 when a window of `window` words (split on whitespace, then on '_') occurs `limit` or more times, else 0.

    RLPR's verl/utils/reward_score/repetition.py::detect_repetition_with_hash (window_size 10; ray_trainer.py passes
    max_repetitions_limit 10).
    """
    words = [word for segment in text.split() for word in segment.split("_")]
    if len(words) <= window:
        return 0.0
    counts = Counter(tuple(words[i:i + window]) for i in range(len(words) - window + 1))
    return -1.0 if max(counts.values()) >= limit else 0.0


def with_repetition_penalty(rewards: Sequence[float], texts: Sequence[str], hp: dict) -> tuple[list[float], list[float]]:
    """ray_trainer.py:1936: the penalty is added where the reward tensor is non-zero (a reward of exactly 0 keeps 0),
    after prob.py's score and before the std filter reads the rewards; the penalty of each rollout alongside."""
    if not hp.get("repetition_penalty", False):
        return list(rewards), [0.0] * len(rewards)
    penalties = [repetition_penalty(text, 10, hp["repetition_penalty_limit"]) for text in texts]
    return [r + p if r != 0 else r for r, p in zip(rewards, penalties)], penalties


def bessel_std(rewards: Sequence[float]) -> float:
    """torch.std of a group's rewards, as verl's compute_advantage reports it (nan for a single rollout)."""
    return float(np.std(rewards, ddof=1)) if len(rewards) > 1 else math.nan


@dataclass
class AdaptiveStdFilter:
    """RLPR's standard deviation filtering with its adaptive threshold, as the release runs it.

    RLPR's verl/trainer/ppo/ray_trainer.py, filter_mode "EMA": steps from `ema_start` until `start` only collect
    the mean over the batch's prompts of their reward std; at `start` the EMA is the mean of those, and each later
    step moves it by (1 − ratio) towards the previous step's mean (every prompt generated counts, filtered or not).
    A prompt is trained on when its reward std ≥ beta × EMA (`accuracy_lower_bound`); a nan std is left out.
    One per run, made by Method.step_filter; its state goes into each checkpoint.
    """

    prefix: str
    beta: float
    ratio: float
    ema_start: int
    start: int
    fixed: float | None = None
    history: list[float] = field(default_factory=list)  # step means, ema_start..start-1
    ema: float | None = None
    last_mean: float | None = None  # the previous filtered step's mean, folded into the EMA at the next one

    @classmethod
    def from_hyperparameters(cls, prefix: str, hp: dict) -> "AdaptiveStdFilter":
        return cls(prefix, hp["std_filter_beta"], hp["std_filter_ema_ratio"], hp["std_filter_ema_start_step"],
                   hp["std_filter_start_step"], hp["std_filter_threshold"])

    def apply(self, step: int, group_rewards: list[Sequence[float]]) -> tuple[list[bool], dict[str, float]]:
        """Which groups of rollout step `step` (1-based) are left out, and the step's filter metrics."""
        stds = [bessel_std(rewards) for rewards in group_rewards]
        finite = [s for s in stds if math.isfinite(s)]
        mean = sum(finite) / len(finite) if finite else None
        threshold = self.fixed
        if threshold is None and self.beta > 0 and step >= self.ema_start:
            if step < self.start:
                if mean is not None:
                    self.history.append(mean)
            else:
                if self.ema is None:
                    self.ema = sum(self.history) / len(self.history) if self.history else mean  # "init the ema"
                elif self.last_mean is not None:
                    self.ema = self.last_mean * (1 - self.ratio) + self.ema * self.ratio  # ray_trainer.py:1584
                threshold = None if self.ema is None else self.ema * self.beta  # ray_trainer.py:1589
                self.last_mean = mean
        skips = [threshold is not None and not (math.isfinite(s) and s >= threshold) for s in stds]
        metrics = {f"{self.prefix}/filtered_ratio": sum(skips) / len(skips) if skips else 0.0}
        if threshold is not None:
            metrics[f"{self.prefix}/std_threshold"] = threshold
        return skips, metrics

    def state_dict(self) -> dict:
        return {"history": self.history, "ema": self.ema, "last_mean": self.last_mean}

    def load_state_dict(self, state: dict) -> None:
        self.history, self.ema, self.last_mean = list(state["history"]), state["ema"], state["last_mean"]


def reference_probabilities(group: Group, probe, reference: str, opener: str) -> tuple[list[float], list[float]]:
    """r(y*, z, x) and r(y, z, x) for every rollout (r(y) = 0 without an answer), in one batched pass.

    x ⊕ z is scored as the exact generated ids up to `opener`, where the final answer starts (DESIGN §6).
    """
    prefixes = probe.reasoning_prefix_ids(group, opener)
    answered = [j for j, a in enumerate(group.answers) if a is not None]
    probabilities = probe.answer_probabilities_from_ids(prefixes + [prefixes[j] for j in answered],
                                                        [reference] * len(prefixes) + [group.answers[j] for j in answered])
    r_ref = probabilities[: len(prefixes)]
    r_gen = [0.0] * len(prefixes)
    for j, p in zip(answered, probabilities[len(prefixes):]):
        r_gen[j] = p
    return r_ref, r_gen
