"""A trainer whose supervisor's process is gone stops itself with SIGTERM, as a cancel would, so it
checkpoints instead of training on unwatched (rl/driver.py::stop_when_supervisor_is_gone)."""
import subprocess
import sys
import time

from rl.driver import stop_when_supervisor_is_gone

TRAINER = """
import signal, sys, time
from rl.driver import stop_when_supervisor_is_gone
signal.signal(signal.SIGTERM, lambda *a: (print("SIGTERM", flush=True), sys.exit(0)))
stop_when_supervisor_is_gone(int(sys.argv[1]), every=0.1)
print("training", flush=True)
time.sleep(60)
print("still training", flush=True)
"""


def test_the_trainer_signals_itself_once_its_supervisor_is_gone():
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    trainer = subprocess.Popen([sys.executable, "-c", TRAINER, str(supervisor.pid)], stdout=subprocess.PIPE, text=True)
    try:
        assert trainer.stdout.readline().strip() == "training"
        time.sleep(0.5)
        assert trainer.poll() is None  # the supervisor lives: training goes on
        supervisor.kill()  # not reaped: a zombie counts as gone too
        out, _ = trainer.communicate(timeout=10)
        assert out.strip() == "SIGTERM" and trainer.returncode == 0
    finally:
        for process in (supervisor, trainer):
            if process.poll() is None:
                process.kill()


def test_without_a_supervisor_nothing_is_watched():
    assert stop_when_supervisor_is_gone(None) is None
    assert stop_when_supervisor_is_gone(0) is None
