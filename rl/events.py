"""The run event log, RUN_DIR/events.jsonl (DESIGN section 4.2).

The trainer appends one JSON object per line; the worker's supervisor tails the
file and turns events into database rows keyed by `(run, seq)`. So:

- `seq` starts at 0 and increases by one per event, continuing across resumes
  (a new EventWriter on an existing log starts after its last complete line);
- every event is written with a single `write` of a full line and flushed, so a
  reader sees either the whole line or a torn tail without its newline, which
  `read_events` and `tail_events` hold back until it is complete;
- a torn tail left by a killed writer is cut off when the log is reopened, so
  the next event starts on a fresh line.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"

EVENT_TYPES = ("metrics", "group", "eval", "checkpoint", "stage", "questions", "status", "log")
STATUS_STATES = ("running", "succeeded", "failed", "cancelled")
STAGE_PHASES = ("challenger", "questions", "solver")
LOG_LEVELS = ("debug", "info", "warning", "error")
ROLLOUT_FIELDS = ("index", "text", "answer", "valid", "in_majority", "reward", "advantage", "length",
                  "used_for_training", "entropy", "extra")
# one candidate of an R-Zero question set (`questions` events): the pool row of rl/methods/r_zero/training.py
QUESTION_FIELDS = ("id", "question", "text", "p_hat", "pseudo_label", "answers", "kept")
QUESTIONS_PER_EVENT = 200  # a pool of thousands of questions is written in events of at most this many rows


class EventSchemaError(ValueError):
    """An event does not follow DESIGN section 4.2; the message names the offending field."""


# ---------------------------------------------------------------- writing


class EventWriter:
    """Appends events to RUN_DIR/events.jsonl, continuing `seq` from an existing log."""

    def __init__(self, run_dir: str | os.PathLike, fsync: bool = False):
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.path = self.run_dir / EVENTS_FILE
        self.fsync = fsync
        self._lock = threading.Lock()
        _cut_torn_tail(self.path)
        last = last_event(self.path)
        self.next_seq = 0 if last is None else int(last["seq"]) + 1
        self._file = open(self.path, "a", encoding="utf-8")

    # one method per event type of DESIGN section 4.2

    def metrics(self, step: int, values: dict[str, float]) -> dict:
        finite = {k: float(v) for k, v in values.items() if _is_number(v) and math.isfinite(v)}
        dropped = sorted(set(values) - set(finite))
        event = self.write("metrics", step=int(step), values=finite)
        if dropped:  # JSON has no NaN; say which values were missing instead of writing invalid JSON
            self.log("warning", f"step {step}: non-finite or missing metric values dropped: {', '.join(dropped)}")
        return event

    def group(self, step: int, prompt_id: str, rollouts: list[dict], majority_answer: str | None,
              similarity: list[list[float]] | None = None) -> dict:
        if similarity is not None:
            similarity = [[round(float(x), 3) for x in row] for row in similarity]
        return self.write("group", step=int(step), prompt_id=str(prompt_id), majority_answer=majority_answer,
                          similarity=similarity, rollouts=rollouts)

    def eval(self, step: int, prompt_set: str, values: dict[str, float]) -> dict:
        return self.write("eval", step=int(step), prompt_set=prompt_set, values=values)

    def checkpoint(self, step: int, path: str | os.PathLike) -> dict:
        path = Path(path)
        if path.is_absolute():  # the contract stores it relative to RUN_DIR
            path = path.resolve().relative_to(self.run_dir.resolve())
        return self.write("checkpoint", step=int(step), path=path.as_posix())

    def stage(self, iteration: int, phase: str, state: str, counts: dict[str, int] | None = None) -> dict:
        """R-Zero phase boundaries; `counts` (steps, pool, valid, kept, questions) is optional."""
        fields = {} if counts is None else {"counts": {k: int(v) for k, v in counts.items()}}
        return self.write("stage", iteration=int(iteration), phase=phase, state=state, **fields)

    def questions(self, iteration: int, rows: list[dict]) -> list[dict]:
        """An R-Zero iteration's question set, `rows` in pool order, as `questions` events of at most
        QUESTIONS_PER_EVENT rows: each carries its rows' `offset` in the pool and the pool's `total`, so a reader
        can tell a complete set, and a set written again (offset 0) supersedes the earlier one."""
        fields = [{k: row[k] for k in QUESTION_FIELDS} for row in rows]
        return [self.write("questions", iteration=int(iteration), offset=start, total=len(rows),
                           questions=fields[start:start + QUESTIONS_PER_EVENT])
                for start in range(0, len(rows), QUESTIONS_PER_EVENT)]

    def status(self, state: str, message: str = "") -> dict:
        return self.write("status", state=state, message=message)

    def log(self, level: str, message: str) -> dict:
        return self.write("log", level=level, message=message)

    # the one place that appends

    def write(self, type: str, **fields: Any) -> dict:
        """Validate, number and append one event; returns it as written."""
        with self._lock:
            event = {"seq": self.next_seq, "time": round(time.time(), 3), "type": type, **fields}
            validate_event(event)
            line = json.dumps(event, ensure_ascii=False, allow_nan=False, separators=(",", ":")) + "\n"
            self._file.write(line)
            self._file.flush()
            if self.fsync:
                os.fsync(self._file.fileno())
            self.next_seq += 1
            return event

    def sync(self) -> None:
        """Force what was written to disk (called once per step by the trainer)."""
        with self._lock:
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        with self._lock:
            if not self._file.closed:
                self._file.flush()
                self._file.close()

    def __enter__(self) -> "EventWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _cut_torn_tail(path: Path) -> None:
    """Drop a last line without its newline: it was never a complete event."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as f:
        size = f.seek(0, os.SEEK_END)
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return
        end = _last_newline_before(f, size)
        f.truncate(end)


def _last_newline_before(f, end: int, chunk: int = 1 << 16) -> int:
    """Offset just past the last b"\\n" before `end` (0 when there is none)."""
    pos = end
    while pos > 0:
        start = max(0, pos - chunk)
        f.seek(start)
        block = f.read(pos - start)
        i = block.rfind(b"\n")
        if i >= 0:
            return start + i + 1
        pos = start
    return 0


# ---------------------------------------------------------------- reading


def tail_events(path: str | os.PathLike, offset: int = 0, max_bytes: int | None = None) -> tuple[list[dict], int]:
    """Complete events from byte `offset` on, and the offset to continue from.

    A torn last line is not returned and the offset stays before it, so the next
    call picks it up once its writer has finished it. With `max_bytes`, about that many
    bytes are read (more only to finish a line longer than that), so a reader catching
    up on a long log holds one bounded batch at a time.
    """
    path = Path(path)
    if not path.exists():
        return [], offset
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read() if max_bytes is None else f.read(max_bytes)
        while max_bytes is not None and b"\n" not in data:  # one line longer than the budget: read to its end
            more = f.read(max_bytes)
            if not more:
                break
            data += more
    complete = data[:data.rfind(b"\n") + 1]
    events = []
    for number, line in enumerate(complete.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError as e:
            raise EventSchemaError(f"{path}: line {number} after byte {offset} is not JSON: {e}") from None
    return events, offset + len(complete)


def read_events(path: str | os.PathLike, after_seq: int = -1) -> list[dict]:
    """Every complete event with `seq > after_seq`, in file order."""
    events, _ = tail_events(path)
    return [e for e in events if e.get("seq", -1) > after_seq]


def last_event(path: str | os.PathLike) -> dict | None:
    """The last complete event, reading the file backwards (logs with big group events get long)."""
    path = Path(path)
    if not path.exists():
        return None
    with open(path, "rb") as f:
        end = f.seek(0, os.SEEK_END)
        while end > 0:
            f.seek(end - 1)
            if f.read(1) != b"\n":  # a torn tail: step back to the last complete line
                end = _last_newline_before(f, end)
                continue
            start = _last_newline_before(f, end - 1)
            f.seek(start)
            line = f.read(end - start).strip()
            if line:
                return json.loads(line)
            end = start
    return None


# ---------------------------------------------------------------- schema


def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _require(condition: bool, where: str, message: str) -> None:
    if not condition:
        raise EventSchemaError(f"{where}: {message}")


def _check(event: dict, where: str, field: str, kind: str, nullable: bool = False) -> None:
    _require(field in event, where, f"missing field {field!r}")
    value = event[field]
    if value is None and nullable:
        return
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "number": _is_number(value) and math.isfinite(value),
        "str": isinstance(value, str),
        "bool": isinstance(value, bool),
        "dict": isinstance(value, dict),
        "list": isinstance(value, list),
    }[kind]
    _require(ok, where, f"field {field!r} must be {'null or ' if nullable else ''}{kind}, got {value!r:.80}")


def _check_values(event: dict, where: str) -> None:
    _check(event, where, "values", "dict")
    for name, value in event["values"].items():
        _require(isinstance(name, str) and _is_number(value) and math.isfinite(value), where,
                 f"values[{name!r}] must be a finite number, got {value!r}")


def _check_rollout(rollout: Any, where: str) -> None:
    _require(isinstance(rollout, dict), where, f"must be an object, got {type(rollout).__name__}")
    missing = [f for f in ROLLOUT_FIELDS if f not in rollout]
    _require(not missing, where, f"missing field(s) {', '.join(missing)}")
    _check(rollout, where, "index", "int")
    _check(rollout, where, "text", "str")
    _check(rollout, where, "answer", "str", nullable=True)
    _check(rollout, where, "valid", "bool")
    _check(rollout, where, "in_majority", "bool")
    _check(rollout, where, "reward", "number")
    _check(rollout, where, "advantage", "number", nullable=True)
    _check(rollout, where, "length", "int")
    _check(rollout, where, "used_for_training", "bool")
    _check(rollout, where, "entropy", "number", nullable=True)
    _check(rollout, where, "extra", "dict")


def _check_question(row: Any, where: str) -> None:
    _require(isinstance(row, dict), where, f"must be an object, got {type(row).__name__}")
    missing = [f for f in QUESTION_FIELDS if f not in row]
    _require(not missing, where, f"missing field(s) {', '.join(missing)}")
    _check(row, where, "id", "str")
    _check(row, where, "question", "str", nullable=True)  # null: the challenger's output failed the format check
    _check(row, where, "text", "str")
    _check(row, where, "p_hat", "number", nullable=True)
    _check(row, where, "pseudo_label", "str", nullable=True)
    _check(row, where, "answers", "list")
    _require(all(a is None or isinstance(a, str) for a in row["answers"]), where, "answers must be strings or null")
    _check(row, where, "kept", "bool")


def validate_event(event: Any) -> None:
    """Raise EventSchemaError naming the field when `event` breaks DESIGN section 4.2."""
    _require(isinstance(event, dict), "event", f"must be a JSON object, got {type(event).__name__}")
    where = f"event seq={event.get('seq')!r} type={event.get('type')!r}"
    _check(event, where, "seq", "int")
    _require(event["seq"] >= 0, where, "seq must be >= 0")
    _check(event, where, "time", "number")
    _check(event, where, "type", "str")
    kind = event["type"]
    _require(kind in EVENT_TYPES, where, f"unknown type {kind!r}; expected one of {', '.join(EVENT_TYPES)}")

    if kind == "metrics":
        _check(event, where, "step", "int")
        _check_values(event, where)
    elif kind == "group":
        _check(event, where, "step", "int")
        _check(event, where, "prompt_id", "str")
        _check(event, where, "majority_answer", "str", nullable=True)
        _check(event, where, "rollouts", "list")
        _require(len(event["rollouts"]) > 0, where, "rollouts must not be empty")
        for i, rollout in enumerate(event["rollouts"]):
            _check_rollout(rollout, f"{where} rollouts[{i}]")
        _check(event, where, "similarity", "list", nullable=True)
        if event["similarity"] is not None:
            g = len(event["rollouts"])
            matrix = event["similarity"]
            _require(len(matrix) == g and all(isinstance(r, list) and len(r) == g for r in matrix), where,
                     f"similarity must be a {g}x{g} matrix (one row and column per rollout)")
            _require(all(_is_number(x) and math.isfinite(x) for r in matrix for x in r), where,
                     "similarity entries must be finite numbers")
    elif kind == "eval":
        _check(event, where, "step", "int")
        _check(event, where, "prompt_set", "str")
        _check_values(event, where)
    elif kind == "checkpoint":
        _check(event, where, "step", "int")
        _check(event, where, "path", "str")
        _require(not os.path.isabs(event["path"]), where, f"path must be relative to RUN_DIR, got {event['path']!r}")
    elif kind == "stage":
        _check(event, where, "iteration", "int")
        _check(event, where, "phase", "str")
        _require(event["phase"] in STAGE_PHASES, where,
                 f"phase must be one of {', '.join(STAGE_PHASES)}, got {event['phase']!r}")
        _check(event, where, "state", "str")
        if "counts" in event:
            _check(event, where, "counts", "dict")
    elif kind == "questions":
        _check(event, where, "iteration", "int")
        _check(event, where, "offset", "int")
        _check(event, where, "total", "int")
        _require(0 <= event["offset"] <= event["total"], where, "offset must be in [0, total]")
        _check(event, where, "questions", "list")
        _require(event["offset"] + len(event["questions"]) <= event["total"], where,
                 "questions run past the set's total")
        for i, row in enumerate(event["questions"]):
            _check_question(row, f"{where} questions[{i}]")
    elif kind == "status":
        _check(event, where, "state", "str")
        _require(event["state"] in STATUS_STATES, where,
                 f"state must be one of {', '.join(STATUS_STATES)}, got {event['state']!r}")
        _check(event, where, "message", "str")
    elif kind == "log":
        _check(event, where, "level", "str")
        _require(event["level"] in LOG_LEVELS, where,
                 f"level must be one of {', '.join(LOG_LEVELS)}, got {event['level']!r}")
        _check(event, where, "message", "str")
