"""Parse an uploaded prompt file into validated rows (pure Python, no Django).

Rules, in the order they are applied:

* Size first: a 0-byte file is "the file is empty"; a file over ``max_bytes`` is
  rejected before anything is decoded or parsed.
* Format: the extension decides (``.json``, ``.jsonl``/``.ndjson``, ``.csv``,
  ``.parquet``/``.pq``, ``.txt``); bytes that start and end with the Parquet magic
  ``PAR1`` are Parquet whatever the name. Other names are sniffed from the content:
  first non-blank character ``[`` -> JSON array, ``{`` -> JSON Lines, a first line
  with a ``prompt`` column -> CSV; anything else is refused (plain text needs ``.txt``).
* Text formats must be UTF-8 (a leading BOM is dropped); undecodable bytes or a NUL
  byte are reported with their line and byte offset.
* JSON: an array of objects. A ``.json`` file whose content starts with ``{`` is read
  as JSON Lines (many tools name JSONL files ``.json``). JSONL: one object per line,
  blank lines skipped.
* Object rows (JSON, JSONL, Parquet): ``prompt`` is a string, or a chat-style list of
  ``{role, content}`` messages whose last ``user`` message is the prompt; its ``system``
  messages are kept as the prompt's system message (the trainer gives it to the policy
  instead of the method's paper's; DESIGN §6). The label is
  the first non-null of ``answer``, ``label``, ``reward_model.ground_truth``; the id is
  ``id`` (verl parquet: ``extra_info.index``, then ``id``). Other keys are ignored.
* CSV: a header with a ``prompt`` column and optional ``answer``/``label`` and ``id``
  columns (names matched case-insensitively); ``,``, tab or ``;`` separated, whichever
  makes ``prompt`` a column. Quoted fields may span lines; empty cells are missing.
* Parquet is ``verl_parquet`` when ``prompt`` is a chat list or a ``reward_model``
  column exists. verl/TTRL files repeat each problem (aime24_verl.parquet holds every
  AIME problem 16 times with the same ``extra_info.index``), so when their ids are not
  unique every row gets the id ``row-N`` instead of the file being rejected.
* Plain text: one prompt per non-blank line, no labels.
* Prompts are kept verbatim but must be non-blank strings. Labels and ids may be
  strings or numbers; they are stored as stripped strings (JSON numbers keep their
  literal text, so ``142.0`` stays ``"142.0"``); blank or NaN means missing.
* Ids: explicit duplicate ids are an error naming both rows. A row without an id gets
  ``str(position)``, or ``row-N`` (``row-N-2``, ...) if an explicit id already took it.
* Limits, each named in its message: at most MAX_ROWS prompts; a prompt of at most
  MAX_PROMPT_CHARS characters, a label or system message MAX_TEXT_CHARS, an id MAX_ID_CHARS;
  no NUL character and no unpaired surrogate in any of them (the database cannot hold
  them); JSON nested no deeper than Python's reader allows; a Parquet file read in batches
  and refused once it has decoded PARQUET_DECODED_FACTOR times the upload limit.
* ``position`` is the 1-based ordinal of the prompt in file order. Errors cite the
  physical ``line`` for JSONL, CSV and text and the ``row`` (element or table row) for
  JSON arrays and Parquet.
"""
from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from decimal import Decimal
from itertools import chain, count
from pathlib import PurePath

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from rl.params import FieldError

EXTENSIONS = {".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "csv",
              ".parquet": "parquet", ".pq": "parquet", ".txt": "text"}
LABEL_FIELDS = ("answer", "label", "reward_model.ground_truth")
PARQUET_MAGIC = b"PAR1"

# Limits, each named in its error message. A prompt of 2 MB was accepted and the trainer, given it,
# grew to 19.7 GB before it was killed; a 783-byte Parquet file decoded to 1 GB.
MAX_ROWS = 200_000
MAX_PROMPT_CHARS = 32_000  # about 8k tokens: prompts are the problem, not the context (DESIGN §6)
MAX_TEXT_CHARS = 8_000  # a label or a system message
MAX_ID_CHARS = 200  # Prompt.external_id
PARQUET_DECODED_FACTOR = 10  # a Parquet file may hold up to 10 x the upload limit once decoded


@dataclass(frozen=True)
class PromptRow:
    id: str
    prompt: str
    label: str | None
    position: int  # 1-based ordinal of the prompt in the file
    system: str | None = None  # a chat-style prompt's own system message


@dataclass(frozen=True)
class ParsedPromptSet:
    rows: list[PromptRow]
    format: str  # 'json' | 'jsonl' | 'csv' | 'parquet' | 'verl_parquet' | 'text'

    @property
    def has_labels(self) -> bool:
        return any(row.label is not None for row in self.rows)


class PromptFileError(FieldError):
    """A user-facing problem with an uploaded file: a FieldError that also knows the line.

    ``message`` is the whole sentence (also ``str(error)``), prefixed with
    ``line N:``/``row N:`` when it concerns one place; ``line`` is that 1-based line or
    row number (for duplicate ids, the later one; None for whole-file problems);
    ``field`` names the offending field (``prompt``, ``id``, ``answer``, ...) or is None.
    """

    def __init__(self, message: str, line: int | None = None, field: str | None = None,
                 unit: str | None = "line"):
        super().__init__(field, f"{unit} {line}: {message}" if line and unit else message)
        self.line = line


class _JsonNumber(str):
    """A JSON number kept as its literal text, still recognisable as a number."""


@dataclass
class _Raw:
    """One row before validation: where it is and its still-unchecked values."""
    unit: str  # 'line' or 'row'
    number: int
    prompt: object
    label: object = None
    label_field: str = "answer"
    id: object = None
    id_field: str = "id"
    system: str | None = None

    def error(self, message: str, field: str | None = None) -> PromptFileError:
        return PromptFileError(message, self.number, field, self.unit)


Progress = Callable[[int, int], None]  # (rows checked, rows in the file)
PROGRESS_EVERY_ROWS = 5_000


def parse_prompt_file(filename: str, data: bytes, max_bytes: int, progress: Progress | None = None) -> ParsedPromptSet:
    """Parse ``data`` (the bytes of the uploaded ``filename``); see the module doc. ``progress``, when
    given, is told how many rows have been checked every PROGRESS_EVERY_ROWS rows and at the end."""
    if not data:
        raise PromptFileError("the file is empty")
    if len(data) > max_bytes:
        raise PromptFileError(too_large(len(data), max_bytes))
    fmt = EXTENSIONS.get(PurePath(filename).suffix.lower())
    if fmt == "parquet" or (data[:4] == PARQUET_MAGIC and data[-4:] == PARQUET_MAGIC):
        return _parse_parquet(data, max_bytes, progress)
    try:
        text = _decode(data)
    except PromptFileError:
        if fmt is None:
            raise PromptFileError(f"cannot tell the format of {filename!r}: it is neither "
                                  "Parquet nor UTF-8 text") from None
        raise
    fmt = fmt or _sniff(text, filename)
    if fmt == "json" and text.lstrip().startswith("{"):
        _refuse_single_json_object(text)
        fmt = "jsonl"
    parser = {"json": _parse_json, "jsonl": _parse_jsonl, "csv": _parse_csv,
              "text": _parse_text}[fmt]
    return _build(parser(text), fmt, progress=progress)


def too_large(size: int, limit: int) -> str:
    def human(n: int) -> str:
        for unit, scale in (("GB", 10**9), ("MB", 10**6), ("KB", 10**3)):
            if n >= scale:
                return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
        return f"{n} bytes"
    if human(size) == human(limit):  # e.g. 10,000,001 bytes over a 10 MB limit
        return f"the file is {size:,} bytes, over the {limit:,}-byte limit"
    return f"the file is {human(size)}, over the {human(limit)} limit"


def _decode(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PromptFileError(
            f"the file is not UTF-8 text (byte 0x{data[exc.start]:02x} at byte offset "
            f"{exc.start} cannot be decoded)", data.count(b"\n", 0, exc.start) + 1) from None
    nul = data.find(b"\x00")
    if nul >= 0:
        raise PromptFileError(f"contains a NUL byte (at byte offset {nul}); this looks like "
                              "a binary file, not text", data.count(b"\n", 0, nul) + 1)
    return text.removeprefix("\ufeff")


def _sniff(text: str, filename: str) -> str:
    start = text.lstrip()[:1]
    if start == "[":
        return "json"
    if start == "{":
        return "jsonl"
    first_line = next((line for line in text.split("\n") if line.strip()), "")
    if _csv_delimiter(first_line):
        return "csv"
    raise PromptFileError(
        f"cannot tell the format of {filename!r}: use a .json, .jsonl, .csv, .parquet or "
        ".txt file (JSON, JSON Lines, CSV with a 'prompt' column, Parquet, or plain text)")


def _refuse_single_json_object(text: str) -> None:
    """A ``.json`` file starting with ``{`` is JSONL, unless it is one multi-line object."""
    try:
        json.loads(text)
    except (json.JSONDecodeError, RecursionError):  # not one object: the JSONL reader says what is wrong
        return
    if sum(1 for line in text.split("\n") if line.strip()) > 1:
        raise PromptFileError("the file holds a single JSON object; expected an array of "
                              "objects or JSON Lines (one object per line)")


def _json_loads_checked(text: str, number: int | None = None, unit: str | None = None) -> object:
    """json.loads, with nesting too deep for Python's reader (about 1,000 levels) a clear error."""
    try:
        return _json_loads(text)
    except RecursionError:
        raise PromptFileError("JSON nested more deeply than the reader allows (about 1,000 levels); a prompt "
                              "row is an object of strings", number, unit=unit) from None


def _json_loads(text: str) -> object:
    return json.loads(text, parse_int=_JsonNumber, parse_float=_JsonNumber)


def _parse_json(text: str) -> list[_Raw]:
    try:
        value = _json_loads_checked(text)
    except json.JSONDecodeError as exc:
        raise PromptFileError(f"invalid JSON ({exc.msg} at column {exc.colno})",
                              exc.lineno) from None
    if not isinstance(value, list):
        raise PromptFileError(f"expected a JSON array of objects, found {_kind(value)}")
    return [_from_mapping(item, "row", i) for i, item in enumerate(value, 1)]


def _parse_jsonl(text: str) -> list[_Raw]:
    raws = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            value = _json_loads_checked(line, number, "line")
        except json.JSONDecodeError as exc:
            raise PromptFileError(f"invalid JSON ({exc.msg} at column {exc.colno})",
                                  number) from None
        raws.append(_from_mapping(value, "line", number))
    return raws


def _from_mapping(item: object, unit: str, number: int,
                  id_fields: tuple[str, ...] = ("id",)) -> _Raw:
    if not isinstance(item, dict):
        raise PromptFileError(f"expected an object with a 'prompt' key, found {_kind(item)}",
                              number, None, unit)
    if "prompt" not in item:
        raise PromptFileError(f"no 'prompt' key (keys found: {_names(item)})",
                              number, "prompt", unit)
    raw = _Raw(unit, number, item["prompt"])
    if isinstance(raw.prompt, list):
        raw.system = _chat_system(raw)
        raw.prompt = _chat_prompt(raw)
    for name in LABEL_FIELDS:
        if _lookup(item, name) is not None:
            raw.label, raw.label_field = _lookup(item, name), name
            break
    for name in id_fields:
        if _lookup(item, name) is not None:
            raw.id, raw.id_field = _lookup(item, name), name
            break
    return raw


def _lookup(item: dict, dotted: str) -> object:
    value: object = item
    for part in dotted.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _chat_system(raw: _Raw) -> str | None:
    """The system message(s) of a chat-style prompt, joined by a blank line; None when it has none."""
    systems = [m.get("content") for m in raw.prompt if isinstance(m, dict) and m.get("role") == "system"]
    for content in systems:
        if not isinstance(content, str) or isinstance(content, _JsonNumber):
            raise raw.error(f"the system message must be a string, not {_kind(content)}", "prompt")
    text = "\n\n".join(c for c in systems if c.strip())
    return text or None


def _chat_prompt(raw: _Raw) -> object:
    """The content of the last ``user`` message of a chat-style prompt."""
    users = [m for m in raw.prompt if isinstance(m, dict) and m.get("role") == "user"]
    if not users:
        raise raw.error("the chat-style prompt has no message with role 'user'", "prompt")
    return users[-1].get("content")


def _csv_delimiter(first_line: str) -> str | None:
    for delimiter in ",\t;":
        try:
            header = next(csv.reader(io.StringIO(first_line, newline=""), delimiter=delimiter), [])
        except csv.Error:
            continue
        if "prompt" in (name.strip().lower() for name in header):
            return delimiter
    return None


def _parse_csv(text: str) -> list[_Raw]:
    first_line = next((line for line in text.split("\n") if line.strip()), "")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True,
                        delimiter=_csv_delimiter(first_line) or ",")
    raws, columns, start = [], None, 1
    try:
        for fields in reader:
            where, start = start, reader.line_num + 1
            if not any(field.strip() for field in fields):
                continue
            if columns is None:
                columns = _csv_header(fields, where)
                continue
            if len(fields) < len(columns) or any(f.strip() for f in fields[len(columns):]):
                raise PromptFileError(f"{len(fields)} fields, but the header has "
                                      f"{len(columns)} columns", where)
            row = {name: value.strip() or None for name, value in zip(columns, fields)}
            row["prompt"] = fields[columns.index("prompt")]
            raws.append(_from_mapping(row, "line", where))
    except csv.Error as exc:
        raise PromptFileError(f"invalid CSV ({exc})", reader.line_num) from None
    return raws


def _csv_header(fields: list[str], line: int) -> list[str]:
    columns = [name.strip().lower() for name in fields]
    if "prompt" not in columns:
        raise PromptFileError(f"the header has no 'prompt' column (columns found: "
                              f"{_names(fields)})", line, "prompt")
    for name in ("prompt", "id", "answer", "label"):
        if columns.count(name) > 1:
            raise PromptFileError(f"the header has the column {name!r} more than once",
                                  line, name)
    return columns


def _parse_text(text: str) -> list[_Raw]:
    return [_Raw("line", number, line.removesuffix("\r"))
            for number, line in enumerate(text.split("\n"), 1) if line.strip()]


def _parse_parquet(data: bytes, max_bytes: int, progress: Progress | None = None) -> ParsedPromptSet:
    """Read in batches of PARQUET_BATCH_ROWS, so a file that decodes to far more than its size (repeated
    values in a dictionary page compress to nothing) is refused once what it decoded passes
    PARQUET_DECODED_FACTOR times the upload limit, not after it filled the memory."""
    limit = PARQUET_DECODED_FACTOR * max_bytes
    try:
        metadata = pq.ParquetFile(io.BytesIO(data)).metadata
        # Every text column is read as Arrow dictionaries: a value a dictionary page holds once stays once in a
        # batch until the batch is measured (_row_sizes). Read dense, 64 rows of one 2 MiB value of a 1.8 KB
        # file were 128 MiB before a row was counted, 256 MiB once turned into Python strings.
        texts = [metadata.schema.column(i).path for i in range(metadata.num_columns)
                 if metadata.schema.column(i).physical_type in ("BYTE_ARRAY", "FIXED_LEN_BYTE_ARRAY")]
        parquet_file = pq.ParquetFile(io.BytesIO(data), read_dictionary=texts)
        schema = parquet_file.schema_arrow
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise PromptFileError(f"the file is not a valid Parquet file ({exc})") from None
    if metadata.num_rows > MAX_ROWS:
        raise PromptFileError(f"the file has {metadata.num_rows:,} rows; a prompt set holds at most {MAX_ROWS:,}")
    if "prompt" not in schema.names:
        raise PromptFileError(f"no 'prompt' column (columns found: "
                              f"{_names(schema.names)})", field="prompt")
    repeated = next((name for name in ("prompt", "answer", "label", "id", "reward_model", "extra_info")
                     if schema.names.count(name) > 1), None)
    if repeated:  # which of them would be the prompt (or the label)? Arrow cannot say either
        raise PromptFileError(f"the column {repeated!r} appears {schema.names.count(repeated)} times; a column "
                              "name may appear once", field=repeated)
    prompt_type = schema.field("prompt").type
    verl = (pa.types.is_list(prompt_type) or pa.types.is_large_list(prompt_type)
            or "reward_model" in schema.names)
    id_fields = ("extra_info.index", "id") if verl else ("id",)
    # only the columns a prompt set uses are read (a verl file's other fields can be large)
    columns = [path for path in ("prompt", *LABEL_FIELDS, *id_fields) if path.split(".")[0] in schema.names]
    stored = _stored_size(metadata, columns)
    if stored > limit:  # checked before anything is decoded: a few kilobytes of zstd can hold gigabytes
        read = ", ".join(dict.fromkeys(path.split(".")[0] for path in columns))
        raise PromptFileError(f"the Parquet file's columns read ({read}) hold {stored:,} bytes uncompressed by its "
                              f"metadata; at most {limit:,} bytes ({PARQUET_DECODED_FACTOR} times the upload limit) "
                              "are read")
    raws, decoded, number = [], 0, 0
    try:
        for batch in parquet_file.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns):
            # measured on Arrow's buffers, before a row becomes Python objects
            running = decoded + np.cumsum(sum(_row_sizes(column) for column in batch.columns))
            over = np.flatnonzero(running > limit)
            if over.size:
                raise PromptFileError(f"the Parquet file decodes to more than {limit:,} bytes by row "
                                      f"{number + int(over[0]) + 1:,}; at most {PARQUET_DECODED_FACTOR} times the "
                                      "upload limit is read")
            decoded = int(running[-1]) if len(running) else decoded
            try:
                rows = batch.to_pylist()
            except OverflowError as exc:  # a date or duration past what Python can hold (year 10,000 and on)
                raise PromptFileError(f"rows {number + 1:,} to {number + batch.num_rows:,} hold a value that "
                                      f"cannot be read ({exc}); dates and durations are not prompts, labels or "
                                      "ids") from None
            for row in rows:
                number += 1
                raws.append(_from_mapping(row, "row", number, id_fields))
    except PromptFileError:
        raise
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise PromptFileError(f"the file is not a valid Parquet file ({exc})") from None
    return _build(raws, "verl_parquet" if verl else "parquet", ids_may_repeat=verl, progress=progress)


PARQUET_BATCH_ROWS = 64


def _stored_size(metadata, columns: list[str]) -> int:
    """The uncompressed size of the column chunks under `columns` (dotted paths), summed over row groups, as the
    file's metadata gives it. Dictionary-encoded values are counted once there, so the batches read are still
    measured as they are decoded (_parse_parquet)."""
    total = 0
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index in range(row_group.num_columns):
            chunk = row_group.column(index)
            path = chunk.path_in_schema
            if any(path == c or path.startswith(c + ".") for c in columns):
                total += chunk.total_uncompressed_size
    return total


def _row_sizes(array) -> np.ndarray:
    """About how many bytes each row of an Arrow array holds in its texts once decoded (8 for any other value),
    computed on Arrow's buffers: a dictionary's values are measured once and taken by index, so a batch whose rows
    repeat one huge value is measured without being expanded."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    kind = array.type
    if pa.types.is_dictionary(kind):
        indices = array.indices
        # every row null: the dictionary is empty and there is no value 0 to stand in for the nulls
        sizes = _row_sizes(array.dictionary)[np.asarray(indices.fill_null(0), dtype=np.int64)] \
            if len(array.dictionary) else np.zeros(len(array), dtype=np.int64)
        return np.where(np.asarray(indices.is_null()), 0, sizes)
    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
            or pa.types.is_large_binary(kind):
        return np.asarray(pc.binary_length(array).fill_null(0), dtype=np.int64)
    if pa.types.is_struct(kind):
        return sum((_row_sizes(child) for child in array.flatten()), np.zeros(len(array), dtype=np.int64))
    if pa.types.is_list(kind) or pa.types.is_large_list(kind):
        inside = np.concatenate([[0], np.cumsum(_row_sizes(array.values))])
        offsets = np.asarray(array.offsets, dtype=np.int64)
        return inside[offsets[1:]] - inside[offsets[:-1]]
    return np.full(len(array), 8, dtype=np.int64)


def _build(raws: list[_Raw], fmt: str, ids_may_repeat: bool = False, progress: Progress | None = None) -> ParsedPromptSet:
    if not raws:
        raise PromptFileError("the file has no prompts")
    if len(raws) > MAX_ROWS:
        raise PromptFileError(f"the file has {len(raws):,} prompts; a prompt set holds at most {MAX_ROWS:,}")
    prompts, labels, ids, systems = [], [], [], []
    for checked, raw in enumerate(raws):
        if progress is not None and checked % PROGRESS_EVERY_ROWS == 0:
            progress(checked, len(raws))
        if not isinstance(raw.prompt, str) or isinstance(raw.prompt, _JsonNumber):
            raise raw.error(f"the prompt must be a string, not {_kind(raw.prompt)}", "prompt")
        if not raw.prompt.strip():
            raise raw.error("empty prompt", "prompt")
        prompts.append(_storable(raw, raw.prompt, "prompt", MAX_PROMPT_CHARS))
        systems.append(_storable(raw, raw.system, "system", MAX_TEXT_CHARS))
        labels.append(_storable(raw, _scalar(raw, raw.label, raw.label_field), raw.label_field, MAX_TEXT_CHARS))
        ids.append(_storable(raw, _scalar(raw, raw.id, raw.id_field), raw.id_field, MAX_ID_CHARS))
    explicit = [i for i in ids if i is not None]
    if ids_may_repeat and len(set(explicit)) < len(explicit):  # verl repeats problems
        ids = [f"row-{position}" for position in range(1, len(raws) + 1)]
    _check_unique(raws, ids)
    taken = {i for i in ids if i is not None}
    rows = []
    for position, (prompt, label, row_id, system) in enumerate(zip(prompts, labels, ids, systems), 1):
        if row_id is None:
            candidates = chain([str(position), f"row-{position}"],
                               (f"row-{position}-{n}" for n in count(2)))
            row_id = next(c for c in candidates if c not in taken)
            taken.add(row_id)
        rows.append(PromptRow(row_id, prompt, label, position, system))
    if progress is not None:
        progress(len(rows), len(rows))
    return ParsedPromptSet(rows, fmt)


def _storable(raw: _Raw, text: str | None, field: str, limit: int) -> str | None:
    """Text the database can hold and the trainer can take: at most `limit` characters, no NUL (PostgreSQL
    refuses it in text), no unpaired surrogate (JSON's "\\ud800" escapes decode to one; UTF-8 cannot hold it)."""
    if text is None:
        return None
    if len(text) > limit:
        raise raw.error(f"the {field} is {len(text):,} characters long; at most {limit:,} are accepted", field)
    nul = text.find("\x00")
    if nul >= 0:
        raise raw.error(f"the {field} holds a NUL character (at character {nul + 1})", field)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise raw.error(f"the {field} holds an unpaired surrogate ({text[exc.start]!a} at character "
                        f"{exc.start + 1}), which is not text", field) from None
    return text


def _check_unique(raws: list[_Raw], ids: list[str | None]) -> None:
    first_seen: dict[str, _Raw] = {}
    for raw, row_id in zip(raws, ids):
        if row_id is None:
            continue
        if row_id in first_seen:
            first = first_seen[row_id]
            raise PromptFileError(f"{raw.unit}s {first.number} and {raw.number} share the "
                                  f"id {row_id!r}", raw.number, "id", unit=None)
        first_seen[row_id] = raw


def _scalar(raw: _Raw, value: object, field: str) -> str | None:
    """A label or id as a stripped string; None when missing, blank or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float, Decimal)):
        raise raw.error(f"{field!r} must be a string or a number, not {_kind(value)}", field)
    return str(value).strip() or None


def _kind(value: object) -> str:
    if isinstance(value, (_JsonNumber, int, float, Decimal)) and not isinstance(value, bool):
        return "a number"
    kinds = {type(None): "null", bool: "a boolean", str: "a string", list: "a list",
             dict: "an object"}
    return kinds.get(type(value), f"a {type(value).__name__}")


def _names(names: Iterable[object]) -> str:
    """Column or key names for a message: ``'a', 'b'`` (at most 20), or ``none``."""
    names = [repr(str(name)) for name in names]
    return ", ".join(names[:20]) + (", ..." if len(names) > 20 else "") if names else "none"
