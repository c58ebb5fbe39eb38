# Loading the Celery app here makes every `import workers...` in the web process send
# tasks through the configured broker rather than Celery's default app.
from .celery import app as celery_app

__all__ = ["celery_app"]
