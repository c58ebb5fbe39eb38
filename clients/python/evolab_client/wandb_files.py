"""Reading the file W&B writes while a run trains: `wandb/run-*/run-ID.wandb` (online and offline alike).

The file is a LevelDB-style log (what the older `wandb.sdk.internal.datastore` read; wandb ≥ 0.19 writes it from its
Go core and ships no Python reader): a 7-byte header `:W&B` + magic 0xBEE1 + version 0, then 32 KiB blocks of
chunks, each `crc32 (4) | length (2) | type (1) | data`, type FULL, or FIRST, MIDDLE..., LAST for a record split over
blocks; fewer than 7 bytes left in a block are zero padding. The crc is zlib's crc32 of the data seeded with the
crc32 of the type byte. A record is a protobuf `wandb_internal_pb2.Record` (the `wandb` package's own definition:
`pip install './clients/python[wandb]'`).

`WandbFile.read()` returns the records complete so far and the byte offset after the last of them, so a follower
reads a file being written up to its last whole record and goes on from that offset after a restart.
"""
from __future__ import annotations

import json
import math
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

HEADER = b":W&B" + struct.pack("<HB", 0xBEE1, 0)
BLOCK = 32768
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
_TYPE_CRC = [zlib.crc32(bytes([t])) for t in range(LAST + 1)]
# what W&B adds to each history row beside what the trainer logged
STEP_KEYS = ("_step",)
BOOKKEEPING = ("_step", "_timestamp", "_runtime")


class WandbFileError(ValueError):
    """The file is not W&B's log, or a record in it is damaged; the message names the file and the byte."""


def protobuf_records():
    """wandb's Record message, or a clear message naming the extra to install."""
    try:
        from wandb.proto import wandb_internal_pb2
    except ImportError:
        raise SystemExit("evolab: reading W&B's files needs the wandb package: pip install './clients/python[wandb]' "
                         "(or pip install wandb)") from None
    return wandb_internal_pb2.Record


def read_chunks(data: bytes, start: int, path) -> tuple[list[bytes], int]:
    """The whole records in `data` (the file from byte `start` on; blocks are aligned to the file's start), and the
    file offset after the last of them. A record cut off at the end (the writer is still on it) waits for the next
    read."""
    def at(position: int) -> int:  # an offset of the file as an index of data
        return position - start

    position = start
    if start == 0:
        if len(data) < len(HEADER):
            return [], 0
        if data[: len(HEADER)] != HEADER:
            raise WandbFileError(f"{path} is not a W&B run file (no :W&B header)")
        position = len(HEADER)
    records, pending, done = [], None, position
    while True:
        left = BLOCK - position % BLOCK
        if left < CHUNK_HEADER:  # the block's zero padding
            position += left
            continue
        if at(position) + CHUNK_HEADER > len(data):
            break
        checksum, length, kind = struct.unpack_from("<IHB", data, at(position))
        if kind == 0 and length == 0 and checksum == 0:  # zeros to the block's end, or not written yet
            if at(position) + left > len(data):
                break
            position += left
            if pending is None:
                done = position
            continue
        end = position + CHUNK_HEADER + length
        if at(end) > len(data):
            break
        if kind > LAST or length > left - CHUNK_HEADER:
            raise WandbFileError(f"{path}: damaged record at byte {position} (type {kind}, length {length})")
        chunk = data[at(position) + CHUNK_HEADER:at(end)]
        if zlib.crc32(chunk, _TYPE_CRC[kind]) != checksum:
            raise WandbFileError(f"{path}: checksum mismatch in the record at byte {position}")
        position = end
        if kind == FULL and pending is None:
            records.append(chunk)
            done = position
        elif kind == FIRST and pending is None:
            pending = [chunk]
        elif pending is not None and kind == MIDDLE:
            pending.append(chunk)
        elif pending is not None and kind == LAST:
            records.append(b"".join(pending + [chunk]))
            pending, done = None, position
        else:
            raise WandbFileError(f"{path}: a record continues at byte {position} without its start")
    return records, done


@dataclass
class Point:
    key: str
    value: float
    step: int
    timestamp: int  # ms


@dataclass
class WandbBatch:
    """What the records read at once hold for Evolab."""

    points: list[Point] = field(default_factory=list)
    config: dict = field(default_factory=dict)  # flattened, as params
    run: dict = field(default_factory=dict)  # project, name, id, start (ms)
    skipped: dict = field(default_factory=dict)  # kind of value (table, image, histogram, ...) -> count
    tables: list[tuple[int, str, dict]] = field(default_factory=list)  # (step, key, the table's value) to read
    finished: bool | None = None  # the exit record: True when its exit code was 0
    step_metric: str | None = None
    step_value: float | None = None


class WandbRun:
    """One W&B run file, read from where the last read stopped; keeps the state a step's choice depends on."""

    def __init__(self, path, step_metric: str | None = None, step_value: float | None = None):
        self.path = Path(path)
        self.step_metric = step_metric  # the key a define_metric("*", step_metric=...) made the x-axis
        self.step_value = step_value  # its last value: a row without it is at that step (W&B's step_sync)
        self.Record = protobuf_records()

    def read(self, offset: int, limit: int = -1) -> tuple[WandbBatch, int]:
        """The records from byte `offset` on (at most `limit` bytes of the file read), and the offset after them."""
        with open(self.path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(limit)
        chunks, end = read_chunks(data, offset, self.path)
        batch = WandbBatch()
        for chunk in chunks:
            record = self.Record()
            record.ParseFromString(chunk)
            self._take(record, batch)
        batch.step_metric, batch.step_value = self.step_metric, self.step_value
        return batch, end

    def _take(self, record, batch: WandbBatch) -> None:
        kind = record.WhichOneof("record_type")
        if kind == "history":
            self._history(record.history, batch)
        elif kind == "run":
            run = record.run
            batch.run = {"project": run.project, "name": run.display_name or run.run_id, "id": run.run_id,
                         "start": int(run.start_time.seconds * 1000 + run.start_time.nanos // 1_000_000)}
            batch.config.update(flatten(_updates(run.config.update)))
        elif kind == "config":
            batch.config.update(flatten(_updates(record.config.update)))
        elif kind == "metric":
            metric = record.metric
            if metric.step_metric and (metric.glob_name in ("*", "**") or not metric.name):
                self.step_metric = metric.step_metric
        elif kind == "exit":
            batch.finished = record.exit.exit_code == 0

    def _history(self, history, batch: WandbBatch) -> None:
        values = _tree(history.item)
        step = values.get("_step")
        if self.step_metric:  # TRL: define_metric("train/global_step"), define_metric("*", step_metric=..., step_sync)
            if _number(values.get(self.step_metric)):
                self.step_value = values[self.step_metric]
            step = self.step_value if self.step_value is not None else 0
        if not _number(step):
            step = history.step.num
        timestamp = values.get("_timestamp")
        millis = int(round(timestamp * 1000)) if _number(timestamp) else 0
        step, points = int(step), batch.points
        for key, value in _leaves(values):
            if key in BOOKKEEPING or key == self.step_metric:
                continue
            kind = type(value)
            if kind is float or kind is int or kind is bool:
                points.append(Point(key, float(value), step, millis))
            elif isinstance(value, dict):  # a media value: {"_type": "table-file", ...}, a histogram, an image
                kind = value["_type"].removesuffix("-file")
                batch.skipped[kind] = batch.skipped.get(kind, 0) + 1
                if kind in ("table", "incremental-table", "partitioned-table"):
                    batch.tables.append((step, key, value))
            elif value is None or value in ("NaN", "Infinity", "-Infinity"):
                points.append(Point(key, _special(value), step, millis))
            else:
                batch.skipped["other"] = batch.skipped.get("other", 0) + 1


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _tree(items) -> dict:
    """A history row as the trainer logged it: W&B's core writes a nested value (and every media value, a dict
    with `_type`) as one item per leaf, keyed by its path."""
    tree: dict = {}
    texts = [item.value_json for item in items]
    try:  # the row's values in one parse (a row is tens of numbers: one json.loads each was most of a read's time)
        values = json.loads("[" + ",".join(texts) + "]")
        if len(values) != len(texts):  # a text that was not one JSON value ("1,2"): parse each alone
            raise ValueError
    except ValueError:
        values = [_json(text) for text in texts]
    for item, value in zip(items, values):
        key = item.key  # empty when the item is keyed by its path (a string is cheaper to read than the path)
        if key:
            tree[key] = value
            continue
        path = list(item.nested_key)
        node = tree
        for part in path[:-1]:
            child = node.get(part)
            if not isinstance(child, dict):
                child = node[part] = {}
            node = child
        node[path[-1]] = value
    return tree


def _leaves(tree: dict, prefix: str = ""):
    """(key, value) of each logged value: nested dicts as W&B names them (`a.b`), a media dict whole."""
    for key, value in tree.items():
        if type(value) is dict and not isinstance(value.get("_type"), str):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield (prefix + key if prefix else key), value


def _key(item) -> str:
    return ".".join(item.nested_key) if item.nested_key else item.key


def _json(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _special(value) -> float:
    return {"Infinity": math.inf, "-Infinity": -math.inf}.get(value, math.nan)


def _updates(updates) -> dict:
    return {_key(u): _json(u.value_json) for u in updates}


def flatten(config: dict, prefix: str = "") -> dict:
    """W&B's config as MLflow params: nested keys joined with '.', W&B's own `_wandb` left out, values as text."""
    flat = {}
    for key, value in config.items():
        if not prefix and key == "_wandb":
            continue
        name = f"{prefix}{key}"
        if isinstance(value, dict) and set(value) == {"value", "desc"}:  # W&B keeps some entries as {value, desc}
            value = value["value"]
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = value if isinstance(value, str) else json.dumps(value)
    return flat
