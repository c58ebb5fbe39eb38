"""R-Zero stopped by SIGTERM inside its challenger phase checkpoints that phase, and `--resume` goes on from that
step (moved from tests/rl/test_rzero_loop.py: a long scenario)."""
import pytest

from rl.events import read_events, validate_event
from tests.rl.test_rzero_loop import ENV, QUICK, run_trainer, write_config
from tests.rl.trainer_process import sigterm_after_the_first_step

pytestmark = pytest.mark.trainer


def test_sigterm_inside_a_phase_checkpoints_it_and_resume_continues_from_that_step(tmp_path):
    run_dir = tmp_path / "run"
    long = write_config(tmp_path, **{**QUICK, "challenger_steps": 50, "save_every": 0})
    sigterm_after_the_first_step(long, run_dir, ENV)

    events = read_events(run_dir / "events.jsonl")
    done = [e["step"] for e in events if e["type"] == "metrics"]
    assert done == list(range(1, len(done) + 1)) and len(done) < 50
    assert events[-1]["state"] == "cancelled" and "from its last checkpoint" in events[-1]["message"]
    assert [(e["phase"], e["state"]) for e in events if e["type"] == "stage"][-1] == ("challenger", "cancelled")
    (checkpoint,) = [e for e in events if e["type"] == "checkpoint"]
    assert checkpoint["step"] == done[-1]
    assert checkpoint["path"] == f"checkpoints/iteration-1/challenger-checkpoints/checkpoint-{done[-1]}"
    assert (run_dir / checkpoint["path"] / "trainer_state.json").is_file()

    resumed = write_config(tmp_path, **{**QUICK, "challenger_steps": done[-1] + 1, "save_every": 0})
    result = run_trainer(resumed, run_dir, "--resume")
    assert result.returncode == 0, result.stderr[-3000:]
    events = read_events(run_dir / "events.jsonl")
    for event in events:
        validate_event(event)
    assert [e["seq"] for e in events] == list(range(len(events)))
    assert any(e["type"] == "log" and f"continues from checkpoints/iteration-1/challenger-checkpoints/checkpoint-"
               f"{done[-1]}" in e["message"] for e in events)
    challenger_steps = [e["step"] for e in events if e["type"] == "metrics" and "rzero/format_rate" in e["values"]]
    assert challenger_steps == list(range(1, done[-1] + 2))  # the phase went on from its checkpoint: no step twice
    solver_steps = [e["step"] for e in events if e["type"] == "metrics" and "reward/mean" in e["values"]]
    assert solver_steps == [done[-1] + 2]  # one step counter across the phases
    assert events[-1]["state"] == "succeeded"
