"""Fault tests for the run lease (issue 11): a Celery worker SIGKILLed mid-run. Its trainer stops
itself with a checkpoint, the lease check (celery beat in the alerts worker) re-queues the run with
resume, a new worker finishes it, and every event of the log is ingested exactly once. A run whose
worker vanished can be cancelled, and resumed. Real processes: daphne, two Celery workers, the
trainer, on the test database and Redis; the lease is shortened to keep the tests short."""
import os
import signal
import uuid
from pathlib import Path

import pytest

from scripts.stack import Stack, free_port
from tests.e2e.helpers import SMALL_TTRL, Api, assert_every_event_ingested_once, trainer_pids
from tests.factories import make_prompt_set
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

LEASE = {"EVOLAB_RUN_LEASE_SECONDS": "5", "EVOLAB_RUN_HEARTBEAT_SECONDS": "0.5", "EVOLAB_RUN_REAP_EVERY_SECONDS": "1"}


@pytest.fixture
def fault_stack(live_stack, live_user, tmp_path, settings):
    """daphne, a training worker and the alerts worker (beat) of their own, with a short lease."""
    from tests.conftest import _test_database_url

    prefix = f"f{uuid.uuid4().hex[:8]}-"
    stack = Stack(log_dir=tmp_path / "logs", quiet=True)
    stack.env.update(live_stack.stack.env, EVOLAB_QUEUE_PREFIX=prefix, EVOLAB_CHANNEL_PREFIX=f"evolab-{prefix}",
                     DATABASE_URL=_test_database_url(), **LEASE)
    settings.RUN_LEASE_SECONDS = float(LEASE["EVOLAB_RUN_LEASE_SECONDS"])  # the cancel below reaps in this process
    port = free_port()
    try:
        stack.start_web(port)
        worker = stack.start_worker(prefix + "cpu")
        stack.start_alerts_worker(prefix)
        yield type("FaultStack", (), {"stack": stack, "worker": worker, "queue": prefix + "cpu",
                                      "api": Api(f"http://127.0.0.1:{port}", ApiToken.issue(live_user))})
    finally:
        stack.stop()


def kill_worker(worker):
    os.kill(worker.pid, signal.SIGKILL)
    worker.wait()  # reaped, as a service manager would


def trainers_of(run_id) -> list[int]:
    from django.conf import settings

    return trainer_pids(Path(settings.RUNS_DIR) / str(run_id))


def launch(fault, user, name, max_steps):
    prompt_set = make_prompt_set(user, name=f"arith-{name}")
    run = fault.api.post("/runs", json={"name": name, "method": "ttrl", "prompt_set": prompt_set.pk,
                                        "max_steps": max_steps, "hyperparameters": SMALL_TTRL})
    fault.api.wait_for(run["id"], lambda r: (r["last_step"] or 0) >= 2 or r["state"] not in ("queued", "running"),
                       what="step 2")
    return run["id"]


def test_a_run_whose_worker_is_killed_resumes_on_a_new_worker_and_loses_no_event(fault_stack, live_user):
    run_id = launch(fault_stack, live_user, "worker-killed", max_steps=10)
    kill_worker(fault_stack.worker)
    # its trainer notices and stops after its step, with a checkpoint
    wait_until(lambda: not trainers_of(run_id), 60, every=0.5, what="the orphaned trainer to stop training")
    requeued = fault_stack.api.wait_for(run_id, lambda r: r["state"] != "running", timeout=30, what="the lease check")
    assert requeued["state"] == "queued" and "its worker stopped answering" in requeued["message"], requeued

    fault_stack.stack.start_worker(fault_stack.queue)
    final = fault_stack.api.wait_for(run_id, lambda r: r["state"] not in ("queued", "running"), timeout=240)
    assert final["state"] == "succeeded" and final["last_step"] == 10, final
    assert Run.objects.get(pk=run_id).auto_resumes == 1
    assert_every_event_ingested_once(run_id)


def test_a_run_whose_worker_vanished_can_be_cancelled_and_then_resumed(fault_stack, live_user):
    run_id = launch(fault_stack, live_user, "worker-vanished", max_steps=6)
    kill_worker(fault_stack.worker)
    # nobody relays this cancel: the lease check ends the run once the lease expires
    assert fault_stack.api.post(f"/runs/{run_id}/cancel")["state"] == "running"
    cancelled = fault_stack.api.wait_for(run_id, lambda r: r["state"] != "running", timeout=30, what="the lease check")
    assert cancelled["state"] == "cancelled", cancelled
    assert cancelled["message"].startswith("cancelled; its worker stopped answering"), cancelled

    wait_until(lambda: not trainers_of(run_id), 60, every=0.5, what="the orphaned trainer to stop")
    fault_stack.api.post(f"/runs/{run_id}/resume")
    fault_stack.stack.start_worker(fault_stack.queue)
    final = fault_stack.api.wait_for(run_id, lambda r: r["state"] not in ("queued", "running"), timeout=240)
    assert final["state"] == "succeeded" and final["last_step"] == 6, final
    assert_every_event_ingested_once(run_id)


def test_a_worker_shutting_down_hands_its_run_back_to_resume_on_the_next_worker(fault_stack, live_user):
    # 30 steps of ~0.4 s: the shutdown (a 0.5 s poll away) lands long before training would end
    run_id = launch(fault_stack, live_user, "worker-stopped", max_steps=30)
    os.killpg(fault_stack.worker.pid, signal.SIGTERM)  # a deploy: Celery's warm shutdown
    fault_stack.worker.wait(timeout=120)
    assert not trainers_of(run_id)
    handed = Run.objects.get(pk=run_id)
    assert handed.state == Run.QUEUED and handed.resume_requested, (handed.state, handed.message)
    assert handed.message.startswith("the worker shut down at step") and handed.auto_resumes == 0

    fault_stack.stack.start_worker(fault_stack.queue)
    final = fault_stack.api.wait_for(run_id, lambda r: r["state"] not in ("queued", "running"), timeout=240)
    assert final["state"] == "succeeded" and final["last_step"] == 30, final
    assert_every_event_ingested_once(run_id)
