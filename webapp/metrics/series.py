"""Metric series storage: how points are written, closed into chunks and read back (issue 9).

A run's metrics are series (MetricSeries: run, name), each value a narrow row (MetricPoint: series,
step, value) while its step is recent. Every CHUNK_STEPS steps of the run, once the run has moved
OPEN_TAIL steps past them, those steps close: each series' points in them become one MetricChunk
row holding the steps, values and times as JSON text, rendered once. A 10,000-step series is
then ten chunk rows and a short open tail, read and sent without formatting a number again.

Times are not stored per point: each metrics or eval event's time is a point of its clock series
(MetricSeries.clock), and a point's time is its clock's value at its step.

A step logged again (a resumed run replaying steps after its checkpoint) replaces the stored value;
when that step is closed, the run's chunks from there on open again first, and close again once
the run has moved on. Ingestion of one run is serialised by its run row lock, so nothing here races.

This module is the one route to the store's rows (tests/test_layers.py keeps webapp/metrics/models.py private to
webapp/metrics), as MLflow's AbstractStore is to its storage. Writing: store_points, reopen. Reading: names (the
series a run has), read (whole series for the pages and the API), read_between and read_ranges (values in step
ranges, by name), value_at (one value), latest (each series' last point), latest_value (the last value of a name, as
a subquery on a query of runs), overview, metric_steps, first_step, stored_values; TABLES (its tables, for their
statistics).
"""
import bisect
import json
import math
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from django.db import connection, models, transaction
from django.db.models import OuterRef, Subquery

from webapp import bulk
from .models import MetricChunk, MetricPoint, MetricSeries

# The run's row keeps how far its series are closed (Run.series_closed_until); the store writes it through
# its own rows' link to the run, with no import of the runs package (which imports this one).
Run = MetricSeries._meta.get_field("run").related_model

CHUNK_STEPS = 500
# Steps that stay open behind the newest: the run list reads each series' latest point, and a live
# run's newest steps are the ones a replay after a resume rewrites. Few, so a read's open part is short.
OPEN_TAIL = 64


def _render(values) -> str:
    """The body of a JSON list, as json.dumps writes it (1.0, null)."""
    return json.dumps(values, separators=(",", ":"), allow_nan=False)[1:-1]


def _parse(body: str) -> list:
    return json.loads(f"[{body}]")


# --- writing --------------------------------------------------------------------------------------


def store_points(run: Run, latest: dict, first_new_step: int | None, last_step: int | None,
                 known: dict | None = None) -> None:
    """latest: {(clock, name, step): value} of the ingested events (the later event's value when a
    batch logs a step twice); last_step: the run's last step once they are stored.

    A step at or past first_new_step cannot be stored yet (no event of the run reached it): those
    points go in by COPY, or, when the batch carries the run past their chunk (a restarted
    supervisor catching up), straight into chunks, never written twice. An earlier step is
    upserted, its chunk opened first if it was closed. `known`: series ids the caller remembers."""
    if not latest:
        return
    ids = series_ids(run, {(clock, name) for clock, name, _ in latest}, known)
    earliest_seen = min((step for _, _, step in latest if first_new_step is not None and step < first_new_step),
                        default=None)
    if earliest_seen is not None and earliest_seen < run.series_closed_until:
        reopen(run, earliest_seen)
    until = _closable_until(run, last_step)
    fresh, closing, seen = [], [], []
    for (clock, name, step), value in latest.items():
        row = (ids[(clock, name)], step, value)
        if first_new_step is not None and step < first_new_step:
            seen.append(row)
        else:
            (closing if step < until else fresh).append(row)
    table = MetricPoint._meta.db_table
    bulk.upsert_points(table, seen)
    bulk.copy_rows(table, ["series_id", "step", "value"], fresh)
    if until > run.series_closed_until:
        close_chunks(run, until, closing, ids)


def _closable_until(run: Run, last_step: int | None) -> int:
    """The end of the whole CHUNK_STEPS ranges lying OPEN_TAIL steps behind last_step."""
    if last_step is None:
        return run.series_closed_until
    return max(run.series_closed_until, (last_step - OPEN_TAIL) // CHUNK_STEPS * CHUNK_STEPS)


def series_ids(run: Run, keys: set, known: dict | None = None) -> dict:
    """{(clock, name): series id} for at least the given series of the run, creating the ones it
    lacks; `known` (updated in place) spares the query when it holds them all already."""
    ids = {} if known is None else known
    if keys <= ids.keys():
        return ids
    ids.update({(clock, name): pk for pk, clock, name in
                MetricSeries.objects.filter(run=run).values_list("id", "clock", "name")})
    missing = sorted(keys - ids.keys())
    if missing:
        created = MetricSeries.objects.bulk_create(
            [MetricSeries(run=run, clock=c, name=n.replace("\x00", "\ufffd")) for c, n in missing])
        ids.update({(s.clock, n): s.pk for s, (_, n) in zip(created, missing)})
    return ids


def close_chunks(run: Run, until: int, extra: list, ids: dict) -> None:
    """Close the run's steps from series_closed_until to `until`: every series' points there (those
    stored and `extra`, new (series, step, value) rows not written yet) become MetricChunk rows.
    `ids`: {(clock, name): id} of every series of the run (series_ids)."""
    start = run.series_closed_until
    if until <= start:
        return
    kinds = {pk: key for key, pk in ids.items()}
    stored = (MetricPoint.objects.filter(series_id__in=list(kinds), step__gte=start, step__lt=until)
              .values_list("series_id", "step", "value"))
    by_series: dict[int, dict] = {}
    for series_id, step, value in [*stored, *extra]:  # extra are the later values
        by_series.setdefault(series_id, {})[step] = value
    clocks = {name: by_series.get(pk, {}) for pk, (clock, name) in kinds.items() if clock}
    chunks = []
    for series_id, points in by_series.items():
        clock, name = kinds[series_id]
        steps = sorted(points)
        values = [points[s] for s in steps]
        if clock:
            times = values
        else:
            clock_points = clocks.get(MetricSeries.clock_for(name), {})
            times = [clock_points.get(s) for s in steps]
        for begin in range(start, until, CHUNK_STEPS):
            lo, hi = bisect.bisect_left(steps, begin), bisect.bisect_left(steps, begin + CHUNK_STEPS)
            if lo < hi:
                chunks.append(MetricChunk(series_id=series_id, first_step=begin, last_step=steps[hi - 1],
                                          steps=_render(steps[lo:hi]), values=_render(values[lo:hi]),
                                          times=_render(times[lo:hi]), packed=pack(steps[lo:hi], values[lo:hi])))
    MetricChunk.objects.bulk_create(chunks, batch_size=500)
    MetricPoint.objects.filter(series_id__in=list(kinds), step__gte=start, step__lt=until).delete()
    Run.objects.filter(pk=run.pk).update(series_closed_until=until)
    run.series_closed_until = until


def reopen(run: Run, step: int) -> None:
    """Turn the run's chunks from the one holding `step` on back into points, so a step logged again
    can replace its value; store_points closes them again once the run has moved on."""
    begin = step // CHUNK_STEPS * CHUNK_STEPS
    chunks = MetricChunk.objects.filter(series__run=run, first_step__gte=begin)
    rows = []
    for series_id, steps, values in chunks.values_list("series_id", "steps", "values"):
        rows.extend((series_id, s, v) for s, v in zip(_parse(steps), _parse(values)))
    chunks.delete()
    bulk.copy_rows(MetricPoint._meta.db_table, ["series_id", "step", "value"], rows)
    Run.objects.filter(pk=run.pk).update(series_closed_until=begin)
    run.series_closed_until = begin


def floats(values: list) -> np.ndarray:
    """Stored values (None where missing) as float64 with NaN for None."""
    return np.array([np.nan if v is None else v for v in values], dtype="<f8")


def pack(steps: list[int], values: list) -> bytes:
    """MetricChunk.packed: int32 steps, then float64 values (NaN for missing), little-endian."""
    return np.asarray(steps, dtype="<i4").tobytes() + floats(values).tobytes()


def unpack(packed: bytes) -> tuple[np.ndarray, np.ndarray]:
    n = len(packed) // 12
    return np.frombuffer(packed, dtype="<i4", count=n), np.frombuffer(packed, dtype="<f8", offset=4 * n)


# the store's tables, whose planner statistics ingestion keeps fresh (webapp/runs/table_statistics.py)
TABLES = (MetricPoint._meta.db_table, MetricChunk._meta.db_table)


def names(run_or_id, *, among=None, prefixes: tuple[str, ...] = (), clock: bool = False) -> list[str]:
    """The names of a run's metric series (clock=True: its clocks, "metrics" and "eval"), in name order; with
    `among` or `prefixes`, those that are one of `among` or start with one of the prefixes."""
    rows = MetricSeries.objects.filter(run=run_or_id, clock=clock)
    if among is not None or prefixes:
        wanted = models.Q(name__in=list(among or ()))
        for prefix in prefixes:
            wanted |= models.Q(name__startswith=prefix)
        rows = rows.filter(wanted)
    return sorted(rows.values_list("name", flat=True))


def read_between(run_or_id, names, low: int | None = None, high: int | None = None,
                 clock: bool = False) -> dict[str, list]:
    """{name: [(step, value)]} of the run's series of those names (clocks with clock=True) at low <= step <= high
    (either end open), from chunks and open points alike, in step order; a name with no series is left out."""
    return read_ranges(run_or_id, names, [(low, high)], clock)[0]


def read_ranges(run_or_id, names, ranges: list[tuple[int | None, int | None]], clock: bool = False) -> list[dict]:
    """read_between for each (low, high) of `ranges`, the series looked up once (the alert rules read a run's first
    steps and its last ones)."""
    found = dict(MetricSeries.objects.filter(run=run_or_id, clock=clock, name__in=list(names))
                 .values_list("id", "name"))
    return [{found[pk]: pairs for pk, pairs in _read_range(found, low, high).items()} for low, high in ranges]


def value_at(run_or_id, name: str, step: int, clock: bool = False) -> float | None:
    """The value stored for the run's series `name` at `step` (a clock's: the unix time of the event that logged
    it), closed into a chunk or not; None where there is none."""
    pairs = read_between(run_or_id, [name], step, step, clock=clock).get(name)
    return pairs[0][1] if pairs else None


def latest_value(name: str, run=None) -> Subquery:
    """The last value of the metric `name` of the run `run` refers to (default: the outer query's row, a query of
    runs), as a subquery to annotate with: the run list's columns, one SQL query for the whole list. Served by the
    series' (run, clock, name) and the points' (series, step) indexes; the newest OPEN_TAIL steps are always open."""
    rows = MetricPoint.objects.filter(series__run=OuterRef("pk") if run is None else run, series__clock=False,
                                      series__name=name).order_by("-step")
    return Subquery(rows.values("value")[:1])


def _clock_ids(run_or_id) -> dict:
    return {name: pk for pk, name in MetricSeries.objects.filter(run=run_or_id, clock=True).values_list("id", "name")}


# --- reading --------------------------------------------------------------------------------------


@dataclass
class Series:
    """One series as read: rendered chunk bodies first, then the open points, in step order."""

    chunks: list = field(default_factory=list)  # (steps, values, times) JSON list bodies
    steps: list = field(default_factory=list)
    values: list = field(default_factory=list)
    times: list = field(default_factory=list)

    def json(self) -> str:
        parts = {"steps": [c[0] for c in self.chunks], "values": [c[1] for c in self.chunks],
                 "times": [c[2] for c in self.chunks]}
        if self.steps:
            parts["steps"].append(_render(self.steps))
            parts["values"].append(_render(self.values))
            parts["times"].append(_render(self.times))
        return "{" + ",".join(f'"{key}":[{",".join(bodies)}]' for key, bodies in parts.items()) + "}"

    def lists(self) -> dict:
        """The series as Python lists: one parse per column, however many chunks."""
        out = {}
        for i, key in enumerate(("steps", "values", "times")):
            bodies = [c[i] for c in self.chunks]
            out[key] = (_parse(",".join(bodies)) if bodies else []) + getattr(self, key)
        return out


def read(run_ids: list[int], names: list[str] | None = None, since_step: int | None = None) -> dict:
    """{run_id: {name: Series}} of the runs' metric series (the named ones, or all), points after
    since_step only. Two short queries whatever the runs' length: the series, then chunks and open points."""
    result = {run_id: {} for run_id in run_ids}
    if not run_ids:
        return result
    # Raw SQL: a read is two fixed statements, and compiling them through the ORM cost more than
    # running them (the metrics API answers in a few milliseconds).
    wanted = {}
    clocks = {}
    for pk, run_id, clock, name in bulk.fetch(
            f"SELECT id, run_id, clock, name FROM {MetricSeries._meta.db_table} "
            f"WHERE run_id IN ({bulk.placeholders(run_ids)})", run_ids):
        if clock:
            clocks[(run_id, name)] = pk
        elif names is None or name in names:
            wanted[pk] = (run_id, name)
    if not wanted:
        return result
    clock_of = {pk: clocks.get((run_id, MetricSeries.clock_for(name))) for pk, (run_id, name) in wanted.items()}
    chunk_ids = list(wanted)
    point_ids = chunk_ids + [c for c in set(clock_of.values()) if c]
    since, cut = ("", []) if since_step is None else (" AND {} > %s", [since_step])
    # chunks and open points in one statement: a chunk row has first_step, a point row has step
    rows = bulk.fetch(
        f"SELECT series_id, first_step, steps, {bulk.quoted('values')}, times, NULL, NULL FROM {MetricChunk._meta.db_table} "
        f"WHERE series_id IN ({bulk.placeholders(chunk_ids)}){since.format('last_step')} UNION ALL "
        f"SELECT series_id, NULL, NULL, NULL, NULL, step, value FROM {MetricPoint._meta.db_table} "
        f"WHERE series_id IN ({bulk.placeholders(point_ids)}){since.format('step')} ORDER BY 1, 2, 6",
        chunk_ids + cut + point_ids + cut)
    chunk_rows = [row[:5] for row in rows if row[1] is not None]
    point_rows = [(row[0], row[5], row[6]) for row in rows if row[1] is None]
    series = {pk: Series() for pk in sorted(wanted, key=lambda pk: wanted[pk][1])}
    for series_id, first_step, steps, values, times in chunk_rows:
        if since_step is not None and first_step <= since_step:  # a chunk the cut goes through
            kept = [(s, v, t) for s, v, t in zip(_parse(steps), _parse(values), _parse(times)) if s > since_step]
            if not kept:
                continue
            steps, values, times = (_render(list(column)) for column in zip(*kept))
        series[series_id].chunks.append((steps, values, times))
    open_points: dict[int, list] = {}
    for series_id, step, value in point_rows:
        open_points.setdefault(series_id, []).append((step, value))
    clock_time = {c: dict(open_points.get(c, ())) for c in set(clock_of.values()) if c}
    for pk, item in series.items():
        own = open_points.get(pk, ())
        if own:
            times = clock_time.get(clock_of[pk], {})
            item.steps = [s for s, _ in own]
            item.values = [v for _, v in own]
            item.times = [times.get(s) for s in item.steps]
        if item.chunks or item.steps:
            run_id, name = wanted[pk]
            result[run_id][name] = item
    return result


def keep_indices(values: np.ndarray, max_points: int) -> list[int] | None:
    """Which points of a series (values in step order, NaN where missing) a thinning to max_points
    keeps, or None when it has no more than max_points. The points are cut into max_points // 2
    buckets of consecutive steps and each keeps its lowest and its highest value (the first of
    equal ones); missing values never win a bucket unless the whole bucket is missing, which then
    keeps its first point."""
    n = len(values)
    if n <= max_points:
        return None
    buckets = max(1, max_points // 2)
    size = math.ceil(n / buckets)
    rows = math.ceil(n / size)
    padded = np.full(rows * size, np.nan)
    padded[:n] = values
    grid = padded.reshape(rows, size)
    missing = np.isnan(grid)
    low = np.argmin(np.where(missing, np.inf, grid), axis=1)
    high = np.argmax(np.where(missing, -np.inf, grid), axis=1)
    keep = []
    for row in range(rows):
        start = row * size
        if missing[row].all():
            keep.append(start)
        else:
            keep.extend(sorted({start + int(low[row]), start + int(high[row])}))
    return keep


@contextmanager
def one_snapshot():
    """Reads that see one state of the database: a transaction, REPEATABLE READ on PostgreSQL (its READ COMMITTED
    gives each statement its own snapshot). On SQLite the transaction begins IMMEDIATE (settings.py), holding the
    write lock for the reads' few milliseconds, so nothing is ingested in between. Inside a transaction begun by a
    caller the reads share the caller's."""
    if connection.in_atomic_block:
        yield
        return
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


def overview(run_id: int, max_points: int) -> tuple[dict, list[str]]:
    """({name: {steps, values, times}}, names thinned) of every metric series of the run, each thinned
    to at most max_points (min and max per bucket, keep_indices, the rule webapp.runs.queries.downsample thins by too) from the
    chunks' packed arrays: no JSON is parsed, so a 10,000-step run's 30 series open in milliseconds."""
    with one_snapshot():  # ingestion goes on between the three reads: a series new since the first was a KeyError
        rows = list(MetricSeries.objects.filter(run_id=run_id).values_list("id", "clock", "name"))
        arrays: dict[int, list] = {pk: [] for pk, _, _ in rows}
        for series_id, packed in (MetricChunk.objects.filter(series__run_id=run_id).order_by("series_id", "first_step")
                                  .values_list("series_id", "packed")):
            arrays[series_id].append(unpack(bytes(packed)))
        open_points: dict[int, list] = {}
        for series_id, step, value in (MetricPoint.objects.filter(series__run_id=run_id).order_by("series_id", "step")
                                       .values_list("series_id", "step", "value")):
            open_points.setdefault(series_id, []).append((step, value))
    for pk, pairs in open_points.items():
        arrays[pk].append((np.array([s for s, _ in pairs], dtype="<i4"), floats([v for _, v in pairs])))

    def joined(pk):
        parts = arrays.get(pk) or []
        if not parts:
            return np.empty(0, dtype="<i4"), np.empty(0, dtype="<f8")
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    clocks = {name: joined(pk) for pk, clock, name in rows if clock}
    result, thinned = {}, []
    for pk, clock, name in sorted(rows, key=lambda row: row[2]):
        if clock:
            continue
        steps, values = joined(pk)
        if not len(steps):
            continue
        keep = keep_indices(values, max_points)
        if keep is None:
            keep = np.arange(len(steps))
        else:
            thinned.append(name)
        steps, values = steps[keep], values[keep]
        clock_steps, clock_times = clocks.get(MetricSeries.clock_for(name), (np.empty(0, "<i4"), np.empty(0, "<f8")))
        at = np.searchsorted(clock_steps, steps)
        found = (at < len(clock_steps)) & (clock_steps[np.minimum(at, len(clock_steps) - 1)] == steps) \
            if len(clock_steps) else np.zeros(len(steps), dtype=bool)
        times = np.where(found, clock_times[np.minimum(at, max(len(clock_steps) - 1, 0))] if len(clock_steps) else np.nan,
                         np.nan)
        result[name] = {"steps": steps.tolist(), "values": _nullable(values), "times": _nullable(times)}
    return result, thinned


def _nullable(array: np.ndarray) -> list:
    return [None if v != v else v for v in array.tolist()]  # NaN (missing) back to None


def read_json(run_id: int, names: list[str] | None = None, since_step: int | None = None) -> str:
    """The JSON text of {name: {steps, values, times}}: closed chunks go out as they were rendered."""
    found = read([run_id], names, since_step)[run_id]
    return "{" + ",".join(f"{json.dumps(name)}:{s.json()}" for name, s in found.items()) + "}"


def _read_range(series_ids: dict, low: int | None = None, high: int | None = None) -> dict:
    """{series id: [(step, value)]} of the given series with low <= step <= high (either end open):
    what the alert rules read, from chunks and open points alike."""
    out = {pk: [] for pk in series_ids}
    chunks = MetricChunk.objects.filter(series_id__in=list(series_ids))
    points = MetricPoint.objects.filter(series_id__in=list(series_ids))
    if low is not None:
        chunks, points = chunks.filter(last_step__gte=low), points.filter(step__gte=low)
    if high is not None:
        chunks, points = chunks.filter(first_step__lte=high), points.filter(step__lte=high)
    for series_id, steps, values in chunks.order_by("series_id", "first_step").values_list("series_id", "steps", "values"):
        out[series_id].extend((s, v) for s, v in zip(_parse(steps), _parse(values))
                              if (low is None or s >= low) and (high is None or s <= high))
    for series_id, step, value in points.order_by("series_id", "step").values_list("series_id", "step", "value"):
        out[series_id].append((step, value))
    return out


def metric_steps(run, low: int, high: int) -> list[int]:
    """The steps from low to high at which the run logged metrics (its "metrics" clock's points), in order: the
    steps ingestion judges."""
    clock = _clock_ids(run).get("metrics")
    if clock is None:
        return []
    return [step for step, _ in _read_range({clock: None}, low=low, high=high)[clock]]


def first_step(run) -> int | None:
    """The first step any metrics or eval event logged."""
    firsts = []
    for pk in _clock_ids(run).values():
        chunk = MetricChunk.objects.filter(series_id=pk).order_by("first_step").values_list("steps", flat=True).first()
        point = MetricPoint.objects.filter(series_id=pk).order_by("step").values_list("step", flat=True).first()
        candidates = ([_parse(chunk)[0]] if chunk else []) + ([point] if point is not None else [])
        if candidates:
            firsts.append(min(candidates))
    return min(firsts) if firsts else None


def latest(run_ids: list[int]) -> dict:
    """{run_id: {name: (step, value, time)}}: each metric series' last point (MLflow's "latest metrics" of a
    run), in four short statements whatever the runs' length. A series whose points are all closed gives the
    last of its last chunk."""
    out = {run_id: {} for run_id in run_ids}
    if not run_ids:
        return out
    rows = bulk.fetch(f"SELECT id, run_id, clock, name FROM {MetricSeries._meta.db_table} "
                      f"WHERE run_id IN ({bulk.placeholders(run_ids)})", run_ids)
    metrics = {pk: (run_id, name) for pk, run_id, clock, name in rows if not clock}
    clocks = {(run_id, name): pk for pk, run_id, clock, name in rows if clock}
    if not metrics:
        return out
    points, chunks = MetricPoint._meta.db_table, MetricChunk._meta.db_table
    ids = list(metrics)
    last = {series_id: (step, value) for series_id, step, value in bulk.fetch(
        f"SELECT p.series_id, p.step, p.value FROM {points} p JOIN (SELECT series_id, MAX(step) AS top FROM {points} "
        f"WHERE series_id IN ({bulk.placeholders(ids)}) GROUP BY series_id) m "
        f"ON m.series_id = p.series_id AND m.top = p.step", ids)}
    times = {}
    closed = [pk for pk in ids if pk not in last]
    if closed:
        for series_id, packed, chunk_times in bulk.fetch(
                f"SELECT c.series_id, c.packed, c.times FROM {chunks} c JOIN (SELECT series_id, MAX(first_step) AS top "
                f"FROM {chunks} WHERE series_id IN ({bulk.placeholders(closed)}) GROUP BY series_id) m "
                f"ON m.series_id = c.series_id AND m.top = c.first_step", closed):
            steps, values = unpack(bytes(packed))
            if len(steps):
                last[series_id] = (int(steps[-1]), _nullable(values[-1:])[0])
                times[series_id] = _parse(chunk_times)[-1]
    wanted = {}  # clock id -> steps whose time is asked for
    for pk, (step, _) in last.items():
        if pk not in times:
            run_id, name = metrics[pk]
            clock = clocks.get((run_id, MetricSeries.clock_for(name)))
            if clock:
                wanted.setdefault(clock, set()).add(step)
    clock_time = {}
    for clock, steps in wanted.items():
        for step, value in bulk.fetch(f"SELECT step, value FROM {points} WHERE series_id = %s AND step IN "
                                      f"({bulk.placeholders(steps)})", [clock, *sorted(steps)]):
            clock_time[(clock, step)] = value
    for pk, (step, value) in last.items():
        run_id, name = metrics[pk]
        time = times.get(pk)
        if time is None:
            time = clock_time.get((clocks.get((run_id, MetricSeries.clock_for(name))), step))
        out[run_id][name] = (step, value, time)
    return out


def stored_values(run: Run, names, low: int, high: int) -> dict:
    """{(name, step): value} stored for the run's metric series of those names at low..high."""
    return {(name, step): value for name, pairs in read_between(run, names, low, high).items() for step, value in pairs}
