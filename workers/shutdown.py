"""Set when this worker process begins to shut down (workers/celery.py connects Celery's signal): each
run supervisor in it then asks its trainer to checkpoint and hands its run back to the queue. A module
of its own because the Celery app imports it before Django is set up."""
import threading

WORKER_SHUTTING_DOWN = threading.Event()
