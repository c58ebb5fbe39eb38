"""Exports of a run's data as files (DESIGN §4.6, issue 10), streamed: a response starts with the
first series (or page of rollouts) and memory holds one at a time, whatever the run's size.

Metrics are exported long, one row per point: `name, step, value, time` (eval metrics keep their
`eval/` prefix; `time` is the unix seconds of the event that logged the point), series by series in
name order, steps ascending. `df.pivot(index="step", columns="name", values="value")` makes it wide.

Rollouts are exported with the rollout search's filters and order (webapp/runs/search.py), one row
per rollout: its step, prompt id and index, the fields of DESIGN §4.2, `extra` as JSON text in CSV
and Parquet, and the text last.
"""
import csv
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq

from . import series

FORMATS = {"csv": "text/csv; charset=utf-8", "parquet": "application/vnd.apache.parquet"}
METRIC_SCHEMA = pa.schema([("name", pa.string()), ("step", pa.int64()), ("value", pa.float64()),
                           ("time", pa.float64())])


def metric_names(run_id: int, names: list[str] | None = None) -> list[str]:
    """The run's metric series (the named ones that exist, or all), in name order."""
    rows = series.MetricSeries.objects.filter(run_id=run_id, clock=False)
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
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["name", "step", "value", "time"])
    yield buffer.getvalue()
    for name, points in _series_rows(run_id, names):
        buffer.seek(0)
        buffer.truncate()
        # repr keeps every float exact (csv would too); a missing value or time is an empty field
        writer.writerows((name, step, "" if value is None else repr(value), "" if time is None else repr(time))
                         for step, value, time in zip(points["steps"], points["values"], points["times"]))
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


def metrics_parquet(run_id: int, names: list[str]):
    """The Parquet file in pieces: one row group per series, then the footer."""
    sink = _Drain()
    with pq.ParquetWriter(sink, METRIC_SCHEMA) as writer:
        for name, points in _series_rows(run_id, names):
            n = len(points["steps"])
            writer.write_table(pa.table({"name": [name] * n, "step": points["steps"], "value": points["values"],
                                         "time": points["times"]}, schema=METRIC_SCHEMA))
            yield sink.take()
    yield sink.take()  # the footer, written on close


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
EXPORT_PAGE = 1000


def rollout_pages(run_id: int, params: dict):
    """Every rollout the search `params` match, a keyset page of EXPORT_PAGE at a time (search.py), in
    the search's order: the export holds exactly what paging through the search would show."""
    from .search import search

    params = {**params, "limit": EXPORT_PAGE, "cursor": None}
    while True:
        page = search(run_id, params)
        if page.results:
            yield page.results
        if page.next_cursor is None:
            return
        params["cursor"] = page.next_cursor


def rollouts_jsonl(pages):
    for rows in pages:
        yield "".join(json.dumps({key: row[key] for key in ROLLOUT_COLUMNS}, allow_nan=False) + "\n" for row in rows)


def rollouts_csv(pages):
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(ROLLOUT_COLUMNS)
    yield buffer.getvalue()
    for rows in pages:
        buffer.seek(0)
        buffer.truncate()
        writer.writerows([_cell(row[key]) if key != "extra" else json.dumps(row["extra"]) for key in ROLLOUT_COLUMNS]
                         for row in rows)
        yield buffer.getvalue()


def rollouts_parquet(pages):
    sink = _Drain()
    with pq.ParquetWriter(sink, ROLLOUT_SCHEMA) as writer:
        for rows in pages:
            columns = {key: [row[key] for row in rows] for key in ROLLOUT_COLUMNS}
            columns["extra"] = [json.dumps(extra) for extra in columns["extra"]]
            writer.write_table(pa.table(columns, schema=ROLLOUT_SCHEMA))
            yield sink.take()
    yield sink.take()


def _cell(value):
    """A CSV field: a missing value is empty, a float exact (repr), a bool true/false as in JSON."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, float) else value
