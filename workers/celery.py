"""The worker's Celery app: the web side's app (webapp/tasks.py, same broker settings)
with the task modules registered."""
from celery.signals import worker_shutting_down
from django.conf import settings

from webapp.tasks import app

from .shutdown import WORKER_SHUTTING_DOWN

app.conf.update(include=["workers.tasks"])
app.conf.worker_hijack_root_logger = False

# The periodic checks run in the alerts worker started with --beat (one per deployment): the
# stalled-run alert, the lease check that re-queues or fails runs whose supervisor is gone, and the
# check that sends a large prompt upload to a worker again when nobody is parsing it.
app.conf.beat_schedule = {
    "check-stalled-runs": {
        "task": "workers.tasks.check_stalled_runs",
        "schedule": 60.0,
        "options": {"queue": settings.QUEUE_PREFIX + "alerts"},
    },
    "reap-runs": {
        "task": "workers.tasks.reap_runs",
        "schedule": settings.RUN_REAP_EVERY_SECONDS,
        "options": {"queue": settings.QUEUE_PREFIX + "alerts", "expires": settings.RUN_REAP_EVERY_SECONDS},
    },
    "resend-external-rollouts": {
        "task": "workers.tasks.resend_external_rollouts",
        "schedule": 60.0,
        "options": {"queue": settings.QUEUE_PREFIX + "alerts", "expires": 60.0},
    },
    "resend-metric-charts": {
        "task": "workers.tasks.resend_metric_charts",
        "schedule": 60.0,
        "options": {"queue": settings.QUEUE_PREFIX + "alerts", "expires": 60.0},
    },
    "resend-rule-backlogs": {
        "task": "workers.tasks.resend_rule_backlogs",
        "schedule": 60.0,
        "options": {"queue": settings.QUEUE_PREFIX + "alerts", "expires": 60.0},
    },
    "resend-prompt-uploads": {
        "task": "workers.tasks.resend_prompt_uploads",
        "schedule": 60.0,
        "options": {"queue": settings.QUEUE_PREFIX + "alerts", "expires": 60.0},
    },
}


@worker_shutting_down.connect
def _hand_back_runs(**kwargs):
    # The threads pool runs supervisors in this process: each asks its trainer to checkpoint and
    # queues its run to resume on the next worker (workers/supervisor.py).
    WORKER_SHUTTING_DOWN.set()
