"""A real run cancelled through the API stops within seconds with a checkpoint, and its resume trains to the end
with no step lost or repeated (moved from tests/e2e/test_training_run.py: a long scenario). Real daphne, Celery
worker and trainer."""
import time
from pathlib import Path

import pytest

from rl.events import read_events
from tests.e2e.helpers import SMALL_TTRL
from tests.factories import make_prompt_set

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]


def test_a_cancelled_run_stops_within_seconds_keeps_its_checkpoint_and_resumes_to_the_end(api, live_user):
    from django.conf import settings

    prompt_set = make_prompt_set(live_user, name="arith-cancel")
    run = api.post("/runs", json={"name": "long", "method": "ttrl", "prompt_set": prompt_set.pk, "max_steps": 40,
                                   "hyperparameters": SMALL_TTRL})
    api.wait_for(run["id"], lambda r: (r["last_step"] or 0) >= 1 or r["state"] in ("failed", "succeeded"), what="step 1")
    cancelled_at = time.monotonic()
    api.post(f"/runs/{run['id']}/cancel")
    final = api.wait_for(run["id"], lambda r: r["state"] not in ("queued", "running"), timeout=60)
    assert final["state"] == "cancelled", final
    assert time.monotonic() - cancelled_at < 30
    stopped_at = final["last_step"]
    assert stopped_at < 40  # a step takes ~0.4 s and a cancel ~2 s to land: 40 steps outlast it
    events = read_events(Path(settings.RUNS_DIR) / str(run["id"]) / "events.jsonl")
    assert any(e["type"] == "checkpoint" and e["step"] == stopped_at for e in events)

    api.post(f"/runs/{run['id']}/resume")
    final = api.wait_for(run["id"], lambda r: r["state"] in ("succeeded", "failed", "cancelled"))
    assert final["state"] == "succeeded" and final["last_step"] == 40, final
    steps = api.get(f"/runs/{run['id']}/metrics?names=reward/mean")["metrics"]["reward/mean"]["steps"]
    assert steps == list(range(1, 41))  # no step lost or repeated across the resume
