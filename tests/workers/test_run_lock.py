"""The run's lock (workers/engines/local.py): a trainer left running by a supervisor that lost its lease
holds RUN_DIR/trainer.lock, and the run's next supervisor stops that trainer's whole process group
(SIGTERM, then SIGKILL after the grace period) before it may start another."""
import subprocess
import sys
import time

import pytest

from rl.driver import process_is_alive
from tests.factories import make_prompt_set
from tests.waiting import wait_until
from webapp.runs.models import Run
from workers.engines import local
from workers.supervisor import job_spec

pytestmark = pytest.mark.django_db

# holds the lock like a trainer (the fd inherited from its supervisor), with a rank process in its group
ORPHAN = """
import fcntl, signal, subprocess, sys, time
if sys.argv[2] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
lock = open(sys.argv[1], "a+b")
fcntl.flock(lock, fcntl.LOCK_EX)
rank = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                               "print('deaf', flush=True); time.sleep(60)"], stdout=subprocess.PIPE)
rank.stdout.readline()  # the rank ignores SIGTERM from here on: only the group's SIGKILL ends it
print(rank.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def run(user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=1, created_by=user,
                             state=Run.RUNNING)
    run.run_dir.mkdir(parents=True)
    return run


def start_orphan(run, how):
    orphan = subprocess.Popen([sys.executable, "-c", ORPHAN, str(run.run_dir / local.LOCK_FILE), how],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    rank_pid = int(orphan.stdout.readline())
    (run.run_dir / local.PID_FILE).write_text(f"{orphan.pid} host:1:old\n")
    return orphan, rank_pid


@pytest.mark.parametrize("how", ["obeys", "deaf"])
def test_a_trainer_left_behind_is_stopped_with_its_process_group_before_another_starts(run, how, settings):
    settings.RUN_CANCEL_GRACE_SECONDS = 1.0
    orphan, rank_pid = start_orphan(run, how)
    started = time.monotonic()
    lock = local.take_run_lock(job_spec(run, "me", 1, False))
    try:
        orphan.wait(timeout=5)
        assert orphan.returncode == (-15 if how == "obeys" else -9)
        wait_until(lambda: not process_is_alive(rank_pid), 5, every=0.05,
                   what="the rank process to end with its trainer's group kill")
        assert time.monotonic() - started < 10
    finally:
        lock.close()
        subprocess.run(["kill", "-9", str(rank_pid)], stderr=subprocess.DEVNULL)


def test_a_free_lock_is_taken_at_once(run):
    started = time.monotonic()
    local.take_run_lock(job_spec(run, "me", 1, False)).close()
    assert time.monotonic() - started < 1
