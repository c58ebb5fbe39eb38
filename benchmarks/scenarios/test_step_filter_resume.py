"""RLPR's adaptive std filter in a real run (issue 22, defect 2): its threshold follows the steps before it, and a
resumed run picks the filter up where its checkpoint left it. Two steps of the default policy, filtering from step 2
on the EMA of step 1."""
import json
import shutil

import numpy as np
import pytest

from tests.rl.test_train_cli import events_of, of_type, run_trainer, write_config
from tests.rl.test_train_methods import SMALL, write_rows

pytestmark = pytest.mark.trainer

FILTER = {"std_filter_ema_start_step": 1, "std_filter_start_step": 2, "std_filter_beta": 0.5, "save_every": 1}


def step_mean_std(events, step):
    """The mean over the step's groups of their rewards' Bessel-corrected std: what the EMA folds in."""
    groups = [e for e in of_type(events, "group") if e["step"] == step]
    return float(np.mean([np.std([r["reward"] for r in g["rollouts"]], ddof=1) for g in groups]))


def test_the_threshold_follows_the_earlier_steps_and_survives_a_resume(tmp_path):
    write_rows(tmp_path / "prompts.jsonl", reference=lambda p: p["answer"])
    config = write_config(tmp_path, method="rlpr", max_steps=2, hyperparameters={**SMALL, **FILTER})
    run = tmp_path / "run"
    result = run_trainer(config, run)
    assert result.returncode == 0, result.stderr[-3000:]
    events = events_of(run)
    metrics = {m["step"]: m["values"] for m in of_type(events, "metrics")}
    assert "rlpr/std_threshold" not in metrics[1]  # step 1 only collects
    threshold = 0.5 * step_mean_std(events, 1)  # the EMA starts as step 1's mean
    assert metrics[2]["rlpr/std_threshold"] == pytest.approx(threshold, rel=1e-5)
    saved = json.loads((run / "checkpoints" / "checkpoint-1" / "evolab_step_filter.json").read_text())
    assert saved["history"] == pytest.approx([step_mean_std(events, 1)], rel=1e-5)

    # step 2 again from checkpoint-1: without the saved state the EMA would start from step 2's own stds
    shutil.rmtree(run / "checkpoints" / "checkpoint-2")
    result = run_trainer(config, run, "--resume")
    assert result.returncode == 0, result.stderr[-3000:]
    again = [m for m in of_type(events_of(run), "metrics") if m["step"] == 2][-1]["values"]
    assert again["rlpr/std_threshold"] == pytest.approx(threshold, rel=1e-5)
