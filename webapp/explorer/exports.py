"""Exports of a run's data as files (DESIGN §4.6, issue 10), streamed: a response starts with the
first series (or page of rollouts) and memory holds one at a time, whatever the run's size.

Metrics are exported long, one row per point: `name, step, value, time` (eval metrics keep their
`eval/` prefix; `time` is the unix seconds of the event that logged the point), series by series in
name order, steps ascending. `df.pivot(index="step", columns="name", values="value")` makes it wide.

Rollouts are exported with the rollout search's filters and order (webapp/explorer/search.py), one row
per rollout: its step, prompt id and index, the fields of DESIGN §4.2, `extra` as JSON text in CSV
and Parquet, and the text last.

In CSV, a text cell starting with =, +, -, @, a tab or a carriage return gets a leading apostrophe, so a
spreadsheet shows it instead of running it as a formula (an answer "-3" reads "'-3"); JSONL and Parquet keep
every text as it is.
"""
import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
from django.conf import settings

from rl.params import FieldError

from webapp.metrics import series
from webapp.metrics.models import MetricSeries

from .search import search

FORMATS = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}
METRIC_SCHEMA = pa.schema([("name", pa.string()), ("step", pa.int64()), ("value", pa.float64()),
                           ("time", pa.float64())])


def metric_names(run_id: int, names: list[str] | None = None) -> list[str]:
    """The run's metric series (the named ones that exist, or all), in name order."""
    rows = MetricSeries.objects.filter(run_id=run_id, clock=False)
    if names is not None:
        rows = rows.filter(name__in=names)
    return sorted(rows.values_list("name", flat=True))


def _series_rows(run_id: int, names: list[str]):
    """(name, {steps, values, times}) one series at a time."""
    for name in names:
        found = series.read([run_id], [name])[run_id].get(name)
        if found is not None:
            yield name, found.lists()


def metrics_csv(run_id: int, names: list[str]):
    """The CSV text in pieces: the header, then one piece per series."""
    return _csv(["name", "step", "value", "time"], (
        [(name, step, _cell(value), _cell(time))
         for step, value, time in zip(points["steps"], points["values"], points["times"])]
        for name, points in _series_rows(run_id, names)))


def metrics_parquet(run_id: int, names: list[str]):
    """The Parquet file in pieces: one row group per series, then the footer."""
    return _parquet(METRIC_SCHEMA, (
        {"name": [name] * len(points["steps"]), "step": points["steps"], "value": points["values"],
         "time": points["times"]}
        for name, points in _series_rows(run_id, names)))


# --- rollouts --------------------------------------------------------------------------------------

ROLLOUT_FORMATS = {"jsonl": "application/x-ndjson", "csv": "text/csv; charset=utf-8",
                   "parquet": "application/vnd.apache.parquet"}
ROLLOUT_COLUMNS = ["step", "prompt_id", "index", "answer", "valid", "in_majority", "reward", "advantage", "length",
                   "used_for_training", "entropy", "extra", "text"]
ROLLOUT_SCHEMA = pa.schema([("step", pa.int64()), ("prompt_id", pa.string()), ("index", pa.int64()),
                            ("answer", pa.string()), ("valid", pa.bool_()), ("in_majority", pa.bool_()),
                            ("reward", pa.float64()), ("advantage", pa.float64()), ("length", pa.int64()),
                            ("used_for_training", pa.bool_()), ("entropy", pa.float64()),
                            ("extra", pa.string()), ("text", pa.string())])
EXPORT_PAGE, FIRST_EXPORT_PAGE = 1000, 100


def rollout_pages(run_id: int, params: dict):
    """Every rollout the search `params` match, a keyset page of EXPORT_PAGE at a time (search.py), in
    the search's order: the export holds exactly what paging through the search would show."""
    # a short first page: the download starts as soon as its first rows are read
    params = {**params, "limit": FIRST_EXPORT_PAGE, "cursor": None}
    first = True
    while True:
        page = search(run_id, params, count=False)  # a file needs no count
        if first and page.text_not_searched:
            # a search page can say what it did not read; a file cannot, and must hold every match
            raise FieldError("q", f"the run's text index is behind: {_behind(page)} rollouts past the "
                                   f"{settings.TEXT_SEARCH_UNINDEXED_MAX:,} unindexed ones a search reads were not "
                                   "searched, and an export must hold every match: export once the index has caught "
                                   "up (the search page shows the matches among the rollouts it reached now)")
        first = False
        if page.results:
            yield page.results
        if page.next_cursor is None:
            return
        params.update(cursor=page.next_cursor, limit=EXPORT_PAGE)


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
    writer.writerow(header)
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
