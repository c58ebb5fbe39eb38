"""A logger's points, imported by `evolab sync wandb|tensorboard|trackio` (issue 39): `POST /api/runs/{id}/metrics`.

MLflow's log-batch takes 1,000 points a request and keeps each as a row of MLflow's history before a worker charts it
(reporting.py, charting.py): about 17,000 points/s on PostgreSQL here. An import sends a finished run's whole
history (10,000 steps × 50 metrics is half a million points) and a live follower sends what the logger wrote since its
last poll, so this endpoint takes up to MAX_POINTS a request, as columns, and charts them before it answers: the metric
store, the alert rules (a batch of more than a thousand steps: on a worker, after the charts) and the live messages,
through ingestion as any run's metrics. MLflow's per-point history is not
written for them (a row a point was most of log-batch's cost): get-history answers a key that was only charted from
the charts (logged_metrics._charted), and runs/get's latest values are kept (logged_metrics.keep_latest).

Safe to send twice: a step charted again with the values it holds changes nothing. Bad input is refused whole, naming
the point and the field, before anything is written.

The body: {"keys": [name, ...], "points": [[key index, step, timestamp in ms, value], ...], "sync": {...}}; a value is a
number or "NaN", "Infinity", "-Infinity". `sync` (optional) is the command's running totals for the imports page
(LoggerImport): logger, folder, host, files, points, rollouts, skipped {kind: count}.
"""
import json

from django.db import transaction
from django.utils import timezone

from . import charting, logged_metrics
from .mlflow_protocol import MAX_ENTITY_KEY_LENGTH, NAN_WORDS
from .models import LoggerImport

MAX_POINTS = 100_000
MAX_TIMESTAMP = 2**53


class PointsError(ValueError):
    def __init__(self, message: str, field: str):
        super().__init__(message)
        self.field = field


def parse(body: bytes) -> tuple[list[tuple], dict | None]:
    """The points of a request's body as the charts read a waiting point, (None, key, timestamp, step, value, is_nan)
    with the value as MLflow's store keeps it (logged_metrics.stored), and the sync's totals; or PointsError naming
    what is wrong."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise PointsError(f"the body is not JSON: {exc}", "body") from None
    if not isinstance(data, dict):
        raise PointsError("the body must be an object {keys, points, sync}", "body")
    keys, rows = data.get("keys", []), data.get("points", [])
    if not isinstance(keys, list):
        raise PointsError("keys must be a list of metric names", "keys")
    for i, key in enumerate(keys):
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_ENTITY_KEY_LENGTH:
            raise PointsError(f"keys[{i}] is {json.dumps(key)[:60]}: a metric name is 1 to {MAX_ENTITY_KEY_LENGTH} "
                              "characters", f"keys[{i}]")
        if any(ord(c) < 32 for c in key):
            raise PointsError(f"keys[{i}] {key!a} holds a control character", f"keys[{i}]")
    if not isinstance(rows, list):
        raise PointsError("points must be a list of [key index, step, timestamp, value]", "points")
    if len(rows) > MAX_POINTS:
        raise PointsError(f"{len(rows):,} points in one request: at most {MAX_POINTS:,}", "points")
    low, high = charting.CHART_STEPS
    points = []
    for i, row in enumerate(rows):
        if type(row) is not list or len(row) != 4:
            raise PointsError(f"points[{i}] must be [key index, step, timestamp, value], not {json.dumps(row)[:80]}",
                              f"points[{i}]")
        k, step, timestamp, value = row
        if type(k) is not int or not 0 <= k < len(keys):
            raise PointsError(f"points[{i}]: key index {json.dumps(k)} is not one of keys' 0..{len(keys) - 1}",
                              f"points[{i}].key")
        if type(step) is not int or not low <= step <= high:
            raise PointsError(f"points[{i}] ({keys[k]}): step {json.dumps(step)} is not a whole number from {low} to "
                              f"{high}, the steps a chart holds", f"points[{i}].step")
        if type(timestamp) is not int or not 0 <= timestamp <= MAX_TIMESTAMP:
            raise PointsError(f"points[{i}] ({keys[k]}): timestamp {json.dumps(timestamp)} is not milliseconds since "
                              "1970 (a whole number)", f"points[{i}].timestamp")
        if type(value) is not float:
            value = _number(value, i, keys[k])
        if value - value == 0.0:  # finite (NaN and ±inf give NaN)
            points.append((None, keys[k], timestamp, step, value, False))
        else:
            points.append((None, keys[k], timestamp, step, *logged_metrics.stored(value)))
    sync = data.get("sync")
    if sync is not None:
        sync = _sync(sync)
    return points, sync


def _number(value, i: int, key: str) -> float:
    if type(value) is int:
        try:
            return float(value)
        except OverflowError:
            pass
    elif isinstance(value, str) and value in NAN_WORDS:
        return NAN_WORDS[value]
    raise PointsError(f"points[{i}] ({key}): value {json.dumps(value)[:40]} is not a number (or \"NaN\", "
                      "\"Infinity\", \"-Infinity\")", f"points[{i}].value")


def _sync(sync) -> dict:
    if not isinstance(sync, dict):
        raise PointsError("sync must be an object {logger, folder, host, files, points, rollouts, skipped}", "sync")
    if sync.get("logger") not in LoggerImport.LOGGERS:
        raise PointsError(f"sync.logger is {json.dumps(sync.get('logger'))}: one of {', '.join(LoggerImport.LOGGERS)}",
                          "sync.logger")
    for name, most in (("folder", 1000), ("host", 200)):
        if not isinstance(sync.get(name, ""), str) or len(sync.get(name, "")) > most:
            raise PointsError(f"sync.{name} must be text of at most {most} characters", f"sync.{name}")
    for name in ("files", "points", "rollouts"):
        if type(sync.get(name, 0)) is not int or sync.get(name, 0) < 0:
            raise PointsError(f"sync.{name} must be a count (a whole number, 0 or more)", f"sync.{name}")
    skipped = sync.get("skipped", {})
    if not isinstance(skipped, dict) or not all(isinstance(k, str) and len(k) <= 40 and type(v) is int and v >= 0
                                                for k, v in skipped.items()):
        raise PointsError("sync.skipped must be {kind: count}", "sync.skipped")
    return {"logger": sync["logger"], "folder": sync.get("folder", ""), "host": sync.get("host", ""),
            "files": sync.get("files", 0), "points": sync.get("points", 0), "rollouts": sync.get("rollouts", 0),
            "skipped": skipped}


def receive(run_id: int, points: list[tuple], sync: dict | None) -> dict:
    """Keep and chart a request's points (see the module's note) and the sync's totals, all or none (an error halfway
    leaves nothing of the request: the command sends it again). A deleted run is not found (Run.objects.visible_to),
    so none comes here."""
    with transaction.atomic():
        logged_metrics.keep_latest(run_id, points)
        charted = charting.chart_now(run_id, points)
        if sync is not None:
            now = timezone.now()
            LoggerImport.objects.update_or_create(run_id=run_id, defaults={**sync, "updated_at": now},
                                                  create_defaults={**sync, "updated_at": now, "started_at": now})
    return {"received": len(points), "charted_steps": charted}

