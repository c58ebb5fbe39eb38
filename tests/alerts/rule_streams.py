"""Judging a stream of metrics with the collapse-alert rules, as the rule tests do."""
from webapp.alerts.rule_specs import resolve_thresholds
from webapp.alerts.rules import History, evaluate_step_rules


def history(metrics: dict, max_completion_length: int | None = None) -> History:
    """A History over steps 1..N, N the longest series; shorter series are missing at the end."""
    n = max(len(values) for values in metrics.values())
    return History(steps=list(range(1, n + 1)), metrics=dict(metrics), max_completion_length=max_completion_length)


def judge(metrics: dict, kind: str, max_completion_length: int | None = None, **overrides):
    """What ``kind`` says at the latest step: a Finding, None (healthy) or "absent"."""
    thresholds = resolve_thresholds({kind: overrides} if overrides else None)
    results = evaluate_step_rules(history(metrics, max_completion_length), thresholds)
    return results.get(kind, "absent")


def degenerating_stream() -> dict:
    """12 steps whose text comes apart from step 7 (crafted; a real run is in test_real_trajectories.py): entropy
    0.41 -> 1.9, every answer invalid, every rollout running to a 96-token limit, and unique answers gone (a
    collapse rule must not read that as agreement)."""
    return {
        "entropy": [0.41, 0.40, 0.42, 0.45, 0.43, 0.44, 1.2, 1.7, 1.9, 1.9, 2.0, 1.9],
        "invalid_ratio": [0.1, 0.1, 0.05, 0.1, 0.1, 0.1, 0.7, 0.95, 1.0, 1.0, 1.0, 1.0],
        "response_length/mean": [40, 42, 41, 40, 43, 41, 80, 96, 96, 96, 96, 96],
        "truncated_ratio": [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.6, 1.0, 1.0, 1.0, 1.0, 1.0],
        "unique_answers": [5, 5, 5, 5, 5, 5, 1, 0, 0, 0, 0, 0],
    }


def wobble(levels: list[float], amplitude: float) -> list[float]:
    """Each level −a, +a, −a, ...: a stream with a known step-to-step noise."""
    return [round(v + (amplitude if i % 2 else -amplitude), 6) for i, v in enumerate(levels)]


def falling(start: float, end: float, n_start: int = 5, n_end: int = 5) -> list[float]:
    return [start] * n_start + [end] * n_end


MOVED = [0.01] * 10  # a KL to the start that says the policy moved


def converging(entropy: list[float], **more) -> dict:
    """A run whose entropy does what `entropy` says while its votes converge (the second signal) and its policy
    moved."""
    n = len(entropy)
    return {"entropy": entropy, "majority_ratio": wobble(falling(0.6, 0.9, 5, n - 5), 0.01), "kl": [0.01] * n,
            **more}
