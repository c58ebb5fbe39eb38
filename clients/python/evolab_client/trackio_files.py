"""Reading the SQLite database Trackio (Hugging Face's local-first tracker, a verl logger too) keeps a project in:
`TRACKIO_DIR/PROJECT.db` (TRACKIO_DIR defaults to ~/.cache/huggingface/trackio), one row per `trackio.log` in its
`metrics` table (`id` autoincrement, `run_id`, `run_name`, `step`, ISO `timestamp`, `metrics` as JSON with NaN and
±inf written "NaN", "Infinity", "-Infinity") and each run's config in `configs`. Read-only, with the standard
library's sqlite3: no trackio package is needed. The position in a run is the last row id read."""
from __future__ import annotations

import json
import math
import sqlite3
from contextlib import closing
from datetime import datetime
from pathlib import Path

from .wandb_files import Point, flatten

SPECIAL = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def databases(directory) -> list[Path]:
    return sorted(Path(directory).glob("*.db"))


def connect(path: Path) -> sqlite3.Connection:
    """Read-only: a sync never writes to the database the trainer is writing. Each SELECT on it sees the rows
    committed before it (sqlite3 opens no transaction for a read), so a follower keeps one for the run."""
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)


def runs(path: Path) -> list[dict]:
    """The runs of one project's database: id, name and config, in the order they started."""
    with closing(connect(path)) as connection:
        found = {run_id: name for run_id, name in connection.execute(
            "SELECT run_id, run_name FROM metrics GROUP BY run_id ORDER BY min(id)")}
        configs = {run_id: (name, text) for run_id, name, text in connection.execute(
            "SELECT run_id, run_name, config FROM configs")}
    for run_id, (name, _) in configs.items():
        found.setdefault(run_id, name)
    return [{"id": run_id, "name": name, "project": path.stem, "config": _config(configs.get(run_id, (None, None))[1])}
            for run_id, name in found.items()]


def _config(text) -> dict:
    try:
        config = json.loads(text) if text else {}
    except ValueError:
        return {}
    # Trackio's own entries (_Username, _Created, _Group) are not the run's parameters
    return flatten({k: v for k, v in config.items() if not k.startswith("_")}) if isinstance(config, dict) else {}


def unread(connection: sqlite3.Connection, run_id: str, after: int) -> int:
    return connection.execute("SELECT count(*) FROM metrics WHERE run_id = ? AND id > ?", (run_id, after)).fetchone()[0]


def read(connection: sqlite3.Connection, run_id: str, after: int, limit: int) -> tuple[list[Point], dict, int]:
    """The points of up to `limit` rows of the run after row id `after`, the values skipped by kind, and the last
    row id read."""
    rows = connection.execute("SELECT id, step, timestamp, metrics FROM metrics WHERE run_id = ? AND id > ? "
                              "ORDER BY id LIMIT ?", (run_id, after, limit)).fetchall()
    points, skipped, last = [], {}, after
    for row_id, step, timestamp, text in rows:
        last = row_id
        millis = int(datetime.fromisoformat(timestamp).timestamp() * 1000)
        for key, value in json.loads(text).items():
            value = SPECIAL.get(value, value) if isinstance(value, str) else value
            if isinstance(value, bool):
                value = float(value)
            if isinstance(value, (int, float)):
                points.append(Point(key, float(value), int(step), millis))
            else:  # media (images, tables, histograms: dicts with a _type) and anything else
                kind = value.get("_type", "other") if isinstance(value, dict) else "other"
                skipped[kind] = skipped.get(kind, 0) + 1
    return points, skipped, last
