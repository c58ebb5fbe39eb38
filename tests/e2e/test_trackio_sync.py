"""`evolab sync trackio` against the live stack (issue 39): runs the real `trackio` package keeps in its project
database (TRACKIO_DIR/PROJECT.db), followed while one writes, the sync killed and started again, every point stored
once as logged, the config as parameters; a folder of several runs asks which, and `--all` imports them all."""
import os
import signal
import subprocess
import sys
from contextlib import closing

import pytest
from django.contrib.auth import get_user_model

from tests.e2e.connection_watch import ConnectionWatch, loopback_canary
from tests.e2e.helpers import metric_history
from tests.e2e.test_verl_sync import read_until
from tests.factories import make_team
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.e2e

WRITER = r"""
import sys, trackio
name, steps, pause = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
trackio.init(project="gsm8k-ttrl", name=name, config={"data": {"max_response_length": 512}, "lr": 1e-6})
for step in range(1, steps + 1):
    trackio.log({"actor/entropy": 1.2 * 0.7 ** step, "critic/score/mean": 0.4 + 0.02 * step,
                 "response_length/mean": float("nan") if step == 2 else 300.0 - 5 * step}, step=step)
    if step == pause:
        print(f"wrote {step}", flush=True)
        sys.stdin.readline()
trackio.finish()
print("finished", flush=True)
"""


def write(folder, name, steps, pause=0):
    env = {**os.environ, "TRACKIO_DIR": str(folder), "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([sys.executable, "-c", WRITER, name, str(steps), str(pause)], env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def sync(url, token, *args):
    env = {**os.environ, "EVOLAB_URL": url, "EVOLAB_TOKEN": token}
    return subprocess.Popen([sys.executable, "-m", "evolab_client.cli", "sync", "trackio", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def written(folder, name):
    """Rows of the run in its project's database (Trackio writes what was logged every 0.5 s)."""
    from evolab_client import trackio_files

    found = [(db, run) for db in trackio_files.databases(folder) for run in trackio_files.runs(db) if run["name"] == name]
    if not found:
        return 0
    with closing(trackio_files.connect(found[0][0])) as connection:
        return trackio_files.unread(connection, found[0][1]["id"], 0)


def history(client, run, key):
    return [(step, value) for step, value, _ in metric_history(client, run, key)]


def test_trackio_runs_are_followed_and_imported_each_point_once(live_stack, transactional_db, tmp_path):
    from evolab_client import Evolab

    make_team("verl-team", ada="member")
    token = ApiToken.issue(get_user_model().objects.get(username="ada"))
    folder = tmp_path / "trackio"
    done = write(folder, "ttrl-b", 3)
    read_until(done, "finished")
    processes = {"canary": loopback_canary(live_stack.url)}
    try:
        with ConnectionWatch(lambda: [p.pid for p in processes.values() if p.poll() is None]) as watch:
            writer = processes["writer"] = write(folder, "ttrl-a", 12, pause=6)
            read_until(writer, "wrote 6")
            wait_until(lambda: written(folder, "ttrl-a") == 6, timeout=30, every=0.5,
                       what="ttrl-a's 6 rows in the database")
            which = sync(live_stack.url, token, str(folder))
            output, _ = which.communicate(timeout=60)
            assert which.returncode == 2 and "gsm8k-ttrl/ttrl-a" in output and "gsm8k-ttrl/ttrl-b" in output, output

            first = processes["first"] = sync(live_stack.url, token, str(folder), "--trackio-run", "ttrl-a",
                                              "--poll", "0.2")
            read_until(first, "created run")
            read_until(first, "through step 6")
            first.send_signal(signal.SIGKILL)
            first.wait()
            writer.stdin.write("\n")
            writer.stdin.flush()
            read_until(writer, "finished")
            wait_until(lambda: written(folder, "ttrl-a") == 12, timeout=30, every=0.5,
                       what="ttrl-a's 12 rows in the database")
            second = processes["second"] = sync(live_stack.url, token, str(folder), "--trackio-run", "ttrl-a",
                                                "--poll", "0.2")
            read_until(second, "through step 12")
            second.send_signal(signal.SIGTERM)
            assert second.wait(timeout=30) == 130
        watch.assert_only_loopback()
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()

    every = sync(live_stack.url, token, str(folder), "--all")
    output, _ = every.communicate(timeout=120)
    assert every.returncode == 0 and "2 runs imported" in output, output
    client = Evolab(url=live_stack.url, token=token)
    for name, steps in (("ttrl-a", 12), ("ttrl-b", 3)):
        run = client.find_run(f"gsm8k-ttrl/{name}")
        assert history(client, run, "actor/entropy") == [(s, 1.2 * 0.7 ** s) for s in range(1, steps + 1)], name
        lengths = history(client, run, "response_length/mean")
        assert [s for s, _ in lengths] == list(range(1, steps + 1)) and str(lengths[1][1]) == "NaN"  # kept, as MLflow says it
        got = client.mlflow("runs/get", {"run_id": run.mlflow_run_id}, get=True)["run"]
        params = {p["key"]: p["value"] for p in got["data"].get("params", [])}
        assert params == {"data.max_response_length": "512", "lr": "1e-06"}
        assert got["info"]["status"] == "FINISHED"
