"""The run event log (DESIGN section 4.2): numbering, resume, torn lines, schema."""

import json
import math

import pytest

from rl.events import (EventSchemaError, EventWriter, last_event, read_events, tail_events,
                       validate_event)


def rollout(index=0, **overrides):
    r = {"index": index, "text": " 2 + 2 = 4. The answer is \\boxed{4}.", "answer": "4", "valid": True,
         "in_majority": True, "reward": 1.0, "advantage": 0.5, "length": 20, "used_for_training": True,
         "entropy": None, "extra": {}}
    r.update(overrides)
    return r


def write_one_of_each(writer):
    writer.status("running", "started")
    writer.metrics(1, {"entropy": 0.7, "reward/mean": 0.5, "maj@16": 1})
    writer.group(1, "p0", [rollout(0), rollout(1, answer=None, valid=False, in_majority=False, reward=0.0)],
                 majority_answer="4", similarity=[[1.0, 0.12345], [0.12345, 1.0]])
    writer.eval(1, "heldout", {"pass@1": 0.25, "maj@16": 0.5})
    writer.checkpoint(1, writer.run_dir / "checkpoints" / "step-1")
    writer.stage(0, "challenger", "started")
    writer.log("info", "hello")
    writer.status("succeeded", "")


def test_every_event_method_writes_a_valid_line_with_seq_from_zero(tmp_path):
    with EventWriter(tmp_path) as writer:
        write_one_of_each(writer)
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    events = [json.loads(line) for line in lines]
    assert [e["seq"] for e in events] == list(range(8))
    assert [e["type"] for e in events] == ["status", "metrics", "group", "eval", "checkpoint", "stage", "log",
                                          "status"]
    for event in events:
        validate_event(event)
        assert isinstance(event["time"], float)


def test_checkpoint_paths_are_stored_relative_to_the_run_dir(tmp_path):
    with EventWriter(tmp_path) as writer:
        writer.checkpoint(3, tmp_path / "checkpoints" / "step-3")
        writer.checkpoint(4, "checkpoints/step-4")
    assert [e["path"] for e in read_events(tmp_path / "events.jsonl")] == ["checkpoints/step-3",
                                                                           "checkpoints/step-4"]


def test_similarity_is_rounded_to_three_decimals(tmp_path):
    with EventWriter(tmp_path) as writer:
        writer.group(0, "p", [rollout(0), rollout(1)], "4", similarity=[[1, 0.123456], [0.123456, 1]])
    (event,) = read_events(tmp_path / "events.jsonl")
    assert event["similarity"] == [[1.0, 0.123], [0.123, 1.0]]


def test_a_new_writer_continues_seq_after_the_existing_log(tmp_path):
    with EventWriter(tmp_path) as writer:
        writer.status("running")
        writer.metrics(1, {"loss": 1.0})
    with EventWriter(tmp_path) as writer:
        assert writer.next_seq == 2
        writer.metrics(2, {"loss": 0.5})
    assert [e["seq"] for e in read_events(tmp_path / "events.jsonl")] == [0, 1, 2]


def test_a_torn_last_line_is_not_read_until_it_is_complete(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(tmp_path) as writer:
        writer.status("running")
    full = json.dumps({"seq": 1, "time": 1.0, "type": "log", "level": "info", "message": "x"}) + "\n"
    with open(path, "a") as f:
        f.write(full[:10])
    assert [e["seq"] for e in read_events(path)] == [0]
    events, offset = tail_events(path)
    assert len(events) == 1
    with open(path, "a") as f:
        f.write(full[10:])
    more, _ = tail_events(path, offset)
    assert [e["seq"] for e in more] == [1]


def test_reopening_after_a_torn_write_cuts_the_fragment_and_continues_seq(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(tmp_path) as writer:
        writer.status("running")
        writer.metrics(1, {"loss": 1.0})
    with open(path, "a") as f:
        f.write('{"seq": 2, "time": 1.0, "type": "me')  # the writer was killed mid-line
    with EventWriter(tmp_path) as writer:
        assert writer.next_seq == 2
        writer.status("cancelled", "bye")
    events = read_events(path)
    assert [e["seq"] for e in events] == [0, 1, 2]
    assert events[-1]["type"] == "status"
    assert path.read_text().endswith("\n")


def test_read_events_after_seq_returns_only_newer_events(tmp_path):
    with EventWriter(tmp_path) as writer:
        for step in range(5):
            writer.metrics(step, {"loss": float(step)})
    assert [e["seq"] for e in read_events(tmp_path / "events.jsonl", after_seq=2)] == [3, 4]
    assert read_events(tmp_path / "missing.jsonl") == []


def test_last_event_finds_the_last_line_of_a_long_log(tmp_path):
    with EventWriter(tmp_path) as writer:
        for step in range(50):  # big group events make the log longer than the backwards read chunk
            writer.group(step, "p", [rollout(i, text="x" * 2000) for i in range(8)], "4")
    assert last_event(tmp_path / "events.jsonl")["seq"] == 49
    assert last_event(tmp_path / "nothing.jsonl") is None


def test_tail_events_resumes_from_the_returned_offset(tmp_path):
    path = tmp_path / "events.jsonl"
    with EventWriter(tmp_path) as writer:
        writer.status("running")
        first, offset = tail_events(path)
        writer.log("info", "one")
        writer.log("info", "two")
        second, offset2 = tail_events(path, offset)
    assert [e["seq"] for e in first] == [0]
    assert [e["message"] for e in second] == ["one", "two"]
    assert tail_events(path, offset2) == ([], offset2)


def test_non_finite_metric_values_are_dropped_with_a_warning_instead_of_writing_invalid_json(tmp_path):
    with EventWriter(tmp_path) as writer:
        writer.metrics(1, {"loss": math.nan, "kl": math.inf, "entropy": 0.5, "grad_norm": None})
    metrics, warning = read_events(tmp_path / "events.jsonl")
    assert metrics["values"] == {"entropy": 0.5}
    assert warning["type"] == "log" and warning["level"] == "warning"
    assert "grad_norm" in warning["message"] and "loss" in warning["message"]


def test_an_invalid_event_is_refused_before_it_is_written(tmp_path):
    with EventWriter(tmp_path) as writer:
        with pytest.raises(EventSchemaError, match="state must be one of"):
            writer.status("exploded")
        with pytest.raises(EventSchemaError, match=r"rollouts\[1\].*reward"):
            writer.group(0, "p", [rollout(0), rollout(1, reward="high")], "4")
        assert writer.next_seq == 0
    assert read_events(tmp_path / "events.jsonl") == []


@pytest.mark.parametrize("event, message", [
    ({"time": 1.0, "type": "log", "level": "info", "message": "x"}, "missing field 'seq'"),
    ({"seq": 0, "time": 1.0, "type": "banana"}, "unknown type 'banana'"),
    ({"seq": 0, "time": 1.0, "type": "metrics", "step": 1, "values": {"loss": "low"}}, r"values\['loss'\]"),
    ({"seq": 0, "time": 1.0, "type": "metrics", "step": True, "values": {}}, "field 'step' must be int"),
    ({"seq": 0, "time": 1.0, "type": "checkpoint", "step": 1, "path": "/abs/ckpt"}, "relative to RUN_DIR"),
    ({"seq": 0, "time": 1.0, "type": "stage", "iteration": 0, "phase": "lunch", "state": "x"}, "phase must be"),
    ({"seq": 0, "time": 1.0, "type": "log", "level": "loud", "message": "x"}, "level must be"),
    ({"seq": 0, "time": 1.0, "type": "group", "step": 0, "prompt_id": "p", "majority_answer": None,
      "similarity": [[1.0]], "rollouts": [rollout(0), rollout(1)]}, "2x2 matrix"),
    ({"seq": 0, "time": 1.0, "type": "group", "step": 0, "prompt_id": "p", "majority_answer": None,
      "similarity": None, "rollouts": [{"index": 0}]}, r"rollouts\[0\]: missing field\(s\) text"),
])
def test_validate_event_names_the_offending_field(event, message):
    with pytest.raises(EventSchemaError, match=message):
        validate_event(event)
