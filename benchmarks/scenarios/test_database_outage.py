"""Fault test: PostgreSQL goes away for 30 s in the middle of a run (a server of the test's own,
stopped with a fast shutdown and started again). The supervisor waits and retries instead of failing
the run; the run ends `succeeded`, and every event of the log is stored exactly once. Real daphne,
Celery workers and trainer."""
import json
import subprocess
import sys
import time
import uuid

import psycopg
import pytest
import requests

from scripts.stack import ROOT, Stack, free_port
from tests.e2e import postgres_instance
from tests.e2e.helpers import SMALL_TTRL, Api

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

OUTAGE_SECONDS = 30


@pytest.fixture
def own_database():
    why_not = postgres_instance.available()
    if why_not:
        pytest.skip(why_not)
    server = postgres_instance.PostgresInstance()
    try:
        yield server, server.init()
    finally:
        server.remove()


def manage(env, *args) -> str:
    return subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, check=True,
                          capture_output=True, text=True).stdout


def test_a_run_survives_its_database_going_away_and_loses_no_event(own_database, tmp_path):
    from django.conf import settings

    server, url = own_database
    prefix = f"pg{uuid.uuid4().hex[:6]}-"
    stack = Stack(log_dir=tmp_path / "logs", quiet=True)
    data_dir = tmp_path / "data"
    stack.env.update(DATABASE_URL=url, REDIS_URL=settings.REDIS_URL, EVOLAB_QUEUE_PREFIX=prefix,
                     EVOLAB_CHANNEL_PREFIX=f"evolab-{prefix}", EVOLAB_DATA_DIR=str(data_dir),
                     EVOLAB_RUN_HEARTBEAT_SECONDS="1")
    manage(stack.env, "migrate", "--noinput")
    manage(stack.env, "load_demo_data", "--username", "ops", "--password", "pw-for-outage-1")
    api = Api("http://127.0.0.1:0", manage(stack.env, "create_api_token", "ops").strip())
    port = free_port()
    api.base = f"http://127.0.0.1:{port}/api"
    try:
        stack.start_web(port)
        stack.start_worker(prefix + "cpu")
        stack.start_alerts_worker(prefix)
        prompt_set = next(s for s in api.get("/prompt-sets")["prompt_sets"] if "rithmetic" in s["name"])
        run = api.post("/runs", json={"name": "outage", "method": "ttrl", "prompt_set": prompt_set["id"],
                                      "max_steps": 10, "hyperparameters": SMALL_TTRL})
        api.wait_for(run["id"], lambda r: (r["last_step"] or 0) >= 2 or r["state"] not in ("queued", "running"),
                     what="step 2")

        server.stop()
        time.sleep(OUTAGE_SECONDS)
        # the web side has no database either: an error, or no answer while its pool waits for a connection
        with pytest.raises((requests.HTTPError, requests.Timeout)):
            api.session.get(f"{api.base}/runs/{run['id']}", timeout=5).raise_for_status()
        server.start()

        final = api.wait_for(run["id"], lambda r: r["state"] not in ("queued", "running"), timeout=240)
        assert final["state"] == "succeeded" and final["last_step"] == 10, final
    finally:
        stack.stop()

    logged = [json.loads(line)["seq"] for line in (data_dir / "runs" / str(run["id"]) / "events.jsonl").open()]
    with psycopg.connect(url) as db:
        stored = [seq for (seq,) in db.execute("SELECT seq FROM runs_runevent WHERE run_id = %s", [run["id"]])]
    assert len(set(logged)) == len(logged) and sorted(stored) == sorted(logged)
    assert "the database is away" in (stack.log_dir / "celery-cpu.log").read_text()
