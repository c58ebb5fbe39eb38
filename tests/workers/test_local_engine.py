"""The local engine's differences from a cluster's, in the one supervision loop (workers/supervisor.py): its job is
the worker's child, so a supervisor that lost the run's lease stops it, and a worker that shuts down stops it and then
hands the run back. A sleeping child stands in for the trainer; the real one runs in benchmarks/scenarios/test_worker_loss.py."""
import os
import sys
import threading

import pytest
from django.db import connection

from tests.factories import make_prompt_set
from tests.waiting import wait_until
from webapp.runs import lifecycle
from webapp.runs.models import Run, RunLease
from workers.engines.local import PID_FILE, LocalTrainer
from workers.shutdown import WORKER_SHUTTING_DOWN
from workers.supervisor import supervise_job

pytestmark = pytest.mark.django_db(transaction=True)

# a trainer that checkpoints on SIGTERM (here: says so and exits 0), else trains for a minute
CHILD = """
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
time.sleep(60)
"""


class Sleeper(LocalTrainer):
    @staticmethod
    def command(spec):
        return [sys.executable, "-c", CHILD]


@pytest.fixture
def claimed(user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    settings.RUN_HEARTBEAT_SECONDS = 0.2
    settings.RUN_CANCEL_GRACE_SECONDS = 5
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=1, created_by=user)
    return lifecycle.claim(run.pk, "me")


def later(seconds, action):
    def act():
        action()
        connection.close()  # this thread's own connection
    timer = threading.Timer(seconds, act)
    timer.start()
    return timer


def child_pid(run) -> int:
    return int((run.run_dir / PID_FILE).read_text().split()[0])


def gone(pid) -> bool:
    try:
        os.kill(pid, 0)
        return False
    except ProcessLookupError:
        return True


def test_a_supervisor_that_lost_the_lease_stops_its_trainer_and_writes_nothing_more(claimed):
    later(1.0, lambda: RunLease.objects.filter(run_id=claimed.pk).update(owner="host-b:2:def"))
    assert supervise_job(claimed, "me", Sleeper()) is None
    assert gone(child_pid(claimed))  # reaped by the supervisor: stopped, not left to train unwatched
    run = Run.objects.get(pk=claimed.pk)
    assert run.state == Run.RUNNING and run.finished_at is None  # the new holder's to end


def test_a_worker_that_shuts_down_stops_its_trainer_and_hands_the_run_back(claimed):
    later(1.0, WORKER_SHUTTING_DOWN.set)
    try:
        assert supervise_job(claimed, "me", Sleeper()) == Run.QUEUED
    finally:
        WORKER_SHUTTING_DOWN.clear()
    wait_until(lambda: gone(child_pid(claimed)), 5, what="the trainer to end")
    run = Run.objects.get(pk=claimed.pk)
    assert run.state == Run.QUEUED and run.resume_requested and run.message.startswith("the worker shut down at step")
    assert not RunLease.objects.filter(run_id=run.pk).exists() and run.job.job_id == ""  # no id: nothing to re-attach
