"""`evolab sync tensorboard` against the live stack (issue 39): torch's SummaryWriter writes a run's scalars while the
sync follows them; the trainer restarts (a second event file, as a resumed run writes) and the sync is killed and
started again; every point is stored once, as logged (TensorBoard keeps float32); transformers' `args` text becomes
the run's parameters, a histogram is counted and skipped; and `--all --once` imports an archive of run folders."""
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest
from django.contrib.auth import get_user_model

from tests.e2e.helpers import metric_history
from tests.e2e.test_verl_sync import read_until
from tests.factories import make_team
from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.e2e

# TRL's names, as transformers' TensorBoardCallback writes them (add_text("args", ...), add_scalar(k, v, step))
WRITER = r"""
import json, sys, time
import numpy as np
from torch.utils.tensorboard import SummaryWriter
folder, first, last = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
writer = SummaryWriter(folder)
writer.add_text("args", json.dumps({"learning_rate": 1e-06, "num_generations": 8, "output_dir": "out"}))
for step in range(first, last + 1):
    writer.add_scalar("train/entropy", 0.9 - 0.05 * step, step)
    writer.add_scalar("train/reward", 0.1 * step, step)
    writer.add_scalar("train/completions/mean_length", 200.0 - step, step)
    if step == first:
        writer.add_histogram("train/advantages", np.array([0.1, -0.2, 0.3]), step)
    writer.flush()
    if step == (first + last) // 2:
        print(f"wrote {step}", flush=True)
        sys.stdin.readline()
writer.close()
print("closed", flush=True)
"""
KEYS = {"train/entropy": lambda s: 0.9 - 0.05 * s, "train/reward": lambda s: 0.1 * s,
        "train/completions/mean_length": lambda s: 200.0 - s}


def write(folder, first, last):
    return subprocess.Popen([sys.executable, "-c", WRITER, str(folder), str(first), str(last)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def sync(url, token, *args):
    env = {**os.environ, "EVOLAB_URL": url, "EVOLAB_TOKEN": token}
    return subprocess.Popen([sys.executable, "-m", "evolab_client.cli", "sync", "tensorboard", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def release(writer):
    writer.stdin.write("\n")
    writer.stdin.flush()
    read_until(writer, "closed")
    assert writer.wait(timeout=60) == 0


def history(client, run, key):
    return [(step, value) for step, value, _ in metric_history(client, run, key)]


def as_logged(steps, key):
    """(step, value) as the event file holds them: SummaryWriter's simple_value is a float32."""
    return [(s, float(np.float32(KEYS[key](s)))) for s in steps]


def test_a_summary_writer_run_is_followed_across_a_restarted_trainer_and_a_killed_sync(live_stack, transactional_db,
                                                                                       tmp_path):
    from evolab_client import Evolab

    make_team("trl-team", ada="member")
    token = ApiToken.issue(get_user_model().objects.get(username="ada"))
    folder = tmp_path / "runs" / "grpo-qwen"
    processes = {}
    try:
        trainer = processes["trainer"] = write(folder, 1, 10)
        read_until(trainer, "wrote 5")
        first = processes["first"] = sync(live_stack.url, token, str(folder), "--experiment", "trl-grpo",
                                          "--trainer", "trl", "--poll", "0.2")
        created = read_until(first, "created run")
        run_id = int(created[-1].split("created run ")[1].split()[0])
        read_until(first, "through step 5")
        release(trainer)
        read_until(first, "through step 10")
        first.send_signal(signal.SIGKILL)
        first.wait()

        resumed = processes["resumed"] = write(folder, 11, 20)  # the trainer resumed: a second event file
        read_until(resumed, "wrote 15")
        second = processes["second"] = sync(live_stack.url, token, str(folder), "--poll", "0.2")
        read_until(second, "through step 15")
        release(resumed)
        read_until(second, "through step 20")
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 130
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()

    assert len(list(folder.glob("events.out.tfevents.*"))) == 2
    state = json.loads((folder / ".evolab-sync.json").read_text())
    assert state["run"] == run_id and state["skipped"]["histo"] == 2 and state["points"] >= 60
    client = Evolab(url=live_stack.url, token=token)
    run = client.find_run(str(run_id))
    for key in KEYS:  # every point once, as logged
        assert history(client, run, key) == as_logged(range(1, 21), key), key
    got = client.mlflow("runs/get", {"run_id": run.mlflow_run_id}, get=True)["run"]
    params = {p["key"]: p["value"] for p in got["data"].get("params", [])}
    assert params["learning_rate"] == "1e-06" and params["num_generations"] == "8"
    tags = {t["key"]: t["value"] for t in got["data"]["tags"]}
    assert tags["evolab.trainer"] == "trl" and tags["evolab.source"] == "tensorboard"
    assert got["info"]["run_name"] == "grpo-qwen" and got["info"]["status"] == "RUNNING"
    # the training is over and everything was sent: an import with nothing new to send still ends the run
    done = sync(live_stack.url, token, str(folder), "--once")
    output, _ = done.communicate(timeout=60)
    assert done.returncode == 0 and f"run {run_id} finished" in output, output
    assert client.mlflow("runs/get", {"run_id": run.mlflow_run_id}, get=True)["run"]["info"]["status"] == "FINISHED"


def test_an_archive_of_run_folders_is_imported_one_run_each_and_finished(live_stack, transactional_db, tmp_path):
    from evolab_client import Evolab

    make_team("trl-team", ada="member")
    token = ApiToken.issue(get_user_model().objects.get(username="ada"))
    archive = tmp_path / "runs"
    for name, last in (("seed-0", 6), ("seed-1", 4)):
        trainer = write(archive / name, 1, last)
        release(trainer)
    done = sync(live_stack.url, token, str(archive), "--all", "--experiment", "archive")
    output, _ = done.communicate(timeout=120)
    assert done.returncode == 0, output
    assert "2 runs imported" in output
    client = Evolab(url=live_stack.url, token=token)
    for name, last in (("seed-0", 6), ("seed-1", 4)):
        run = client.find_run(f"archive/{name}")
        assert history(client, run, "train/reward") == as_logged(range(1, last + 1), "train/reward")
        got = client.mlflow("runs/get", {"run_id": run.mlflow_run_id}, get=True)["run"]
        assert got["info"]["status"] == "FINISHED"
    # imported again: nothing is sent twice, nothing new is created
    again = sync(live_stack.url, token, str(archive), "--all", "--experiment", "archive")
    output, _ = again.communicate(timeout=120)
    assert again.returncode == 0 and "created run" not in output, output
    run = client.find_run("archive/seed-0")
    assert len(history(client, run, "train/reward")) == 6
