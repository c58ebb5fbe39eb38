import threading
from concurrent.futures import ThreadPoolExecutor
import time

from django.conf import settings
from django.db import connection

from webapp.tasks import app


def run_checks() -> tuple[int, dict]:
    """db and redis: "ok" or the error; workers: how many Celery workers answered a ping (up to a second)."""
    body = {"db": "ok", "redis": "ok", "workers": 0}
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        body["db"] = f"error: {exc}"
    try:
        import redis

        redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2).ping()
    except Exception as exc:  # noqa: BLE001
        body["redis"] = f"error: {exc}"
    else:
        try:
            body["workers"] = len(app.control.ping(timeout=1.0) or [])
        except Exception:  # noqa: BLE001 - a broker hiccup means no worker answered
            body["workers"] = 0
    healthy = body["db"] == "ok" and body["redis"] == "ok"
    return (200 if healthy else 503), body


# The last check, shared by the web process's threads: /healthz is anonymous, and each check holds a server
# thread for up to a second (the workers' ping), so a flood of calls must not each run one.
_last: dict = {"at": None, "result": None}
_refreshing = threading.Lock()


def check() -> tuple[int, dict]:
    """run_checks()'s result, at most HEALTH_CHECK_SECONDS old. While one thread refreshes it, the others answer
    with the previous result instead of waiting (they wait only for the very first)."""
    def fresh():
        return _last["at"] is not None and time.monotonic() - _last["at"] < settings.HEALTH_CHECK_SECONDS

    if fresh():
        return _last["result"]
    if not _refreshing.acquire(blocking=_last["result"] is None):
        return _last["result"]
    try:
        if not fresh():
            result = run_checks()
            _last.update(at=time.monotonic(), result=result)
        return _last["result"]
    finally:
        _refreshing.release()


def shown_to(user, body: dict) -> dict:
    """The check as `user` may read it: error texts (addresses, driver messages) for staff only."""
    if user.is_authenticated and user.is_staff:
        return body
    return {name: "error" if isinstance(value, str) and value.startswith("error") else value
            for name, value in body.items()}


# --- which queues have a worker listening (the run list's and run page's "no worker" notice) ---

QUEUE_CHECK_SECONDS = 10.0
_queues_cache: dict = {"at": None, "slots": None}


def queue_slots(refresh: bool = False) -> dict[str, int] | None:
    """{queue: how many runs its workers take at once} for the Celery queues some worker consumes (prefix
    included, as in Run.queue; a worker's pool size counted for each queue it consumes), asked with
    `inspect().active_queues()` and `.stats()` and cached for QUEUE_CHECK_SECONDS. None when the broker cannot be
    asked: then nobody is told a worker is missing, and a queued run's wait is not estimated."""
    now = time.monotonic()
    if not refresh and _queues_cache["at"] is not None and now - _queues_cache["at"] < QUEUE_CHECK_SECONDS:
        return _queues_cache["slots"]
    try:
        # both broadcasts at once: each waits out its whole timeout for replies, on the request that refreshes this
        with ThreadPoolExecutor(2) as pool:
            asked = [pool.submit(getattr(app.control.inspect(timeout=1.0), command))
                     for command in ("active_queues", "stats")]
            replies, stats = (answer.result() or {} for answer in asked)
        slots: dict[str, int] | None = {}
        for worker, worker_queues in replies.items():
            pool = (stats.get(worker) or {}).get("pool") or {}
            size = pool.get("max-concurrency") if isinstance(pool.get("max-concurrency"), int) else 1
            for queue in worker_queues or []:
                if queue.get("name"):
                    slots[queue["name"]] = slots.get(queue["name"], 0) + max(1, size)
    except Exception:  # noqa: BLE001 - a broker hiccup: unknown, not "no worker"
        slots = None
    _queues_cache.update(at=now, slots=slots)
    return slots


def queues_with_consumers(refresh: bool = False) -> set[str] | None:
    """Names of the Celery queues some worker consumes (queue_slots), or None when the broker cannot be asked."""
    slots = queue_slots(refresh)
    return None if slots is None else set(slots)


def no_worker_for(run) -> str | None:
    """The queue of a queued run that no worker consumes, or None (not queued, a worker
    listens, or the broker could not be asked)."""
    if run.state != "queued" or run.is_external:
        return None
    queues = queues_with_consumers()
    if queues is None or run.queue in queues:
        return None
    return run.queue


def worker_command(queue: str) -> str:
    """How to start a worker for `queue` (shown next to the notice)."""
    return f"celery -A workers.celery worker -Q {queue}"
