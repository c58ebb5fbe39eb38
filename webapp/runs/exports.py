"""Exports of a run's data as files (DESIGN §4.6, issue 10), streamed: a response starts with the
first series and memory holds one series at a time, whatever the run's length.

Metrics are exported long, one row per point: `name, step, value, time` (eval metrics keep their
`eval/` prefix; `time` is the unix seconds of the event that logged the point), series by series in
name order, steps ascending. `df.pivot(index="step", columns="name", values="value")` makes it wide.
"""
import csv
import io

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
