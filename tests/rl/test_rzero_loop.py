"""R-Zero through `python -m rl.train`: one tiny iteration of challenger, questions and solver phases.

The challenger and solver are both the default policy, which learned the challenger task
(rl.arithmetic.CHALLENGER_PROMPT) along with arithmetic; sizes are tiny so the run takes seconds.
"""

import json
import subprocess
import time
from pathlib import Path

import pytest

from rl.events import read_events, validate_event
from rl.policy import DEFAULT_POLICY_DIR, heldout_problems
from rl.methods.r_zero import extract_question, keep_for_solver, solver_agreement, solver_majority
from tests.rl.trainer_process import REPO, run_trainer as warm_trainer

pytestmark = pytest.mark.trainer

SENTINEL = "LABEL-SENTINEL-7319"  # the prompt file's labels: must never show up anywhere in the run
TINY = {"iterations": 1, "challenger_steps": 1, "solver_steps": 1, "questions_per_iteration": 24,
        "challenger_rollouts": 4, "prompts_per_step": 2, "prompts_per_update": 1, "solver_samples": 10, "n_votes": 4,
        "n_train": 4, "max_completion_length": 48, "learning_rate": 1e-4, "eval_every": 0}
# smaller still, and a filter that keeps any question with a majority answer, so that the solver phase always runs
QUICK = {**TINY, "questions_per_iteration": 8, "challenger_rollouts": 2, "solver_samples": 4, "keep_low": 1,
         "keep_high": 4, "max_completion_length": 32}
QUESTION_FIELDS = {"id", "question", "p_hat", "pseudo_label", "answers"}


def write_config(tmp: Path, **hyperparameters) -> Path:
    rows = [{"id": p["id"], "prompt": p["prompt"], "label": SENTINEL} for p in heldout_problems(2)]
    (tmp / "prompts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {"method": "r_zero", "model": "default", "prompts": str(tmp / "prompts.jsonl"), "eval_prompts": None,
              "embedding_model": None, "max_steps": 1, "seed": 0, "hyperparameters": {**TINY, **hyperparameters}}
    (tmp / "config.json").write_text(json.dumps(config))
    return tmp / "config.json"


ENV = {"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}


def run_trainer(config: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return warm_trainer(config, out, *extra, env=ENV, timeout=420)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def one_iteration(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("rzero")
    started = time.time()
    result = run_trainer(write_config(tmp), tmp / "run")
    print(f"one R-Zero iteration: {time.time() - started:.1f}s wall")
    return result, read_events(tmp / "run" / "events.jsonl"), tmp / "run"


def test_one_iteration_succeeds_and_every_event_passes_the_schema(one_iteration):
    result, events, _ = one_iteration
    assert result.returncode == 0, result.stderr[-3000:]
    for event in events:
        validate_event(event)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert events[-1]["type"] == "status" and events[-1]["state"] == "succeeded"


def test_stage_events_walk_through_challenger_questions_and_solver_in_order(one_iteration):
    _, events, _ = one_iteration
    stages = [(e["iteration"], e["phase"], e["state"]) for e in events if e["type"] == "stage"]
    kept = next(e["counts"]["kept"] for e in events if e["type"] == "stage" and e["phase"] == "questions"
                and e["state"] == "finished")
    solver = [(1, "solver", "started"), (1, "solver", "finished")] if kept else [(1, "solver", "skipped")]
    assert stages == [(1, "challenger", "started"), (1, "challenger", "finished"),
                      (1, "questions", "started"), (1, "questions", "finished"), *solver]


def test_the_trained_default_policy_writes_questions_the_solver_can_train_on(one_iteration):
    _, _, run_dir = one_iteration
    pool = read_jsonl(run_dir / "rzero" / "iteration-1" / "pool.jsonl")
    assert sum(row["question"] is not None for row in pool) >= len(pool) // 2  # it passes the format check
    assert any(row["kept"] for row in pool)


def test_the_pool_records_every_candidate_and_the_3_to_7_filter_decides_what_is_kept(one_iteration):
    _, _, run_dir = one_iteration
    folder = run_dir / "rzero" / "iteration-1"
    pool, kept = read_jsonl(folder / "pool.jsonl"), read_jsonl(folder / "questions.jsonl")
    assert len(pool) == TINY["questions_per_iteration"]
    for row in pool:
        assert row["question"] == extract_question(row["text"])
        if row["question"] is None:
            assert row["answers"] == [] and not row["kept"] and row["p_hat"] is None
            continue
        assert len(row["answers"]) == TINY["solver_samples"]
        assert row["p_hat"] == pytest.approx(solver_agreement(row["answers"]))  # p̂ follows from the answers
        assert row["pseudo_label"] == solver_majority(row["answers"])
        assert row["kept"] == keep_for_solver(row["answers"], 3, 7)
        if row["kept"]:
            assert 0.3 <= row["p_hat"] <= 0.7
    assert kept == [{k: row[k] for k in QUESTION_FIELDS} for row in pool if row["kept"]]
    assert all(set(row) == QUESTION_FIELDS for row in kept)


def test_solver_rewards_are_agreement_with_the_pseudo_label(one_iteration):
    _, events, run_dir = one_iteration
    labels = {row["id"]: row["pseudo_label"] for row in read_jsonl(run_dir / "rzero" / "iteration-1" /
                                                                   "questions.jsonl")}
    solver_groups = [e for e in events if e["type"] == "group" and e["prompt_id"] in labels]
    assert solver_groups or not labels
    for group in solver_groups:
        assert group["majority_answer"] == labels[group["prompt_id"]]
        for r in group["rollouts"]:
            assert r["reward"] == (1.0 if r["answer"] == labels[group["prompt_id"]] else 0.0)


def test_challenger_groups_score_format_failures_zero_and_metric_steps_never_go_back(one_iteration):
    _, events, _ = one_iteration
    challenger = [e for e in events if e["type"] == "group" and e["prompt_id"].startswith("challenger-")]
    assert len(challenger) == TINY["prompts_per_step"]
    for group in challenger:
        for r in group["rollouts"]:
            assert r["valid"] == (extract_question(r["text"]) is not None)
            if not r["valid"]:
                assert r["reward"] == 0.0
            assert 0.0 <= r["reward"] <= 1.0
    metrics = [e for e in events if e["type"] == "metrics"]
    steps = [m["step"] for m in metrics]
    assert steps == sorted(steps) and steps[0] == 1
    names = set().union(*(m["values"] for m in metrics))
    assert {"rzero/format_rate", "rzero/pool_size", "rzero/kept_questions", "rzero/challenger_reward_mean"} <= names


def test_the_prompt_files_labels_never_reach_rewards_or_run_files(one_iteration):
    _, _, run_dir = one_iteration
    for path in run_dir.rglob("*"):
        if path.is_file() and path.suffix in {".jsonl", ".json"}:
            assert SENTINEL not in path.read_text(), path


def test_checkpoints_and_state_mark_the_iteration_as_finished(one_iteration):
    _, events, run_dir = one_iteration
    state = json.loads((run_dir / "rzero" / "state.json").read_text())
    assert (state["iteration"], state["phase"]) == (1, "solver")
    assert (run_dir / "checkpoints" / "iteration-1" / "challenger" / "model.safetensors").is_file()
    paths = [e["path"] for e in events if e["type"] == "checkpoint"]
    assert "checkpoints/iteration-1/challenger" in paths
    # the phase's TRL checkpoint (named by its rollout-batch step) was written, then dropped once the phase ended
    assert "checkpoints/iteration-1/challenger-checkpoints/checkpoint-1" in paths
    assert not (run_dir / "checkpoints" / "iteration-1" / "challenger-checkpoints").exists()


def test_the_question_set_reaches_the_event_log_row_for_row(one_iteration):
    _, events, run_dir = one_iteration
    sets = [e for e in events if e["type"] == "questions"]
    assert sets and all(e["iteration"] == 1 and e["total"] == TINY["questions_per_iteration"] for e in sets)
    assert [e["offset"] for e in sets] == [sum(len(s["questions"]) for s in sets[:i]) for i in range(len(sets))]
    logged = [row for e in sets for row in e["questions"]]
    assert logged == read_jsonl(run_dir / "rzero" / "iteration-1" / "pool.jsonl")
    finished = next(e for e in events if e["type"] == "stage" and e["phase"] == "questions" and e["state"] == "finished")
    assert sets[-1]["seq"] < finished["seq"]


def test_the_challenger_trains_on_the_shared_trainer_with_per_rollout_entropy(one_iteration):
    _, events, _ = one_iteration
    challenger = [e for e in events if e["type"] == "group" and e["prompt_id"].startswith("challenger-")]
    assert all(r["entropy"] is not None and r["advantage"] is not None for g in challenger for r in g["rollouts"])
    assert all(g["similarity"] is not None for g in challenger)
    (step,) = [e for e in events if e["type"] == "metrics" and "rzero/format_rate" in e["values"]]
    # the trainer's numbers, renamed so that they do not mix with the solver's DESIGN §5 series
    assert {"rzero/challenger_entropy", "rzero/challenger_clip_ratio_high", "rzero/challenger_loss"} <= set(step["values"])
    assert not {"entropy", "reward/mean", "loss"} & set(step["values"])


# ---------------------------------------------------------------- the untrained-challenger baseline, resume


def test_with_no_challenger_steps_the_base_model_writes_the_pool_and_the_solver_trains(tmp_path):
    """R-Zero Table 3's "Base Challenger": no challenger training, the untrained model writes the questions."""
    result = run_trainer(write_config(tmp_path, **{**QUICK, "challenger_steps": 0}), tmp_path / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    events = read_events(tmp_path / "run" / "events.jsonl")
    for event in events:
        validate_event(event)
    stages = [(e["phase"], e["state"]) for e in events if e["type"] == "stage"]
    assert stages[:3] == [("challenger", "skipped"), ("questions", "started"), ("questions", "finished")]
    assert not [e for e in events if e["type"] == "group" and e["prompt_id"].startswith("challenger-")]
    assert not (tmp_path / "run" / "checkpoints" / "iteration-1" / "challenger").exists()
    state = json.loads((tmp_path / "run" / "rzero" / "state.json").read_text())
    assert Path(state["challenger"]) == DEFAULT_POLICY_DIR
    assert [e for e in events if e["type"] == "questions"]
    solver_steps = [e["step"] for e in events if e["type"] == "metrics" and "reward/mean" in e["values"]]
    assert solver_steps == [1] and events[-1]["state"] == "succeeded"


@pytest.mark.parametrize("override, field", [({"keep_high": 11}, "keep_high"), ({"challenger_rollouts": 1},
                                                                                 "challenger_rollouts")])
def test_a_bad_r_zero_config_fails_before_training_with_a_clear_message(tmp_path, override, field):
    result = run_trainer(write_config(tmp_path, **override), tmp_path / "run")
    assert result.returncode == 2
    assert f"({field})" in result.stderr
    (status,) = [e for e in read_events(tmp_path / "run" / "events.jsonl") if e["type"] == "status"]
    assert status["state"] == "failed" and field in status["message"]
    assert not (tmp_path / "run" / "rzero").exists()
