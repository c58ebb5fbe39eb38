"""scripts/experiments/degeneration.py derives a step's invalid_ratio and truncated_ratio from its rollouts as
ingestion does (webapp/runs/ingestion.py), on a worked example."""

from scripts.experiments.degeneration import per_step


def test_each_step_gets_its_logged_metrics_and_the_shares_of_invalid_and_truncated_rollouts():
    events = [
        {"type": "group", "step": 1, "rollouts": [{"valid": True, "length": 20}, {"valid": False, "length": 64}]},
        {"type": "group", "step": 1, "rollouts": [{"valid": False, "length": 64}, {"valid": False, "length": 30}]},
        {"type": "metrics", "step": 1, "values": {"entropy": 0.5, "response_length/mean": 44.5}},
        {"type": "metrics", "step": 2, "values": {"entropy": 0.4}},  # no rollouts stored for it
    ]
    assert per_step(events) == [
        {"step": 1, "entropy": 0.5, "response_length/mean": 44.5, "unique_answers": None, "majority_ratio": None,
         "invalid_ratio": 0.75, "truncated_ratio": 0.5},
        {"step": 2, "entropy": 0.4, "response_length/mean": None, "unique_answers": None, "majority_ratio": None},
    ]
