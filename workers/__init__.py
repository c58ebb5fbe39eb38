# The Celery app is webapp.tasks.app; workers.celery registers this package's tasks on it.
from .celery import app as celery_app

__all__ = ["celery_app"]
