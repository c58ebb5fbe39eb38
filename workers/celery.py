"""The worker's Celery app: the web side's app (webapp/tasks.py, same broker settings)
with the task modules registered."""
from django.conf import settings

from webapp.tasks import app

app.conf.update(include=["workers.tasks"])
app.conf.worker_hijack_root_logger = False

# The stalled-run check runs in the alerts worker started with --beat (one per deployment).
app.conf.beat_schedule = {
    "check-stalled-runs": {
        "task": "workers.tasks.check_stalled_runs",
        "schedule": 60.0,
        "options": {"queue": settings.QUEUE_PREFIX + "alerts"},
    }
}
