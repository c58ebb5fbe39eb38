"""The web side's handle on the task queue. Tasks are sent by name, so the web process
never imports `workers` (dependencies point workers → webapp → rl); the worker
registers the same names in workers/tasks.py."""
import os

from celery import Celery
from django.db import transaction

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("evolab")
app.config_from_object("django.conf:settings", namespace="CELERY")
# A training run can outlive Redis' default one-hour visibility timeout; without this the
# broker would hand the same run to a second worker while the first still trains it.
app.conf.broker_transport_options = {"visibility_timeout": 30 * 24 * 3600}

TRAIN_RUN = "workers.tasks.train_run"
DELIVER_WEBHOOK = "workers.tasks.deliver_webhook"
SEND_ALERT_EMAIL = "workers.tasks.send_alert_email"
CHECK_STALLED = "workers.tasks.check_stalled_runs"


def send_on_commit(name: str, args: list, queue: str, countdown: float | None = None) -> None:
    """Queue task `name` once the current transaction commits (at once outside one), so a
    worker never looks for a row that is not there yet."""
    transaction.on_commit(lambda: app.send_task(name, args=args, queue=queue, countdown=countdown))
