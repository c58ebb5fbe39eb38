"""The web side's handle on the task queue. Tasks are sent by name, so the web process
never imports `workers` (dependencies point workers → webapp → rl); the worker
registers the same names in workers/tasks.py."""
import os

import logging

from celery import Celery
from django.conf import settings
from django.db import transaction

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("evolab")
app.config_from_object("django.conf:settings", namespace="CELERY")
# webapp/settings.py says why an hour (a redelivered run that is still training is left alone).
app.conf.broker_transport_options = {"visibility_timeout": settings.CELERY_BROKER_VISIBILITY_TIMEOUT}

TRAIN_RUN = "workers.tasks.train_run"
DELIVER_WEBHOOK = "workers.tasks.deliver_webhook"
SEND_ALERT_EMAIL = "workers.tasks.send_alert_email"
CHECK_STALLED = "workers.tasks.check_stalled_runs"
REAP_RUNS = "workers.tasks.reap_runs"
PARSE_PROMPT_UPLOAD = "workers.tasks.parse_prompt_upload"
RESEND_PROMPT_UPLOADS = "workers.tasks.resend_prompt_uploads"
GROUP_EXTERNAL_ROLLOUTS = "workers.tasks.group_external_rollouts"
EMBED_EXTERNAL_GROUPS = "workers.tasks.embed_external_groups"
RESEND_EXTERNAL_ROLLOUTS = "workers.tasks.resend_external_rollouts"
INDEX_ROLLOUT_TEXT = "workers.tasks.index_rollout_text"
DELETE_RUN_FILES = "workers.tasks.delete_run_files"
JUDGE_FAILED_RULES = "workers.tasks.judge_failed_rules"
JUDGE_RULE_BACKLOG = "workers.tasks.judge_rule_backlog"
RESEND_RULE_BACKLOGS = "workers.tasks.resend_rule_backlogs"
CHART_LOGGED_METRICS = "workers.tasks.chart_logged_metrics"
RESEND_METRIC_CHARTS = "workers.tasks.resend_metric_charts"

log = logging.getLogger(__name__)


def send_on_commit(name: str, args: list, queue: str, countdown: float | None = None) -> None:
    """Queue task `name` once the current transaction commits (at once outside one), so a
    worker never looks for a row that is not there yet."""
    transaction.on_commit(lambda: send(name, args=args, queue=queue, countdown=countdown))


def send(name: str, args: list, queue: str, countdown: float | None = None) -> bool:
    """Send task `name` now; False (logged) when the broker cannot be reached. What was committed
    stays: a queued run is sent again by the lease check (lifecycle.reap) once the broker is back."""
    try:
        app.send_task(name, args=args, queue=queue, countdown=countdown,
                      retry=True, retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5})
    except Exception as exc:  # noqa: BLE001 - kombu raises its own and socket errors; any one means "not sent"
        log.warning("task %s%s not sent, the broker is unreachable: %s", name, args, exc)
        return False
    return True
