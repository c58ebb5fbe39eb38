"""Exports of a run's data as files (DESIGN §4.6, issue 10), streamed: a response starts with the
first series (or page of rollouts) and memory holds one at a time, whatever the run's size.

Metrics are exported long, one row per point: `name, step, value, time` (eval metrics keep their
`eval/` prefix), series by series in name order, steps ascending; or wide (`layout=wide`), one row per
step: `step, time, <metric>...`, `time` being the step's first logged point's. Times are the events' in
ISO 8601 UTC to the millisecond in CSV and a UTC timestamp in Parquet.

Rollouts are exported with the rollout search's filters and order (webapp/explorer/search.py), one row
per rollout: its step, prompt id and index, the fields of DESIGN §4.2, `extra` as JSON text in CSV
and Parquet, what the rollouts page shows beside it (the prompt's text, its held-out label and whether
the answer equals it), and the text last.

Files are named after the run and what they hold: `run-12-my-run-rollouts-step-40-reward-0.5-1.csv`.

In CSV, a text cell starting with =, +, -, @, a tab or a carriage return gets a leading apostrophe, so a
spreadsheet shows it instead of running it as a formula (an answer "-3" reads "'-3"); JSONL and Parquet keep
every text as it is.
"""
import csv
import io
import json
import math
import re
import unicodedata
from datetime import datetime, timedelta, timezone

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings

from rl.answers import matches_reference
from rl.params import FieldError, plain_number

from webapp.metrics import series
from webapp.runs.models import Run

from .history import prompt_texts
from .search import FALSE, TRUE, search

FORMATS = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}
LAYOUTS = ("long", "wide")
TIMESTAMP = pa.timestamp("ms", tz="UTC")
METRIC_SCHEMA = pa.schema([("name", pa.string()), ("step", pa.int64()), ("value", pa.float64()), ("time", TIMESTAMP)])
WIDE_STEPS_PER_PIECE = 1000  # rows of the wide layout per CSV piece or Parquet row group
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def metric_names(run_id: int, names: list[str] | None = None) -> list[str]:
    """The run's metric series (the named ones that exist, or all), in name order."""
    return series.names(run_id, among=names)


def _millis(seconds: float | None) -> int | None:
    """An event's unix time in whole milliseconds: what both formats write, so a CSV and a Parquet file
    of the same run say the same instant."""
    return None if seconds is None or math.isnan(seconds) else round(seconds * 1000)


def _iso(millis: int | None) -> str | None:
    """ISO 8601 in UTC to the millisecond, `2023-11-14T22:13:20.000Z`: what spreadsheets and pandas read as
    a time (unix seconds read as a plain number)."""
    if millis is None:
        return None
    return (EPOCH + timedelta(milliseconds=millis)).strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def _series_rows(run_id: int, names: list[str]):
    """(name, {steps, values, times}) one series at a time, times in milliseconds."""
    for name in names:
        found = series.read([run_id], [name])[run_id].get(name)
        if found is not None:
            points = found.lists()
            yield name, {**points, "times": [_millis(t) for t in points["times"]]}


def metrics_csv(run_id: int, names: list[str]):
    """The long layout's CSV text in pieces: the header, then one piece per series."""
    return _csv(["name", "step", "value", "time"], (
        [(name, step, _cell(value), _cell(_iso(time)))
         for step, value, time in zip(points["steps"], points["values"], points["times"])]
        for name, points in _series_rows(run_id, names)))


def metrics_parquet(run_id: int, names: list[str]):
    """The long layout's Parquet file in pieces: one row group per series, then the footer."""
    return _parquet(METRIC_SCHEMA, (
        {"name": [name] * len(points["steps"]), "step": points["steps"], "value": points["values"],
         "time": points["times"]}
        for name, points in _series_rows(run_id, names)))


def _wide_pieces(run_id: int, names: list[str]):
    """(the metrics' names, then {step, time, name: values} of WIDE_STEPS_PER_PIECE steps at a time): one row
    per step any of them logged, a value where the metric has one at that step (None where it has none, or
    logged NaN), `time` the step's first logged point's, in milliseconds.

    Every series is held at once, as one float array each aligned on the steps (8 bytes a cell: 60 metrics
    over 100,000 steps are 48 MB), since a row needs every metric of its step."""
    found = series.read([run_id], names)[run_id]
    names = [name for name in names if name in found]
    columns = {}
    for name in names:
        points = found.pop(name).lists()
        columns[name] = (np.asarray(points["steps"], dtype=np.int64),
                         np.asarray([np.nan if v is None else v for v in points["values"]], dtype=np.float64),
                         np.asarray([np.nan if t is None else t for t in points["times"]], dtype=np.float64))
    steps = np.unique(np.concatenate([c[0] for c in columns.values()])) if columns else np.zeros(0, np.int64)
    first_time = np.full(len(steps), np.nan)
    for name, (at, values, times) in columns.items():
        where = np.searchsorted(steps, at)
        aligned = np.full(len(steps), np.nan)
        aligned[where] = values
        np.fmin.at(first_time, where, times)  # fmin: a NaN (no time) loses to any time
        columns[name] = aligned
    yield names
    for start in range(0, len(steps), WIDE_STEPS_PER_PIECE):
        cut = slice(start, start + WIDE_STEPS_PER_PIECE)
        yield {"step": steps[cut].tolist(), "time": [_millis(t) for t in first_time[cut].tolist()],
               **{name: [None if math.isnan(v) else v for v in columns[name][cut].tolist()] for name in names}}


def metrics_wide_csv(run_id: int, names: list[str]):
    """The wide layout's CSV text: `step, time, <metric>...`, a piece per WIDE_STEPS_PER_PIECE steps."""
    pieces = _wide_pieces(run_id, names)
    names = next(pieces)
    return _csv(["step", "time", *names], (
        [(step, _iso(time), *(_cell(piece[name][i]) for name in names))
         for i, (step, time) in enumerate(zip(piece["step"], piece["time"]))] for piece in pieces))


def metrics_wide_parquet(run_id: int, names: list[str]):
    """The wide layout's Parquet file: a row group per WIDE_STEPS_PER_PIECE steps."""
    pieces = _wide_pieces(run_id, names)
    names = next(pieces)
    schema = pa.schema([("step", pa.int64()), ("time", TIMESTAMP), *((name, pa.float64()) for name in names)])
    return _parquet(schema, pieces)


METRIC_WRITERS = {("long", "csv"): metrics_csv, ("long", "parquet"): metrics_parquet,
                  ("wide", "csv"): metrics_wide_csv, ("wide", "parquet"): metrics_wide_parquet}


# --- rollouts --------------------------------------------------------------------------------------

ROLLOUT_FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8",
                   "parquet": "application/vnd.apache.parquet"}
ROLLOUT_COLUMNS = ["step", "prompt_id", "index", "answer", "valid", "in_majority", "reward", "advantage", "length",
                   "used_for_training", "entropy", "extra", "prompt", "label", "correct", "text"]
ROLLOUT_SCHEMA = pa.schema([("step", pa.int64()), ("prompt_id", pa.string()), ("index", pa.int64()),
                            ("answer", pa.string()), ("valid", pa.bool_()), ("in_majority", pa.bool_()),
                            ("reward", pa.float64()), ("advantage", pa.float64()), ("length", pa.int64()),
                            ("used_for_training", pa.bool_()), ("entropy", pa.float64()),
                            ("extra", pa.string()), ("prompt", pa.string()), ("label", pa.string()),
                            ("correct", pa.bool_()), ("text", pa.string())])
EXPORT_PAGE, FIRST_EXPORT_PAGE = 1000, 100


def rollout_pages(run: Run, params: dict):
    """Every rollout the search `params` match, a keyset page of EXPORT_PAGE at a time (search.py), in
    the search's order: the export holds exactly what paging through the search would show. Each row
    also carries what the rollouts page shows beside it (with_prompts)."""
    # a short first page: the download starts as soon as its first rows are read
    params = {**params, "limit": FIRST_EXPORT_PAGE, "cursor": None}
    first = True
    while True:
        page = search(run.pk, params, count=False)  # a file needs no count
        if first and page.text_not_searched:
            # a search page can say what it did not read; a file cannot, and must hold every match
            raise FieldError("q", f"the run's text index is behind: {_behind(page)} rollouts past the "
                                   f"{settings.TEXT_SEARCH_UNINDEXED_MAX:,} unindexed ones a search reads were not "
                                   "searched, and an export must hold every match: export once the index has caught "
                                   "up (the search page shows the matches among the rollouts it reached now)")
        first = False
        if page.results:
            yield with_prompts(run, page.results)
        if page.next_cursor is None:
            return
        params.update(cursor=page.next_cursor, limit=EXPORT_PAGE)


def with_prompts(run: Run, rows: list[dict]) -> list[dict]:
    """The rows with their prompt's text, its held-out label and whether the rollout's answer equals it
    (`correct`, math-verify as label_accuracy and the rollouts page judge it), as the rollouts page shows
    them: label and correct are None where the prompt set has no labels. Monitoring only: nothing here
    reaches a reward. Read a page at a time (a prompt set may be large)."""
    prompts = prompt_texts(run, {row["prompt_id"] for row in rows})
    out = []
    for row in rows:
        prompt = prompts.get(row["prompt_id"])
        label = prompt.label if prompt else None
        # answers_equal caches its verdicts: a page's repeated (answer, label) pairs are judged once
        correct = matches_reference([row["answer"]], label)[0] if label is not None else None
        text = row["text"]
        out.append({**{k: v for k, v in row.items() if k != "text"}, "prompt": prompt.text if prompt else None,
                    "label": label, "correct": correct, "text": text})
    return out


def _behind(page) -> str:
    reach = page.text_index_json()
    return f"{reach['not_searched']:,}" if reach["exact"] else f"more than {reach['not_searched']:,}"


def rollouts_jsonl(pages):
    for rows in pages:
        yield "".join(json.dumps({key: row[key] for key in ROLLOUT_COLUMNS}, allow_nan=False) + "\n" for row in rows)


def rollouts_csv(pages):
    return _csv(ROLLOUT_COLUMNS, ([[json.dumps(row["extra"]) if key == "extra" else _cell(row[key])
                                    for key in ROLLOUT_COLUMNS] for row in rows] for rows in pages))


def rollouts_parquet(pages):
    def columns(rows):
        out = {key: [row[key] for row in rows] for key in ROLLOUT_COLUMNS}
        out["extra"] = [json.dumps(extra) for extra in out["extra"]]
        return out

    return _parquet(ROLLOUT_SCHEMA, (columns(rows) for rows in pages))


# --- file names ------------------------------------------------------------------------------------

FILENAME_STEM_MAX = 150  # characters before the extension: a name a browser, a shell and a zip all keep whole
PART_MAX = 30  # one filter's words, at most


def _slug(text: str, limit: int = PART_MAX) -> str:
    """Lower-case ASCII letters and digits, every other run of characters one "-": safe in a
    Content-Disposition header and in a file name on any system (no "/", "..", quotes or spaces)."""
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")[:limit].strip("-")


def _number(text: str) -> str:
    return plain_number(float(text))  # the search has checked it is a finite number


def _range(name: str, low, high, value=str) -> str | None:
    if low is None and high is None:
        return None
    if low is not None and high is not None:
        return f"{name}-{value(low)}" if value(low) == value(high) else f"{name}-{value(low)}-{value(high)}"
    return f"{name}-from-{value(low)}" if low is not None else f"{name}-to-{value(high)}"


def _filename(stem_parts: list[str], kind: str) -> str:
    stem = "-".join(part for part in stem_parts if part)
    return f"{stem[:FILENAME_STEM_MAX].rstrip('-.')}.{kind}"


def run_stem(run: Run) -> str:
    return "-".join(part for part in (f"run-{run.pk}", _slug(run.name)) if part)


# the yes/no filters as a file name says them: (parameter, when true, when false)
BOOLEAN_WORDS = [("in_majority", "majority", "minority"), ("valid", "valid", "invalid"),
                 ("trained", "trained", "not-trained"), ("superseded", "superseded", "")]


def rollouts_filename(run: Run, params: dict, kind: str) -> str:
    """`run-12-my-run-rollouts-step-40-reward-0.5-1.csv`: the run, then each filter the search used (after it
    checked them: every value is valid here), then its order when not by step."""
    given = {k: str(v).strip() for k, v in params.items() if v is not None and str(v).strip()}
    steps = _range("step" if given.get("step_min") == given.get("step_max") else "steps",
                   given.get("step_min"), given.get("step_max"), lambda v: str(int(v)))
    parts = [run_stem(run), "rollouts"]
    parts += [f"text-{_slug(given['q'])}" if "q" in given else None,
              f"prompt-{_slug(given['prompt'])}" if "prompt" in given else None,
              f"prompt-text-{_slug(given['prompt_text'])}" if "prompt_text" in given else None, steps,
              f"answer-{_slug(given['answer'])}" if "answer" in given else None]
    for name, yes, no in BOOLEAN_WORDS:
        value = given.get(name, "").lower()
        parts.append(yes if value in TRUE else no if value in FALSE else None)
    parts.append(_range("reward", given.get("reward_min"), given.get("reward_max"), _number))
    order = given.get("order", "step")
    if order != "step":
        parts.append(f"by-{_slug(order)}" + ("-desc" if order.startswith("-") else ""))
    return _filename(parts, kind)


def metrics_filename(run: Run, names: list[str] | None, layout: str, kind: str) -> str:
    """`run-12-my-run-metrics.csv`, `...-metrics-wide.csv`, `...-metrics-entropy-loss.csv` (the names asked)."""
    return _filename([run_stem(run), "metrics", "wide" if layout == "wide" else None,
                      *(_slug(name) for name in names or ())], kind)


# --- the two file formats, written as they stream -------------------------------------------------


PIECE_BYTES = 256 * 1024


def in_pieces(body, size: int | None = None):
    """The bytes of `body` (an iterable of str or bytes) in pieces of at most `size`: a page of 1,000
    rollouts is ~2 MB of CSV, and every piece handed to the web server waits whole in its queue and
    socket buffer behind a slow client (webapp/http_bridge.py), so smaller pieces keep a download's
    memory small."""
    size = size or PIECE_BYTES
    try:
        for chunk in body:
            data = chunk.encode() if isinstance(chunk, str) else chunk
            if len(data) <= size:
                if data:
                    yield data
                continue
            view = memoryview(data)
            for start in range(0, len(data), size):
                yield bytes(view[start:start + size])
    finally:
        if hasattr(body, "close"):  # a download stopped early ends the pages it was reading now
            body.close()


# A text cell starting with one of these is run as a formula by Excel, LibreOffice and Google Sheets (OWASP,
# "CSV injection"): =HYPERLINK(...) in a model's output or a prompt id would become a live link or a command.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _neutralised(cell):
    """A text cell a spreadsheet would run, with a leading apostrophe (shown as text, not run); numbers as they
    are (a float is written by csv with repr: exact, and "-0.5" stays a number)."""
    return "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_START) else cell


def _csv(header: list[str], batches):
    """CSV text in pieces: the header, then one piece per batch of rows (lists of cells)."""
    buffer = io.StringIO()
    # RFC 4180's CRLF: csv quotes a field holding a character of the line terminator, so with "\n" alone a
    # model's bare "\r" went out unquoted and every reader split the row there
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([_neutralised(cell) for cell in header])  # the wide layout's header is metric names
    yield buffer.getvalue()
    for rows in batches:
        buffer.seek(0)
        buffer.truncate()
        writer.writerows([_neutralised(cell) for cell in row] for row in rows)
        yield buffer.getvalue()


class _Drain(io.RawIOBase):
    """A write-only file whose written bytes are taken out as they come: ParquetWriter writes a row
    group at a time into it, and the response sends each as soon as it is written."""

    def __init__(self):
        self.pending = bytearray()

    def writable(self):
        return True

    def write(self, data):
        self.pending += data
        return len(data)

    def take(self) -> bytes:
        out, self.pending = bytes(self.pending), bytearray()
        return out


def _parquet(schema: pa.Schema, batches):
    """A Parquet file in pieces: one row group per batch of columns ({name: [values]}), then the footer."""
    sink = _Drain()
    with pq.ParquetWriter(sink, schema) as writer:
        for columns in batches:
            writer.write_table(pa.table(columns, schema=schema))
            yield sink.take()
    yield sink.take()  # the footer, written on close


def _cell(value):
    """A CSV field: a missing value is empty, a bool true/false as in JSON, a float itself (csv writes its repr:
    exact, every digit kept)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value
