"""A real Celery worker process runs real TTRL runs end to end (rl.train as a child)."""
import os
import signal
from pathlib import Path

import pytest

from tests.e2e.helpers import SMALL_TTRL, LiveMessages, trainer_pids
from tests.factories import make_prompt_set
from tests.waiting import wait_until
from webapp.metrics.models import MetricSeries
from webapp.explorer.models import TextIndexMark
from webapp.runs.models import Group, Rollout

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

DASHBOARD_METRICS = {"entropy", "response_length/mean", "reward/mean", "majority_ratio", "label_accuracy"}


def test_a_two_step_ttrl_run_succeeds_and_streams_its_metrics(api, live_stack, live_user, session_key):
    prompt_set = make_prompt_set(live_user, name="arith-e2e")
    run = api.post("/runs", json={"name": "e2e", "method": "ttrl", "prompt_set": prompt_set.pk, "max_steps": 2,
                                   "hyperparameters": SMALL_TTRL})
    live = LiveMessages(f"ws://127.0.0.1:{live_stack.port}/ws/runs/{run['id']}/", session_key)
    try:
        final = api.wait_for(run["id"], lambda r: r["state"] in ("succeeded", "failed", "cancelled"))
        assert final["state"] == "succeeded", final
        wait_until(lambda: any(m.get("state") == "succeeded" for m in live.of_type("status")), 10, every=0.2,
                   what="the succeeded status on the run's socket", last=lambda: live.of_type("status"))
    finally:
        live.close()

    assert final["last_step"] == 2
    # What the browser was sent while the run trained:
    metric_messages = live.of_type("metrics")
    assert metric_messages, live.messages
    assert {m["step"] for m in metric_messages} >= {1, 2}
    assert DASHBOARD_METRICS <= set(metric_messages[-1]["values"])
    assert live.of_type("group") and live.of_type("status")[-1]["state"] == "succeeded"
    # What the database holds:
    names = set(MetricSeries.objects.filter(run_id=run["id"], clock=False).values_list("name", flat=True))
    assert DASHBOARD_METRICS <= names
    assert Group.objects.filter(run_id=run["id"], step=2).count() == 2  # prompts_per_step
    assert Rollout.objects.filter(group__run_id=run["id"], group__step=2).count() == 2 * SMALL_TTRL["n_votes"]
    assert api.get(f"/runs/{run['id']}/metrics?names=entropy")["metrics"]["entropy"]["steps"] == [1, 2]
    # the supervisor indexed every rollout's text for the search before it finished the run
    last = Rollout.objects.filter(run_id=run["id"]).order_by("-id").values_list("id", flat=True).first()
    assert TextIndexMark.objects.get(run_id=run["id"]).through == last
    assert api.get(f"/runs/{run['id']}/rollouts/search", params={"q": "boxed", "limit": 1})["results"]


def test_a_killed_trainer_fails_the_run_and_the_worker_carries_on(api, live_user):
    from django.conf import settings

    prompt_set = make_prompt_set(live_user, name="arith-kill")
    run = api.post("/runs", json={"name": "doomed", "method": "ttrl", "prompt_set": prompt_set.pk, "max_steps": 500,
                                   "hyperparameters": SMALL_TTRL})
    api.wait_for(run["id"], lambda r: (r["last_step"] or 0) >= 1 or r["state"] in ("failed", "succeeded"), what="step 1")
    (pid,) = trainer_pids(Path(settings.RUNS_DIR) / str(run["id"]))
    os.kill(pid, signal.SIGKILL)
    final = api.wait_for(run["id"], lambda r: r["state"] not in ("queued", "running"), timeout=60)
    assert final["state"] == "failed" and final["exit_code"] == -signal.SIGKILL
    assert "signal 9" in final["message"]

    # The same worker takes the next run.
    after = api.post("/runs", json={"name": "after", "method": "ttrl", "prompt_set": prompt_set.pk, "max_steps": 1,
                                     "hyperparameters": SMALL_TTRL})
    assert api.wait_for(after["id"], lambda r: r["state"] in ("succeeded", "failed"))["state"] == "succeeded"


def test_the_websocket_refuses_a_visitor_who_is_not_signed_in(live_stack, live_user):
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    origin = f"http://127.0.0.1:{live_stack.port}"
    # Accepted, then closed at once with 4401 (not signed in), so the client can read why.
    with connect(f"ws://127.0.0.1:{live_stack.port}/ws/runs/1/", origin=origin, open_timeout=10) as ws:
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv(timeout=10)
    assert closed.value.rcvd.code == 4401


def test_an_evol_rl_run_from_the_api_stores_similarity_matrices_and_novelty(api, live_user):
    prompt_set = make_prompt_set(live_user, name="arith-evol")
    run = api.post("/runs", json={"name": "evol", "method": "evol_rl", "prompt_set": prompt_set.pk, "max_steps": 1,
                                   "hyperparameters": SMALL_TTRL})
    final = api.wait_for(run["id"], lambda r: r["state"] in ("succeeded", "failed", "cancelled"))
    assert final["state"] == "succeeded", final
    metrics = api.get(f"/runs/{run['id']}/metrics")["metrics"]
    assert {"similarity/mean", "evol_rl/novelty_mean"} <= set(metrics)
    group = api.get(f"/runs/{run['id']}/rollouts?step=1")["groups"][0]
    detail = api.get(f"/runs/{run['id']}/groups/1/{group['prompt_id']}")
    size = SMALL_TTRL["n_votes"]
    assert len(detail["similarity"]) == size and all(len(row) == size for row in detail["similarity"])
    trained = [r for r in detail["rollouts"] if r["used_for_training"]]
    assert all("novelty" in r["extra"] for r in trained)
