"""`python -m rl.train` from a warm interpreter, for the tests that train many small runs (every method, the label
checks, R-Zero's iteration).

Each run is still a process of its own, with its own signal handlers, globals, working directory, environment and
exit status: a fork of a server (multiprocessing's forkserver, one per test process) that imported torch,
transformers and TRL once. A cold `python -m rl.train` spends about 7 s of CPU importing them before a run of the
default policy that itself takes 2 s: most of the tests' training time on this project's 2-core machine. What the
fork runs is `rl.train.main` with the command line's arguments, as `python -m rl.train` runs it. The tests of the
command line itself (tests/rl/test_train_cli.py), the scenarios that signal a trainer (benchmarks/scenarios) and
every run a worker starts keep the cold `python -m rl.train`; `sigterm_after_the_first_step` is the scenarios' one.
"""
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# a trainer's environment in the tests, unless a test gives its own
ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
# what the server imports once: rl.train's own imports, and the heavy ones its driver imports lazily
PRELOAD = ["rl.train", "rl.trainer", "rl.policy", "transformers", "trl"]

_context = None


def _forkserver():
    global _context
    if _context is None:
        # what the server's imports read from the environment at import time must be what `python -m rl.train` sees
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        _context = multiprocessing.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


def _main(argv: list[str], env: dict, cwd: str, stdout: str, stderr: str) -> None:
    """In the forked child: the environment, directory and output of `python -m rl.train`, then its main."""
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    for fd, path in ((1, stdout), (2, stderr)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    from rl.train import main

    sys.exit(main(argv))


def train_command(config: Path, out: Path, *extra: str) -> list[str]:
    """The cold command line: `python -m rl.train --config CONFIG --out RUN_DIR [extra]`, as a worker runs it."""
    return [sys.executable, "-m", "rl.train", "--config", str(config), "--out", str(out), *extra]


def run_trainer(config: Path, out: Path, *extra: str, env: dict | None = None,
                timeout: float = 300) -> subprocess.CompletedProcess:
    """What `subprocess.run([sys.executable, "-m", "rl.train", ...], capture_output=True, text=True)` returns. `env`:
    the trainer's whole environment, by default ENV."""
    env = ENV if env is None else env
    argv = train_command(config, out, *extra)[3:]  # the arguments, after `python -m rl.train`
    with tempfile.TemporaryDirectory(prefix="rl-train-") as tmp:
        stdout, stderr = Path(tmp) / "stdout", Path(tmp) / "stderr"
        process = _forkserver().Process(target=_main, args=(argv, dict(env), str(REPO), str(stdout), str(stderr)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["rl.train", *argv], timeout)
        return subprocess.CompletedProcess(["python", "-m", "rl.train", *argv], process.exitcode,
                                           stdout.read_text() if stdout.exists() else "",
                                           stderr.read_text() if stderr.exists() else "")


def sigterm_after_the_first_step(config: Path, out: Path, env: dict, *, within: float = 300) -> None:
    """A cold `python -m rl.train` (a signal must reach the command line itself) sent SIGTERM once its first step is
    logged, as the supervisor's cancel does; asserts it then ends with status 0 (a graceful stop, with a checkpoint)."""
    from rl.events import read_events
    from tests.waiting import wait_until

    process = subprocess.Popen(train_command(config, out), cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        def a_step_done():
            assert process.poll() is None, process.stderr.read()[-3000:]
            return [e for e in read_events(Path(out) / "events.jsonl") if e["type"] == "metrics"]

        wait_until(a_step_done, within, every=0.2, what="the first step")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=120) == 0, process.stderr.read()[-3000:]
    finally:
        if process.poll() is None:
            process.kill()
        process.stderr.close()
