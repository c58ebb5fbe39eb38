"""rl.launch: the command the supervisor runs for 0, 1 or several GPUs, and the honest multi-GPU refusal."""

import json
import subprocess
import sys

import pytest
import yaml

from rl.events import read_events
from rl.launch import ZERO_STAGES, trainer_command
from tests.rl.test_train_cli import ENV, REPO, write_config, write_prompts


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


def test_a_multi_process_launch_fails_before_training_with_one_clear_message(tmp_path):
    write_prompts(tmp_path / "prompts.jsonl")
    config = write_config(tmp_path)
    for rank in (1, 0):  # rank 1 writes nothing, rank 0 the one failed status
        result = subprocess.run([sys.executable, "-m", "rl.train", "--config", str(config), "--out",
                                 str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True, timeout=60,
                                env={**ENV, "WORLD_SIZE": "2", "RANK": str(rank)})
        assert result.returncode == 2 and "several processes is not supported" in result.stderr
    (event,) = read_events(tmp_path / "run" / "events.jsonl")
    assert event["state"] == "failed" and "n_votes rollouts" in event["message"]
