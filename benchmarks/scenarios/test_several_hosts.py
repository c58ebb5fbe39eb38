"""Several hosts: the web process and two training workers, each with its own EVOLAB_DATA_DIR, the
workers sharing their run directories (EVOLAB_RUNS_DIR, as a shared mount would). A run cancelled on
one worker resumes on the other from the checkpoint the first wrote, and the web process never reads
or writes a run directory. Real daphne, Celery workers and trainer on the test database."""
import uuid

import pytest

from scripts.stack import Stack, free_port
from tests.e2e.helpers import SMALL_TTRL, Api
from tests.factories import make_prompt_set
from webapp.accounts.models import ApiToken

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

# A step of this run takes ~0.4 s and a cancel ~2 s to land (two 0.5 s polls and the step in
# flight): enough steps that the run cannot end before the cancel does, on a fast machine too.
STEPS = 40


def host(tmp_path, name, base_env, **env) -> Stack:
    stack = Stack(log_dir=tmp_path / name / "logs", quiet=True)
    stack.env.update(base_env, EVOLAB_DATA_DIR=str(tmp_path / name), **env)
    return stack


def test_a_run_cancelled_on_one_worker_resumes_on_another_and_the_web_never_reads_its_directory(
        live_stack, live_user, tmp_path):
    from tests.conftest import _test_database_url

    prefix = f"h{uuid.uuid4().hex[:6]}-"
    base = {k: v for k, v in live_stack.stack.env.items() if k not in ("EVOLAB_DATA_DIR", "EVOLAB_RUNS_DIR")}
    base.update(DATABASE_URL=_test_database_url(), EVOLAB_QUEUE_PREFIX=prefix, EVOLAB_CHANNEL_PREFIX=f"evolab-{prefix}")
    shared = tmp_path / "shared-runs"
    web = host(tmp_path, "web", base)
    first = host(tmp_path, "worker-1", base, EVOLAB_RUNS_DIR=str(shared))
    second = host(tmp_path, "worker-2", base, EVOLAB_RUNS_DIR=str(shared))
    port = free_port()
    api = Api(f"http://127.0.0.1:{port}", ApiToken.issue(live_user))
    try:
        web.start_web(port)
        first.start_worker(prefix + "cpu")
        prompt_set = make_prompt_set(live_user, name="arith-hosts")
        run = api.post("/runs", json={"name": "two hosts", "method": "ttrl", "prompt_set": prompt_set.pk,
                                      "max_steps": STEPS, "hyperparameters": SMALL_TTRL})
        api.wait_for(run["id"], lambda r: (r["last_step"] or 0) >= 1 or r["state"] not in ("queued", "running"),
                     what="step 1")
        api.post(f"/runs/{run['id']}/cancel")
        cancelled = api.wait_for(run["id"], lambda r: r["state"] not in ("queued", "running"), timeout=60)
        assert cancelled["state"] == "cancelled", cancelled
        assert cancelled["last_step"] < STEPS  # the cancel, not the end of training, stopped the first worker
        first.stop()

        second.start_worker(prefix + "cpu")
        api.post(f"/runs/{run['id']}/resume")  # the web finds the checkpoint in the database, not on a disk
        final = api.wait_for(run["id"], lambda r: r["state"] not in ("queued", "running"), timeout=240)
        assert final["state"] == "succeeded" and final["last_step"] == STEPS, final
    finally:
        for stack in (second, first, web):
            stack.stop()

    run_dir = shared / str(run["id"])
    assert (run_dir / "events.jsonl").exists() and any((run_dir / "checkpoints").iterdir())
    assert not (tmp_path / "web" / "runs").exists() and not (tmp_path / "worker-1" / "runs").exists()
    assert f"resumed from checkpoints/checkpoint-{cancelled['last_step']}" in (run_dir / "events.jsonl").read_text()
    assert f"run {run['id']} ended succeeded" in (tmp_path / "worker-2" / "logs" / "celery-cpu.log").read_text()
