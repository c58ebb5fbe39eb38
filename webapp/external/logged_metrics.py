"""A run's metrics as MLflow's protocol returns them, exactly as MLflow's own server would (DESIGN §4.8): every
value logged, several per key and step, steps in any order and of any 64-bit size, each with its own millisecond
timestamp (models.LoggedMetric), and each key's latest value by (step, timestamp, value) (models.LatestMetric).
The charts, the rules and the exports read the metric store instead (webapp/metrics), where a step holds the latest
value logged at it: a resumed run's chart shows the step as it was logged last.

Values are stored as MLflow's SQL store writes them (mlflow/store/tracking/sqlalchemy_store.py,
sanitize_metric_value): NaN as 0 with `is_nan`, +inf and -inf as the largest and smallest float."""
import base64
import binascii
import json
import math

from django.db import connection, transaction

from webapp import bulk
from webapp.metrics import series

from .mlflow_protocol import invalid
from .models import LatestMetric, LoggedMetric, UnchartedMetric

LARGEST = 1.7976931348623157e308  # what MLflow's SQL store writes for +inf ("Sql can not represent Infs")
LOGGED, LATEST, UNCHARTED = (LoggedMetric._meta.db_table, LatestMetric._meta.db_table,
                             UnchartedMetric._meta.db_table)
_COLUMNS = ("run_id", "key", "timestamp", "step", "value", "is_nan")


def stored(value: float) -> tuple[float, bool]:
    """(value, is_nan) as MLflow's SQL store keeps a metric value."""
    if math.isnan(value):
        return 0.0, True
    if math.isinf(value):
        return (LARGEST if value > 0 else -LARGEST), False
    return float(value), False


def record(run_id: int, points: list[tuple[str, float, int, int]], chart_steps: tuple[int, int]) -> int:
    """Keep a batch's points, (key, value, timestamp in ms, step) each: a point already kept is not kept again, and
    each key's latest value moves only to a point later by (step, timestamp, value), as MLflow's
    _update_latest_metrics_if_necessary compares them. The new points within `chart_steps` wait for the charts
    (UnchartedMetric, charting.py). One statement on PostgreSQL, one transaction on SQLite. Returns how many
    points wait for the charts."""
    rows, latest = _rows(run_id, points)
    if not rows:
        return 0
    names = ", ".join(bulk.quoted(c) for c in _COLUMNS)
    step = bulk.quoted("step")
    newest = list(latest.values())
    upsert_tail = _latest_upsert()
    if connection.vendor == "postgresql":
        # the points, those of them that are new waiting for the charts, and the latest values, in one round trip;
        # as arrays, so that the statement's text is the same whatever the batch (psycopg's cache of it holds)
        columns = ", ".join(bulk.quoted(c) for c in _COLUMNS[1:])
        ((waiting,),) = bulk.fetch(
            f"WITH new AS (INSERT INTO {LOGGED} ({names}) SELECT %s, * FROM {_ARRAYS} ON CONFLICT DO NOTHING "
            f"RETURNING {columns}), "
            f"waiting AS (INSERT INTO {UNCHARTED} ({names}) SELECT %s, {columns} FROM new "
            f"WHERE {step} BETWEEN %s AND %s RETURNING 1), "
            f"latest AS (INSERT INTO {LATEST} ({names}) SELECT %s, * FROM {_ARRAYS} {upsert_tail} RETURNING 1) "
            "SELECT count(*) FROM waiting",
            [run_id, *_columns_of(rows), run_id, *chart_steps, run_id, *_columns_of(newest)])
        return waiting
    one = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    with transaction.atomic():
        new = bulk.fetch(f"INSERT INTO {LOGGED} ({names}) VALUES {', '.join([one] * len(rows))} ON CONFLICT DO NOTHING "
                         f"RETURNING {names}", [v for row in rows for v in row])
        waiting = [row for row in new if chart_steps[0] <= row[3] <= chart_steps[1]]
        if waiting:
            bulk.fetch(f"INSERT INTO {UNCHARTED} ({names}) VALUES {', '.join([one] * len(waiting))}",
                       [v for row in waiting for v in row])
        bulk.fetch(f"INSERT INTO {LATEST} ({names}) VALUES {', '.join([one] * len(newest))} {upsert_tail}",
                   [v for row in newest for v in row])
    return len(waiting)


def keep_latest(run_id: int, points: list[tuple]) -> None:
    """Each key's latest value only, moved as record() moves it, for points kept elsewhere: a logger's files
    imported by `evolab sync` (imports.py: (id, key, timestamp, step, value, is_nan), stored values) are kept by the
    charts, and get-history reads them there."""
    newest = {}  # key -> (step, timestamp, value, is_nan): MLflow's order
    for _, key, timestamp, step, value, is_nan in points:
        point = (step, timestamp, value, is_nan)
        if point > newest.get(key, _EARLIEST):
            newest[key] = point
    if not newest:
        return
    latest = {key: (run_id, key, timestamp, step, value, is_nan) for key, (step, timestamp, value, is_nan) in newest.items()}
    names = ", ".join(bulk.quoted(c) for c in _COLUMNS)
    one = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    bulk.fetch(f"INSERT INTO {LATEST} ({names}) VALUES {', '.join([one] * len(latest))} {_latest_upsert()} RETURNING 1",
               [v for row in latest.values() for v in row])


_EARLIEST = (-math.inf,)


def _rows(run_id: int, points) -> tuple[list[tuple], dict]:
    """(run_id, key, timestamp, step, value, is_nan) rows of (key, value, timestamp, step) points, as stored, and
    each key's latest of them."""
    rows, latest = [], {}
    for key, value, timestamp, step in points:
        value, is_nan = stored(value)
        row = (run_id, key, timestamp, step, value, is_nan)
        rows.append(row)
        if key not in latest or _later(row, latest[key]):
            latest[key] = row
    return rows, latest


def _latest_upsert() -> str:
    """MLflow's _update_latest_metrics_if_necessary: a key's latest value moves only to a later (step, timestamp,
    value)."""
    key, stamp, value = (bulk.quoted(c) for c in ("key", "timestamp", "value"))
    return (f"ON CONFLICT (run_id, {key}) DO UPDATE SET {stamp} = excluded.{stamp}, step = excluded.step, "
            f"{value} = excluded.{value}, is_nan = excluded.is_nan "
            f"WHERE (excluded.step, excluded.{stamp}, excluded.{value}) > ({LATEST}.step, {LATEST}.{stamp}, "
            f"{LATEST}.{value})")


# a batch's columns as PostgreSQL arrays, one row per point (key, timestamp, step, value, is_nan)
_ARRAYS = "unnest(%s::text[], %s::bigint[], %s::bigint[], %s::float8[], %s::bool[])"


def _columns_of(rows: list[tuple]) -> list[list]:
    """The columns after run_id of (run_id, key, timestamp, step, value, is_nan) rows, one list each."""
    return [[row[i] for row in rows] for i in range(1, len(_COLUMNS))]


def _later(row: tuple, than: tuple) -> bool:
    """Whether a point (run_id, key, timestamp, step, value, is_nan) is later than another: by step, then
    timestamp, then value."""
    return (row[3], row[2], row[4]) > (than[3], than[2], than[4])


def latest(run_ids: list[int]) -> dict:
    """{run_id: {key: (step, value, timestamp in ms)}} of each key's latest value (NaN where it is one)."""
    found = {run_id: {} for run_id in run_ids}
    if not run_ids:
        return found
    for run_id, key, timestamp, step, value, is_nan in bulk.fetch(
            f"SELECT run_id, {bulk.quoted('key')}, {bulk.quoted('timestamp')}, step, {bulk.quoted('value')}, is_nan "
            f"FROM {LATEST} WHERE run_id IN ({bulk.placeholders(run_ids)})", run_ids):
        found[run_id][key] = (step, math.nan if is_nan else value, timestamp)
    return found


def history_json(run_id: int, key: str, page_token: str | None, max_results: int | None) -> str:
    """metrics/get-history's answer, written as text: the key's points in MLflow's order (timestamp, step, value),
    a page of `max_results` from the token's offset, and the next page's token when more remain."""
    offset = _offset(page_token)
    limit = f" LIMIT {int(max_results) + 1}" if max_results is not None else ""
    if offset:  # SQLite takes an OFFSET only after a LIMIT (-1: none)
        limit = (limit or (" LIMIT -1" if connection.vendor == "sqlite" else "")) + f" OFFSET {offset}"
    rows = bulk.fetch(
        f"SELECT {bulk.quoted('timestamp')}, step, {bulk.quoted('value')}, is_nan FROM {LOGGED} "
        f"WHERE run_id = %s AND {bulk.quoted('key')} = %s ORDER BY {bulk.quoted('timestamp')}, step, "
        f"{bulk.quoted('value')}{limit}", [run_id, key])
    if not rows and not (offset and _logged(run_id, key)):  # a key only charted: its page of the charts' points
        charted = [(t, s, 0.0 if math.isnan(v) else v, math.isnan(v)) for t, s, v in _charted(run_id, key)]
        rows = charted[offset:offset + max_results + 1] if max_results is not None else charted[offset:]
    more = max_results is not None and len(rows) > max_results
    rows = rows[:max_results] if more else rows
    head = '{"key":' + json.dumps(key) + ',"value":'
    body = ",".join(f'{head}{_NAN if is_nan else repr(float(value))},"timestamp":{timestamp},"step":{step}}}'
                    for timestamp, step, value, is_nan in rows)
    token = ',"next_page_token":' + json.dumps(_token(offset + len(rows))) if more else ""
    return '{"metrics":[' + body + "]" + token + "}"


def points(run_id: int, key: str, order: str = "timestamp", steps: tuple[int, int] | None = None,
           limit: int | None = None) -> list[tuple[int, int, float]]:
    """[(timestamp, step, value)] of one key, NaN as NaN, in MLflow's history order (timestamp, step, value) or, with
    order="step", by (step, timestamp, value) as its sampled history reads them; `steps` bounds the steps."""
    columns = [bulk.quoted("timestamp"), "step", bulk.quoted("value")]
    if order == "step":
        columns = [columns[1], columns[0], columns[2]]
    where, params = "", [run_id, key]
    if steps is not None:
        where, params = " AND step >= %s AND step <= %s", params + list(steps)
    rows = bulk.fetch(
        f"SELECT {bulk.quoted('timestamp')}, step, {bulk.quoted('value')}, is_nan FROM {LOGGED} "
        f"WHERE run_id = %s AND {bulk.quoted('key')} = %s{where} ORDER BY {', '.join(columns)}, is_nan"
        f"{f' LIMIT {int(limit)}' if limit is not None else ''}", params)
    if not rows:
        rows = [(t, s, v, False) for t, s, v in _charted(run_id, key, order)
                if steps is None or steps[0] <= s <= steps[1]][:limit]
    return [(timestamp, step, math.nan if is_nan else value) for timestamp, step, value, is_nan in rows]


def _logged(run_id: int, key: str) -> bool:
    return bool(bulk.fetch(f"SELECT 1 FROM {LOGGED} WHERE run_id = %s AND {bulk.quoted('key')} = %s LIMIT 1",
                           [run_id, key]))


def _charted(run_id: int, key: str, order: str = "timestamp") -> list[tuple[int, int, float]]:
    """[(timestamp, step, value)] of a key never logged through MLflow's protocol but charted: a logger's files
    imported by `evolab sync` (imports.py), whose points only the charts keep. One value a step, its time the
    step's own (ms); a NaN or ±inf logged is a gap on the chart and comes back as NaN."""
    found = series.read([run_id], [key])[run_id].get(key)
    if found is None:
        return []
    columns = found.lists()
    rows = [(round(t * 1000) if t is not None else 0, s, math.nan if v is None else v)
            for s, v, t in zip(columns["steps"], columns["values"], columns["times"])]
    return sorted(rows, key=(lambda r: (r[1], r[0])) if order == "step" else (lambda r: (r[0], r[1])))


_NAN = '"NaN"'  # NaN as protobuf's JSON writes it


def _token(offset: int) -> str:
    return base64.b64encode(json.dumps({"offset": offset}).encode()).decode()


def _offset(token: str | None) -> int:
    if not token:
        return 0
    try:
        offset = json.loads(base64.b64decode(token.encode()).decode())["offset"]
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError
        return offset
    except (ValueError, KeyError, TypeError, binascii.Error, UnicodeDecodeError):
        raise invalid(f"Invalid page token, could not base64-decode: {token!r}") from None
