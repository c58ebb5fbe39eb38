"""`evolab sync wandb` against the live stack (issue 39): a run written by the real `wandb` package in offline mode,
as verl's Tracking logs it (wandb.init(project, name, config), wandb.log(data, step=global_steps)), followed while it
writes; the sync killed mid-run and started again; every point stored once, as logged; the run's config as its
parameters (a value changed later keeps the first, said); its table and histogram skipped and counted; its end read from W&B's exit record; and its entropy
collapse raised as for any run. Nothing of the writer's leaves loopback."""
import inspect
import json
import math
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from tests.e2e.connection_watch import ConnectionWatch, loopback_canary
from tests.e2e.helpers import metric_history
from tests.e2e.test_verl_sync import read_until
from tests.factories import make_team
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Alert
from webapp.external.models import LoggerImport
from webapp.runs.models import Run

pytestmark = pytest.mark.e2e

STEPS = 12


def logged(step):
    """verl's names for one step of a run whose entropy collapses (tests/e2e/test_mlflow_client.py's stream)."""
    return {"actor/entropy": 1.2 * 0.7 ** step, "response_length/mean": 300.0 - 5 * step,
            "critic/score/mean": 0.4 + 0.02 * step, "timing_s/step": 10.0}


# verl/utils/tracking.py for "wandb": wandb.init(project=project_name, name=experiment_name, config=config), then
# wandb.log(data=data, step=step) once per step. The test paces it through stdin.
WRITER = f"STEPS = {STEPS}\n" + inspect.getsource(logged) + r"""
import json, sys, wandb
run = wandb.init(project="verl_grpo_gsm8k", name="qwen2.5-ttrl",
                 config={"data": {"max_response_length": 512}, "actor_rollout_ref": {"rollout": {"n": 8}}})
print(json.dumps({"folder": str(__import__("pathlib").Path(run.dir).parent)}), flush=True)
for step in range(1, STEPS + 1):
    wandb.log(logged(step), step=step)
    if step == 6:
        table = wandb.Table(columns=["prompt", "response", "score"], data=[["1 + 1?", "\\boxed{2}", 1.0]])
        wandb.log({"val/generations": table, "actor/pg_hist": wandb.Histogram([0.1, 0.2, 0.2])}, step=step)
        run.config.update({"data": {"max_response_length": 1024}}, allow_val_change=True)
    if step in (4, 11):
        print(f"wrote {step}", flush=True)
        sys.stdin.readline()
run.finish()
print("finished", flush=True)
"""


def sync(url, token, *args):
    env = {**os.environ, "EVOLAB_URL": url, "EVOLAB_TOKEN": token}
    return subprocess.Popen([sys.executable, "-m", "evolab_client.cli", "sync", "wandb", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_wandb_offline_run_is_followed_whole_across_a_killed_sync_and_raises_its_collapse(live_stack,
                                                                                          transactional_db, tmp_path):
    from evolab_client import Evolab

    make_team("verl-team", ada="member")
    token = ApiToken.issue(get_user_model().objects.get(username="ada"))
    env = {**os.environ, "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path), "WANDB_SILENT": "true"}
    writer = subprocess.Popen([sys.executable, "-c", WRITER], cwd=tmp_path, env=env, text=True,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    processes = {"writer": writer, "canary": loopback_canary(live_stack.url)}
    try:
        with ConnectionWatch(lambda: [p.pid for p in processes.values() if p.poll() is None]) as watch:
            folder = json.loads(writer.stdout.readline())["folder"]
            read_until(writer, "wrote 4")
            first = processes["first"] = sync(live_stack.url, token, folder, "--poll", "0.2")
            created = read_until(first, "created run")
            run_id = int(created[-1].split("created run ")[1].split()[0])
            # W&B's core writes a step's row once the next step begins (a step may be logged in several calls)
            read_until(first, "through step 3")
            first.send_signal(signal.SIGKILL)  # killed as an OOM killer would: nothing said, no state saved after
            first.wait()

            writer.stdin.write("\n")
            writer.stdin.flush()
            read_until(writer, "wrote 11")
            second = processes["second"] = sync(live_stack.url, token, folder, "--poll", "0.2")
            followed = read_until(second, "through step 10")
            # MLflow's params never change: the first value stays, and the command says so
            assert "parameter data.max_response_length changed to '1024'; the run keeps '512'" in "".join(followed)
            # ten steps, entropy falling 30% a step: the collapse opens while the run still trains
            wait_until(lambda: Alert.objects.filter(run_id=run_id, rule="entropy_collapse").exists(),
                       timeout=120, every=0.5, what="entropy_collapse on the W&B run")
            writer.stdin.write("\n")
            writer.stdin.flush()
            read_until(writer, "finished")
            assert writer.wait(timeout=60) == 0
            # W&B's exit record ends the run, and the follower with it
            said = read_until(second, "points sent to run")
            assert second.wait(timeout=30) == 0
        watch.assert_only_loopback()
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()

    assert "1 histogram" in said[-1] and "1 table" in said[-1]
    client = Evolab(url=live_stack.url, token=token)
    run = client.find_run(str(run_id))
    for key in logged(1):  # every point once, at its step, with the value logged (W&B keeps the float exactly)
        points = metric_history(client, run, key)
        assert [(step, value) for step, value, _ in points] == [(step, logged(step)[key]) for step in
                                                                 range(1, STEPS + 1)], key
        assert all(timestamp > 0 for _, _, timestamp in points)
    got = client.mlflow("runs/get", {"run_id": run.mlflow_run_id}, get=True)["run"]
    params = {p["key"]: p["value"] for p in got["data"].get("params", [])}
    assert params["data.max_response_length"] == "512" and params["actor_rollout_ref.rollout.n"] == "8"
    assert got["info"]["status"] == "FINISHED" and got["info"]["run_name"] == "qwen2.5-ttrl"
    tags = {t["key"]: t["value"] for t in got["data"]["tags"]}
    assert tags["evolab.source"] == "wandb" and tags["wandb.project"] == "verl_grpo_gsm8k"

    stored = Run.objects.get(pk=run_id)
    assert stored.trainer == "verl"  # told by verl's metric names
    metrics = wait_until(lambda: (lambda m: m if len(m.get("entropy", {}).get("steps", [])) == STEPS else None)(
        client.get(f"/api/runs/{run_id}/metrics")["metrics"]), timeout=120, every=0.5, what="the charts of every step")
    assert metrics["entropy"]["values"] == pytest.approx([logged(s)["actor/entropy"] for s in range(1, STEPS + 1)])
    assert not any(math.isnan(v) for v in metrics["entropy"]["values"])
    # what the imports page shows of it: the folder, every point read, what was skipped
    kept = LoggerImport.objects.get(run_id=run_id)
    assert kept.logger == "wandb" and kept.points == STEPS * len(logged(1)) and kept.files == 1
    assert kept.skipped == {"histogram": 1, "table": 1} and kept.folder == str(Path(folder).resolve())
