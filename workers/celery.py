import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

app = Celery("evolab", include=["workers.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
# A training run can outlive Redis' default one-hour visibility timeout; without this the
# broker would hand the same run to a second worker while the first still trains it.
app.conf.broker_transport_options = {"visibility_timeout": 30 * 24 * 3600}
app.conf.worker_hijack_root_logger = False
