from celery import shared_task

from .supervisor import supervise


@shared_task(name="workers.tasks.train_run")
def train_run(run_id: int):
    """Train one run. Takes an ID; safe to deliver twice (only a queued run is claimed)."""
    return supervise(run_id)
