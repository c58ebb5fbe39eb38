"""R-Zero through `python -m rl.train`: one tiny iteration of challenger, questions and solver phases.

The challenger and solver are both the default policy, which learned the challenger task
(rl.arithmetic.CHALLENGER_PROMPT) along with arithmetic; sizes are tiny so the run takes seconds.
"""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rl.answers import majority_vote
from rl.events import read_events, validate_event
from rl.policy import heldout_problems
from rl.rewards.rzero import extract_question, keep_for_solver, solver_agreement

REPO = Path(__file__).resolve().parents[2]
SENTINEL = "LABEL-SENTINEL-7319"  # the prompt file's labels: must never show up anywhere in the run
TINY = {"iterations": 1, "challenger_steps": 1, "solver_steps": 1, "questions_per_iteration": 24,
        "challenger_rollouts": 4, "prompts_per_step": 2, "solver_samples": 10, "n_votes": 4, "n_train": 4,
        "max_completion_length": 48, "learning_rate": 1e-4, "eval_every": 0}
QUESTION_FIELDS = {"id", "question", "p_hat", "pseudo_label", "answers"}


def write_config(tmp: Path, **hyperparameters) -> Path:
    rows = [{"id": p["id"], "prompt": p["prompt"], "label": SENTINEL} for p in heldout_problems(2)]
    (tmp / "prompts.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    config = {"method": "r_zero", "model": "default", "prompts": str(tmp / "prompts.jsonl"), "eval_prompts": None,
              "embedding_model": None, "max_steps": 1, "seed": 0, "hyperparameters": {**TINY, **hyperparameters}}
    (tmp / "config.json").write_text(json.dumps(config))
    return tmp / "config.json"


def run_trainer(config: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rl.train", "--config", str(config), "--out", str(out)], cwd=REPO,
                          env={"HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=300)


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
        assert row["pseudo_label"] == majority_vote(row["answers"])
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
    assert paths[0] == "checkpoints/iteration-1/challenger"


@pytest.mark.parametrize("override, field", [({"keep_high": 11}, "keep_high"), ({"challenger_rollouts": 1},
                                                                                 "challenger_rollouts")])
def test_a_bad_r_zero_config_fails_before_training_with_a_clear_message(tmp_path, override, field):
    result = run_trainer(write_config(tmp_path, **override), tmp_path / "run")
    assert result.returncode == 2
    assert f"({field})" in result.stderr
    (status,) = [e for e in read_events(tmp_path / "run" / "events.jsonl") if e["type"] == "status"]
    assert status["state"] == "failed" and field in status["message"]
    assert not (tmp_path / "run" / "rzero").exists()


# ---------------------------------------------------------------- the two reward functions, without a model


def test_the_challenger_reward_is_uncertainty_minus_the_repetition_penalty_and_zero_without_tags(monkeypatch):
    from rl import rzero_phases
    from rl.methods import validate_hyperparameters

    # a solver that splits 5/5 on every question: p̂ = 0.5, so r_uncertainty = 1
    monkeypatch.setattr(rzero_phases, "solver_answers", lambda solver, tokenizer, questions, hp, stop=None:
                        [["1"] * 5 + ["2"] * 5 for _ in questions])
    reward = rzero_phases.ChallengerReward(None, None, validate_hyperparameters("r_zero", {}), group_size=4)
    logged = {}
    texts = ["<question>Sam has 23 apples and buys 45 more. How many apples does Sam have now?</question>",
             "Sam has 23 apples.",  # no tags: the format check fails
             "<question>A box holds 12 coins. Mia puts in 30 more. How many coins are in the box?</question>",
             "<question>Sam has 23 apples and buys 45 more. How many apples does Sam have now?</question>"]
    rewards = reward(prompts=[""] * 4, completions=texts, completion_ids=[[0]] * 4, prompt_id=["challenger-0"] * 4,
                     log_metric=logged.__setitem__)
    # the two identical questions share a cluster of 2 of the 3 valid ones: 1 − 2/3; the other: 1 − 1/3
    assert rewards == pytest.approx([1 / 3, 0.0, 2 / 3, 1 / 3])
    assert logged["rzero/format_rate"] == 0.75 and logged["rzero/uncertainty_mean"] == 1.0
    (group,) = reward.pop_groups()
    assert [r["valid"] for r in group["rollouts"]] == [True, False, True, True]


def test_the_solver_reward_is_agreement_with_the_pseudo_label_not_with_its_own_majority():
    from rl.rzero_phases import SolverReward

    reward = SolverReward({"it1-q0": "1"}, group_size=4)
    texts = ["\\boxed{2}", "\\boxed{2}", "\\boxed{2}", "\\boxed{1}"]
    rewards = reward(prompts=[""] * 4, completions=texts, completion_ids=[[0]] * 4, prompt_id=["it1-q0"] * 4,
                     log_metric=lambda name, value: None)
    assert rewards == [0.0, 0.0, 0.0, 1.0]
    (group,) = reward.pop_groups()
    assert group["majority_answer"] == "1" and [r["in_majority"] for r in group["rollouts"]] == [False] * 3 + [True]
