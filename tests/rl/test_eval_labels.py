"""The eval set's labels score evaluation only: replacing every one of them leaves a
label-free run's rollouts and rewards exactly as they were (same seed), while the
evaluation itself sees the change."""
import json

import pytest

from rl.policy import heldout_problems
from tests.rl.test_train_cli import SMALL, events_of, of_type, write_config, write_prompts
from tests.rl.trainer_process import run_trainer

pytestmark = pytest.mark.trainer


def train_with_eval_labels(tmp, label):
    tmp.mkdir()
    write_prompts(tmp / "prompts.jsonl", label=lambda p: None)  # an unlabelled training set
    rows = [{"id": f"e{i}", "prompt": p["prompt"], "label": label(p)} for i, p in enumerate(heldout_problems(12)[8:])]
    (tmp / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = write_config(tmp, max_steps=1, eval_prompts=str(tmp / "eval.jsonl"),
                          hyperparameters={**SMALL, "n_votes": 8, "n_train": 4, "max_completion_length": 32,
                                           "save_every": 0, "eval_every": 1, "eval_samples": 4})
    result = run_trainer(config, tmp / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    return events_of(tmp / "run")


def test_eval_labels_never_change_a_label_free_reward(tmp_path):
    true = train_with_eval_labels(tmp_path / "true", lambda p: p["answer"])
    wrong = train_with_eval_labels(tmp_path / "wrong", lambda p: "-12345")

    def rollouts(events):
        return [[(r["text"], r["reward"], r["advantage"]) for r in g["rollouts"]] for g in of_type(events, "group")]

    assert rollouts(true) == rollouts(wrong) and rollouts(true)
    assert all(e["values"]["pass@1"] == 0.0 for e in of_type(wrong, "eval"))  # the wrong labels did arrive
    assert [e["step"] for e in of_type(true, "eval")] == [0, 1]
