"""The warm trainer the method tests use (tests/rl/trainer_process.py) answers as `python -m rl.train` does: the same
exit status, output and event log, and the same rollouts, rewards and advantages from the same config."""

import pytest

from rl.events import read_events
from tests.rl import trainer_process
from tests.rl.test_train_cli import run_trainer, write_config, write_prompts

pytestmark = pytest.mark.trainer


def test_a_bad_config_gets_the_command_lines_exit_status_message_and_event(tmp_path):
    write_prompts(tmp_path / "prompts.jsonl")
    config = write_config(tmp_path, method="magic")
    cold = run_trainer(config, tmp_path / "cold")
    warm = trainer_process.run_trainer(config, tmp_path / "warm")
    assert (warm.returncode, warm.stdout, warm.stderr) == (cold.returncode, cold.stdout, cold.stderr) != (0, "", "")
    strip = lambda events: [{k: v for k, v in e.items() if k != "time"} for e in events]  # noqa: E731
    assert strip(read_events(tmp_path / "warm" / "events.jsonl")) == strip(read_events(tmp_path / "cold" /
                                                                                         "events.jsonl"))



def test_a_run_trains_the_same_rollouts_and_rewards_as_the_command_line(tmp_path):
    write_prompts(tmp_path / "prompts.jsonl")
    config = write_config(tmp_path, max_steps=1)
    cold = run_trainer(config, tmp_path / "cold")
    warm = trainer_process.run_trainer(config, tmp_path / "warm")
    assert cold.returncode == warm.returncode == 0, (cold.stderr[-2000:], warm.stderr[-2000:])

    def groups(run):
        return [(g["prompt_id"], [(r["text"], r["reward"], r["advantage"]) for r in g["rollouts"]])
                for g in read_events(tmp_path / run / "events.jsonl") if g["type"] == "group"]

    assert groups("warm") == groups("cold") != []
