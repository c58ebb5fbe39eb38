"""The charts of a run that logs through MLflow's protocol (DESIGN §4.8), drawn by a worker behind the requests.

A log-batch request keeps its points as MLflow's store does (logged_metrics.record: get-history, runs/get and
runs/search answer from them at once) and leaves the new ones waiting for the charts (UnchartedMetric). A worker on
the external queue charts what waits: each step's latest value, through ingestion like any run's metrics (the metric
store, the alert rules, the live messages), under the names Evolab reads. Apart because that work was most of a
request's cost (a step's ingestion, its rules' judgement, its live push: ~25 ms of the ~30 a call took) while the
trainer waits on every log call, and because a worker charts what several requests left in one ingestion. The charts
follow the log by the time a worker takes to pick the task up.

Safe to run twice, and two at once take turns: a task charts the waiting points under the run's row lock and deletes
them in the transaction that charts them. A request asks for one task per run at a time (a key in the shared cache);
a lost task is sent again by the periodic resend. The task waits EXTERNAL_CHART_AFTER_SECONDS before it starts, so
that the steps logged meanwhile are charted together: one step at a time, a worker spent ~25 ms of CPU on each, on
the cores the web process answers the trainer from; ten at a time, ~5 ms each."""
import logging
import math
import re
from collections import OrderedDict
from functools import lru_cache

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rl.trainer_metrics import detect_trainer, with_design_names
from webapp import bulk
from webapp.alerts import failures
from webapp.metrics import series
from webapp.runs import ingestion
from webapp.runs.models import Run
from webapp.shared_cache import shared_cache
from webapp.tasks import CHART_LOGGED_METRICS, send

from .logged_metrics import LARGEST, LOGGED, UNCHARTED
from .queues import external_queue

log = logging.getLogger(__name__)

# the steps the charts hold, those the metric store does (MetricPoint.step is 32-bit, and a run's steps count from 0)
CHART_STEPS = (0, 2**31 - 1)
# the points one transaction charts: a backlog (a trainer that logged while the workers were away) is charted in
# turns of this many, each committed, so one turn never holds the run's lock for long
BATCH_POINTS = 20_000
# how long a request's "a task is coming" mark lasts: past it, the next request sends another (a lost message)
REQUEST_MARK_SECONDS = 30
_COLUMNS = "id, " + ", ".join(bulk.quoted(c) for c in ("key", "timestamp", "step", "value")) + ", is_nan"


def _mark(run: Run) -> str:
    # the MLflow run id too: a database made anew (a test's) numbers its runs from 1 again
    return f"chart-logged-metrics:{run.pk}:{run.mlflow_run_id}"


def request(run: Run) -> None:
    """Ask a worker to chart the run's waiting points, unless a task is coming already. Without the shared cache
    (Redis away) the task is sent anyway; a message that cannot be sent is sent again by resend_stale."""
    try:
        if not shared_cache().add(_mark(run), 1, timeout=REQUEST_MARK_SECONDS):
            return
    except Exception:  # noqa: BLE001 - redis-py's errors and sockets': either way, no mark
        log.warning("could not mark run %s's charting as asked for; asking anyway", run.pk, exc_info=True)
    send(CHART_LOGGED_METRICS, [run.pk], queue=external_queue(), countdown=settings.EXTERNAL_CHART_AFTER_SECONDS)


def chart_waiting(run_id: int) -> dict:
    """Chart every point the run's requests left waiting, a batch a transaction. Returns {"points": n charted,
    "steps": steps charted}."""
    charted, steps, unmarked = 0, 0, False
    while True:
        with transaction.atomic():
            run = Run.objects.select_for_update(no_key=True).filter(pk=run_id).first()
            if run is None:
                return {"points": charted, "steps": steps}
            if not unmarked:  # points logged from now on ask for another task: this one may read past them
                _unmark(run)
                unmarked = True
            rows = bulk.fetch(f"SELECT {_COLUMNS} FROM {UNCHARTED} WHERE run_id = %s ORDER BY id LIMIT {BATCH_POINTS}",
                              [run_id])
            if not rows:
                return {"points": charted, "steps": steps}
            failures.at_step(min(row[3] for row in rows))  # a failure from here is this batch's (workers/watched.py)
            steps += _chart(run, rows)
            # by id: a request's point that committed meanwhile, with an id among these, waits for the next turn
            ids = [row[0] for row in rows]
            bulk.fetch(f"DELETE FROM {UNCHARTED} WHERE id IN ({bulk.placeholders(ids)})", ids)
            charted += len(rows)
        _keep_memory(run)  # ingestion leaves it on the run once the transaction has committed


def chart_now(run_id: int, points: list[tuple]) -> int:
    """Chart the points a request brings whole (evolab sync's import of a logger's files, imports.py, at most
    imports.MAX_POINTS) before it answers, as chart_waiting charts what waits: (id, key, timestamp, step, value,
    is_nan) each, steps within CHART_STEPS. One transaction under the run's row lock: a long stretch of steps charted
    together goes straight into the metric store's chunks (series.store_points), where turns of a few hundred steps
    wrote each point as a row, read it back and deleted it when its chunk closed. Returns how many steps were
    charted."""
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).filter(pk=run_id).first()
        if run is None:
            return 0
        steps = _chart(run, points)
    # once the caller's transaction (imports.receive's) has committed, when ingestion has left the memory on the run
    transaction.on_commit(lambda: _keep_memory(run))
    return steps


def _unmark(run: Run) -> None:
    try:
        shared_cache().delete(_mark(run))
    except Exception:  # noqa: BLE001 - as in request: the mark then expires
        log.warning("could not clear run %s's charting mark", run.pk, exc_info=True)


def _chart(run: Run, rows: list[tuple]) -> int:
    """Chart the points (id, key, timestamp, step, value, is_nan): each step's latest value of each key, by
    (timestamp, value) as MLflow orders a key's values, unless a later one was charted already. Returns how many
    steps were charted."""
    latest: dict[tuple[int, str], tuple] = {}
    for _, key, timestamp, step, value, is_nan in rows:
        point = (timestamp, value, is_nan)
        if (step, key) not in latest or point[:2] > latest[(step, key)][:2]:
            latest[(step, key)] = point
    latest = _without_points_charted_later(run, latest)
    by_step: dict[int, dict] = {}
    times: dict[int, float] = {}
    for (step, key), (timestamp, value, is_nan) in latest.items():
        # NaN and ±inf (kept as ±the largest float) are gaps on a chart, as a trainer's own NaN is
        by_step.setdefault(step, {})[chart_name(key)] = None if is_nan or abs(value) >= LARGEST else value
        times[step] = max(times.get(step, timestamp / 1000), timestamp / 1000)
    if by_step:
        by_step = _without_values_already_stored(run, by_step)
    if not by_step:
        return 0
    trainer = run.trainer or detect_trainer({key for values in by_step.values() for key in values}) or ""
    if trainer != run.trainer:
        Run.objects.filter(pk=run.pk).update(trainer=trainer)
        run.trainer = trainer
    events = [{"time": times[step], "type": "metrics", "step": step, "values": with_design_names(values, trainer)}
              for step, values in sorted(by_step.items())]
    run._ingest_memory = _MEMORIES.pop(run.pk, None)
    ingestion.append_events(run, events)
    return len(events)


def _keep_memory(run: Run) -> None:
    memory = getattr(run, "_ingest_memory", None)
    if memory is not None:
        _MEMORIES[run.pk] = memory
        while len(_MEMORIES) > _MEMORIES_KEPT:
            _MEMORIES.popitem(last=False)


_AT = re.compile(r"_at_(?=\d)")


@lru_cache(maxsize=4096)  # a run's few hundred keys, asked for at every step
def chart_name(key: str) -> str:
    """The name a logged key is charted under: MLflow's keys cannot hold "@", so verl's logger writes `pass@16` as
    `pass_at_16` (verl/utils/tracking.py, _MlflowLoggingAdapter) and its validation's `mean@16` as `mean_at_16`;
    the charts, the rules and the exports read them as trainers name them."""
    return _AT.sub("@", key)


def _without_points_charted_later(run: Run, latest: dict) -> dict:
    """Drop the points of steps the run has charted when a later point of theirs (by timestamp, value) was logged
    before them: an asynchronous client's batch that arrived late, after the step's newer value."""
    again = {(step, key) for step, key in latest if run.last_step is not None and step <= run.last_step}
    if not again:
        return latest
    keys, steps = sorted({key for _, key in again}), sorted({step for step, _ in again})
    newest: dict[tuple[int, str], tuple] = {}
    for key, step, timestamp, value in bulk.fetch(
            f"SELECT {bulk.quoted('key')}, step, {bulk.quoted('timestamp')}, {bulk.quoted('value')} FROM {LOGGED} "
            f"WHERE run_id = %s AND {bulk.quoted('key')} IN ({bulk.placeholders(keys)}) AND step BETWEEN %s AND %s",
            [run.pk, *keys, steps[0], steps[-1]]):
        if (step, key) in again and (timestamp, value) > newest.get((step, key), (-math.inf, -math.inf)):
            newest[(step, key)] = (timestamp, value)
    return {at: point for at, point in latest.items() if at not in again or point[:2] >= newest.get(at, point[:2])}


def _without_values_already_stored(run: Run, by_step: dict) -> dict:
    """A step logged again with the values it holds (a resumed trainer's identical repeat) charts nothing anew.
    Only steps the run has reached can hold any."""
    if run.last_step is None or min(by_step) > run.last_step:
        return by_step
    names = {key for values in by_step.values() for key in values}
    stored = series.stored_values(run, names, min(by_step), run.last_step)
    kept = {}
    for step, values in by_step.items():
        fresh = {k: v for k, v in values.items() if (k, step) not in stored or stored[(k, step)] != v}
        if fresh:
            kept[step] = fresh
    return kept


# What ingestion keeps of a run between two tasks (its series ids, the alert rules' window), for the runs this
# process charted lately: a run logging a step at a time is judged without reading its history back at every task
# (webapp/runs/ingestion.py::_RunMemory; checked against the run's last_seq).
_MEMORIES: "OrderedDict[int, object]" = OrderedDict()
_MEMORIES_KEPT = 256


def resend_stale(now=None) -> list[int]:
    """Runs with points waiting for their charts get their task again (a lost message, a worker that died).
    Periodic (celery beat); a task sent twice finds nothing left the second time."""
    now = now or timezone.now()
    waiting = [run_id for (run_id,) in bulk.fetch(f"SELECT DISTINCT run_id FROM {UNCHARTED}")]
    stale = failures.not_retrying(waiting, failures.CHARTS, now)
    for run_id in stale:
        send(CHART_LOGGED_METRICS, [run_id], queue=external_queue())
    return stale
