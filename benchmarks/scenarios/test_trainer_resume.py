"""`python -m rl.train` stopped by SIGTERM: the step in progress ends, a checkpoint is written and the run says
`cancelled`; `--resume` continues its steps and its event seq, and takes the steps a run straight through takes
(moved from tests/rl/test_train_cli.py: a long scenario)."""
import pytest

from rl.events import validate_event
from tests.rl.test_train_cli import ENV, SMALL, events_of, of_type, run_trainer, write_config, write_prompts
from tests.rl.trainer_process import sigterm_after_the_first_step

pytestmark = pytest.mark.trainer


def test_sigterm_checkpoints_and_cancels_then_resume_continues_steps_and_seq(tmp_path):
    write_prompts(tmp_path / "prompts.jsonl")
    run_dir = tmp_path / "run"
    long_config = write_config(tmp_path, max_steps=200, hyperparameters={**SMALL, "save_every": 0})
    sigterm_after_the_first_step(long_config, run_dir, ENV, within=180)

    events = events_of(run_dir)
    last_step = of_type(events, "metrics")[-1]["step"]
    assert last_step < 200
    assert events[-1]["type"] == "status" and events[-1]["state"] == "cancelled"
    (checkpoint,) = of_type(events, "checkpoint")
    assert checkpoint["step"] == last_step
    assert (run_dir / checkpoint["path"] / "trainer_state.json").exists()

    resume_config = write_config(tmp_path, "resume.json", max_steps=last_step + 2,
                                 hyperparameters={**SMALL, "save_every": 0})
    result = run_trainer(resume_config, run_dir, "--resume")
    assert result.returncode == 0, result.stderr[-3000:]
    events = events_of(run_dir)
    for event in events:
        validate_event(event)
    assert [e["seq"] for e in events] == list(range(len(events)))  # seq continues across the resume
    assert [m["step"] for m in of_type(events, "metrics")] == list(range(1, last_step + 3))  # no gap, no repeat
    resumed = [e for e in of_type(events, "status") if "resumed" in e["message"]]
    assert resumed and f"checkpoint-{last_step}" in resumed[0]["message"]
    assert events[-1]["state"] == "succeeded"
    assert sorted({g["step"] for g in of_type(events, "group")}) == list(range(1, last_step + 3))

    # the same config run straight through: the interrupted-and-resumed run must take the same steps
    straight = run_trainer(write_config(tmp_path, "straight.json", max_steps=last_step + 2,
                                        hyperparameters={**SMALL, "save_every": 0}), tmp_path / "straight")
    assert straight.returncode == 0, straight.stderr[-3000:]
    reference = events_of(tmp_path / "straight")

    def steps(evs):  # which prompts each step trained on, in order
        return ([m["step"] for m in of_type(evs, "metrics")],
                [(g["step"], g["prompt_id"]) for g in of_type(evs, "group")])

    assert steps(events) == steps(reference)
