"""rl.launch: the command the supervisor runs for 0, 1 or several GPUs, and a real two-process run on CPU."""

import socket
import subprocess
import sys

import pytest
import yaml

from rl.events import read_events, validate_event
from rl.launch import ZERO_STAGES, trainer_command
from tests.rl.test_train_cli import ENV, REPO, SMALL, write_config, write_prompts

pytestmark = pytest.mark.trainer


@pytest.mark.parametrize("gpus", [0, 1])
def test_zero_or_one_gpu_runs_rl_train_directly(gpus):
    assert trainer_command("c.json", "run", gpus=gpus, python="py") == ["py", "-m", "rl.train", "--config", "c.json",
                                                                         "--out", "run"]
    assert trainer_command("c.json", "run", resume=True, gpus=gpus, python="py")[-1] == "--resume"


def test_several_gpus_go_through_accelerate_launch_with_a_deepspeed_config():
    command = trainer_command("c.json", "run", resume=True, gpus=4, zero_stage=3, python="py")
    assert command[:3] == ["py", "-m", "accelerate.commands.launch"]
    assert command[command.index("--config_file") + 1] == str(ZERO_STAGES[3])
    assert command[command.index("--num_processes") + 1] == "4"
    assert command[-7:] == ["-m", "rl.train", "--config", "c.json", "--out", "run", "--resume"]


@pytest.mark.parametrize("stage", [2, 3])
def test_the_shipped_deepspeed_configs_name_their_zero_stage(stage):
    config = yaml.safe_load(ZERO_STAGES[stage].read_text())
    assert config["distributed_type"] == "DEEPSPEED" and config["deepspeed_config"]["zero_stage"] == stage


@pytest.mark.parametrize("gpus, stage", [(-1, 2), (2, 1), (True, 2)])
def test_a_bad_gpu_count_or_stage_is_refused(gpus, stage):
    with pytest.raises(ValueError):
        trainer_command("c.json", "run", gpus=gpus, zero_stage=stage)


# ---------------------------------------------------------------- two real CPU processes (gloo)

CPU_CONFIG = REPO / "tests" / "rl" / "accelerate_cpu.yaml"
MP_SMALL = {**SMALL, "n_votes": 8, "n_train": 4, "max_completion_length": 32}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_cpu_processes(config, out) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(CPU_CONFIG),
               "--num_processes", "2", "--main_process_port", str(free_port()), "-m", "rl.train",
               "--config", str(config), "--out", str(out)]
    # one thread per rank: the two ranks share the machine's cores
    return subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=240,
                          env={**ENV, "OMP_NUM_THREADS": "1"})


# 2 prompts: each rank holds one whole group; 1 prompt: the group straddles the ranks (rows 0-3 on rank 0, which
# trains all of them, rows 4-7 on rank 1, which pads with masked rows)
@pytest.mark.parametrize("prompts_per_step", [2, 1])
def test_a_two_process_ttrl_run_votes_over_whole_groups_and_logs_each_once(tmp_path, prompts_per_step):
    write_prompts(tmp_path / "prompts.jsonl")
    config = write_config(tmp_path, hyperparameters={**MP_SMALL, "prompts_per_step": prompts_per_step})
    result = launch_two_cpu_processes(config, tmp_path / "run")
    assert result.returncode == 0, result.stderr[-3000:]
    events = read_events(tmp_path / "run" / "events.jsonl")
    for event in events:
        validate_event(event)
    assert [e["seq"] for e in events] == list(range(len(events)))  # one writer: no duplicated or skipped seq
    assert events[-1]["type"] == "status" and events[-1]["state"] == "succeeded"
    assert [e["step"] for e in events if e["type"] == "checkpoint"] == [1, 2]  # rank 0 alone records checkpoints
    for step in (1, 2):
        groups = [e for e in events if e["type"] == "group" and e["step"] == step]
        assert len({g["prompt_id"] for g in groups}) == len(groups) == prompts_per_step
        for group in groups:
            rollouts = group["rollouts"]
            assert [r["index"] for r in rollouts] == list(range(8))  # all n_votes, from both ranks
            assert len(group["similarity"]) == 8
            trained = [r for r in rollouts if r["used_for_training"]]
            assert [r["index"] for r in trained] == [0, 1, 2, 3]  # the first n_train, as on one process
            assert all(r["advantage"] is not None and r["entropy"] is not None for r in trained)
            assert abs(sum(r["advantage"] for r in trained)) < 1e-3  # normalised over the trained rollouts
            votes = [r["answer"] for r in rollouts if r["answer"] is not None]
            if group["majority_answer"] is not None:  # the vote counted all 8 answers, not one rank's half
                assert votes.count(group["majority_answer"]) == max(votes.count(a) for a in votes)
                assert all(r["reward"] == float(r["in_majority"]) for r in rollouts)
    assert len([e for e in events if e["type"] == "metrics"]) == 2


def test_a_multi_process_launch_of_r_zero_or_an_uneven_split_fails_with_one_clear_message(tmp_path):
    write_prompts(tmp_path / "prompts.jsonl")
    cases = [({"method": "r_zero", "hyperparameters": {**SMALL, "prompts_per_update": 1}},
              "r_zero runs on one process only"),
             ({"hyperparameters": {**MP_SMALL, "n_votes": 3, "n_train": 2, "prompts_per_step": 1}},
              "do not split evenly over 2 processes")]
    for k, (overrides, message) in enumerate(cases):
        config = write_config(tmp_path, name=f"config{k}.json", **overrides)
        run_dir = tmp_path / f"run{k}"
        for rank in (1, 0):  # rank 1 writes nothing, rank 0 the one failed status
            result = subprocess.run([sys.executable, "-m", "rl.train", "--config", str(config), "--out",
                                     str(run_dir)], cwd=REPO, capture_output=True, text=True, timeout=60,
                                    env={**ENV, "WORLD_SIZE": "2", "RANK": str(rank)})
            assert result.returncode == 2 and message in result.stderr
        (event,) = read_events(run_dir / "events.jsonl")
        assert event["state"] == "failed" and message in event["message"]
