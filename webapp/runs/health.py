from django.conf import settings
from django.db import connection


def check() -> tuple[int, dict]:
    """db and redis: "ok" or the error; workers: how many Celery workers answered a ping."""
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
        from workers.celery import app

        try:
            body["workers"] = len(app.control.ping(timeout=1.0) or [])
        except Exception:  # noqa: BLE001 - a broker hiccup means no worker answered
            body["workers"] = 0
    healthy = body["db"] == "ok" and body["redis"] == "ok"
    return (200 if healthy else 503), body
