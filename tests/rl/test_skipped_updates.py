"""An update with nothing to learn does not step (issue 22, defect 5): when filtering leaves no trainable row (RLPR's
std filter here, set to leave out every group), AdamW would still move the weights through its weight decay and
momentum, and the learning-rate schedule would advance. The real trainer, two steps on the default policy."""
import numpy as np
import pytest
from safetensors.numpy import load_file

from rl.policy import DEFAULT_POLICY_DIR
from rl.trainer import leave_out_of_means
from tests.rl.test_train_cli import events_of, of_type, write_config
from tests.rl.trainer_process import run_trainer
from tests.rl.test_train_methods import SMALL, write_rows

pytestmark = pytest.mark.trainer


def test_an_update_with_every_group_filtered_leaves_the_weights_and_says_it_was_skipped(tmp_path):
    write_rows(tmp_path / "prompts.jsonl", reference=lambda p: p["answer"])
    config = write_config(tmp_path, method="rlpr", max_steps=2, hyperparameters={
        **SMALL, "std_filter_threshold": 1.0, "weight_decay": 0.1, "learning_rate": 1e-3,
        "lr_schedule": "cosine", "warmup_ratio": 0.03})  # a schedule that moves, to see it held
    result = run_trainer(config, tmp_path / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = of_type(events_of(tmp_path / "run"), "metrics")
    assert [m["values"]["rlpr/filtered_ratio"] for m in metrics] == [1.0, 1.0]
    assert [m["values"]["updates/skipped"] for m in metrics] == [2, 2]  # 2 prompts a step, 1 per update
    # nothing was measured of the policy in those updates: no entropy, KL, clip ratio or policy loss of 0 (issue 38, 4)
    for m in metrics:
        assert not {"entropy", "kl", "clip_ratio/low", "clip_ratio/high"} & set(m["values"]), m["values"]
    # the schedule never left its first value (0: the warmup starts there); stepped, it would have reached the peak
    assert [m["values"]["learning_rate"] for m in metrics] == [0.0, 0.0]
    before = load_file(str(DEFAULT_POLICY_DIR / "model.safetensors"))
    after = load_file(str(tmp_path / "run" / "checkpoints" / "checkpoint-2" / "model.safetensors"))
    assert all(np.array_equal(before[name], after[name]) for name in before)


def test_updates_with_rows_to_learn_from_step_and_count_no_skip(tmp_path):
    write_rows(tmp_path / "prompts.jsonl", reference=lambda p: p["answer"])
    config = write_config(tmp_path, method="rlpr", max_steps=2, hyperparameters={
        **SMALL, "std_filter_threshold": 0.0, "weight_decay": 0.1, "learning_rate": 1e-3})
    result = run_trainer(config, tmp_path / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    metrics = of_type(events_of(tmp_path / "run"), "metrics")
    assert [m["values"]["updates/skipped"] for m in metrics] == [0, 0]
    assert metrics[0]["values"]["learning_rate"] > 0
    before = load_file(str(DEFAULT_POLICY_DIR / "model.safetensors"))
    after = load_file(str(tmp_path / "run" / "checkpoints" / "checkpoint-2" / "model.safetensors"))
    assert not all(np.array_equal(before[name], after[name]) for name in before)


def test_a_skipped_update_is_left_out_of_the_steps_means_as_trl_averages_them():
    # issue 38, defect 4: three updates measured entropy 0.61, the fourth had no trainable token (TRL's masked mean
    # of an empty mask reads 0): the step's entropy was (3 × 0.61 + 0) / 4 = 0.4575
    metrics = {"entropy": [0.61, 0.61, 0.61], "kl": [0.02] * 3, "entropy_coef": [0.0] * 3}
    before = {name: len(values) for name, values in metrics.items()}
    for name in metrics:
        metrics[name].append(0.0)  # what TRL appends for the skipped update
    metrics["clip_ratio/low_mean"] = [0.0]  # a name first appended by the skipped update
    leave_out_of_means(metrics, before)
    valid = [v for v in metrics["entropy"] if not np.isnan(v)]  # TRL's log(): NaN values are left out of the mean
    assert sum(valid) / len(valid) == 0.61
    assert np.isnan(metrics["kl"][-1]) and np.isnan(metrics["clip_ratio/low_mean"][0])
    assert metrics["entropy_coef"] == [0.0] * 4  # a setting TRL echoes, not a measurement: kept
