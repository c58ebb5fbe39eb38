"""Reading the files TensorBoard's writers leave while a run trains: `events.out.tfevents.*` in a run's log folder.

Each file is a TFRecord stream: `length (uint64) | masked crc32c of the length (uint32) | data | masked crc32c of the
data (uint32)`, the data a protobuf `Event` (the `tensorboard` package's own definition:
`pip install './clients/python[tensorboard]'`). A scalar is a summary value with `simple_value` (torch's
SummaryWriter, tensorboardX) or a 0-d float tensor under the `scalars` plugin (TensorFlow 2). Images, audio,
histograms, text and other plugins' values are counted and skipped; transformers' TensorBoardCallback writes the
training arguments as the text summary `args` (JSON), which becomes the run's parameters.

The length's checksum is verified (it tells a record being written from a damaged one); the data's is not, because
the only crc32c the tensorboard package has is pure Python at about 2.5 MB/s, a tenth of the import speed wanted.
A record cut off at the end of a file is left for the next read, so a file being written is read up to its last
whole record and a restarted follower goes on from the byte it stopped at.
"""
from __future__ import annotations

import json
import math
import os
import re
import struct
from pathlib import Path

from .wandb_files import Point

EVENT_FILE = re.compile(r"events\.out\.tfevents\..+")
_MASK_DELTA = 0xA282EAD8


def _crc32c_table() -> list[int]:
    table = []
    for n in range(256):
        crc = n
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def masked_crc32c(data: bytes) -> int:
    """TFRecord's checksum: crc32c, rotated right by 15 and offset (tensorflow/core/lib/hash/crc32c.h Mask)."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


class TensorboardFileError(ValueError):
    """A damaged record; the message names the file and the byte."""


def protobuf_events():
    try:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.util import tensor_util
    except ImportError:
        raise SystemExit("evolab: reading TensorBoard's files needs the tensorboard package: "
                         "pip install './clients/python[tensorboard]' (or pip install tensorboard)") from None
    return event_pb2.Event, tensor_util


def event_files(directory) -> list[Path]:
    """A run folder's event files in the order they were written (their names start with the writer's start time;
    a resumed trainer adds a file)."""
    found = [Path(entry.path) for entry in os.scandir(directory) if entry.is_file() and EVENT_FILE.fullmatch(entry.name)]
    return sorted(found, key=lambda p: (_started(p), p.name))


def _started(path: Path) -> int:
    parts = path.name.split(".")
    return int(parts[3]) if len(parts) > 3 and parts[3].isdigit() else 0


def read_records(data: bytes, start: int, path) -> tuple[list[bytes], int]:
    """The whole records of `data` (the file from byte `start`) and the file offset after the last of them."""
    records, position = [], 0
    while position + 12 <= len(data):
        header = data[position:position + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack_from("<I", data, position + 8)
        if masked_crc32c(header) != length_crc:
            raise TensorboardFileError(f"{path}: damaged record length at byte {start + position}")
        end = position + 12 + length + 4
        if end > len(data):
            break
        records.append(data[position + 12:position + 12 + length])
        position = end
    return records, start + position


class TensorboardRun:
    """One run folder's event files, each read from where the last read stopped."""

    def __init__(self, directory):
        self.directory = Path(directory)
        self.Event, self.tensor_util = protobuf_events()

    def files(self) -> list[Path]:
        return event_files(self.directory)

    def read(self, path: Path, offset: int, limit: int = -1):
        """(points, params, skipped counts, new offset) of one file from `offset`, at most `limit` bytes read."""
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read(limit)
        records, end = read_records(data, offset, path)
        points, params, skipped = [], {}, {}
        for raw in records:
            event = self.Event()
            event.ParseFromString(raw)
            if event.WhichOneof("what") != "summary":
                continue
            millis = int(round(event.wall_time * 1000))
            for value in event.summary.value:
                number = self._scalar(value)
                if number is not None:
                    points.append(Point(value.tag, number, int(event.step), millis))
                    continue
                plugin = value.metadata.plugin_data.plugin_name or value.WhichOneof("value") or "other"
                if plugin == "text" and value.tag.split("/")[0] == "args":
                    params.update(self._arguments(value))
                skipped[plugin] = skipped.get(plugin, 0) + 1
        return points, params, skipped, end

    def _scalar(self, value) -> float | None:
        kind = value.WhichOneof("value")
        if kind == "simple_value":
            return float(value.simple_value)
        if kind == "tensor" and value.metadata.plugin_data.plugin_name in ("scalars", ""):
            array = self.tensor_util.make_ndarray(value.tensor)
            if array.ndim == 0 and array.dtype.kind in "fiub":
                return float(array.item())
        return None

    def _arguments(self, value) -> dict:
        """transformers' TensorBoardCallback: add_text("args", args.to_json_string()) (a 0-d string tensor)."""
        try:
            text = self.tensor_util.make_ndarray(value.tensor).item()
            arguments = json.loads(text.decode() if isinstance(text, bytes) else text)
        except (ValueError, TypeError, AttributeError):
            return {}
        if not isinstance(arguments, dict):
            return {}
        return {k: v if isinstance(v, str) else json.dumps(v) for k, v in arguments.items()
                if not (isinstance(v, float) and math.isnan(v))}
