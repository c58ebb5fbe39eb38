"""Reading a trainer's event log (DESIGN §4.2) for ingestion (webapp/runs/ingestion.py)."""
import time
from pathlib import Path

from rl.events import tail_events
from webapp.alerts import failures
from webapp.runs.ingestion import ingest_events

from .run_io import POLL_SECONDS, until_stored
from .watched import Polled

# How much of a log one ingestion transaction reads: a few steps of a large run (8 x 64 rollouts of
# several KB is a few MB per step), so memory stays flat while a restarted supervisor catches up.
BATCH_BYTES = 8 * 1024 * 1024


class EventTail:
    """Reads the complete new events of a run's log, remembering where it stopped.

    rl.events.tail_events does the reading: a line the trainer is still writing is left
    for the next read rather than parsed half-written."""

    def __init__(self, path: Path, batch_bytes: int | None = None):
        self.path = Path(path)
        self.offset = 0
        self.batch_bytes = batch_bytes or BATCH_BYTES

    def read_new(self) -> list[dict]:
        """The next complete events, at most about batch_bytes of the log."""
        events, self.offset = tail_events(self.path, self.offset, self.batch_bytes)
        return events

    def batches(self):
        """Every complete event not read yet, in bounded batches: a supervisor catching up on a long log
        (after a restart) holds one batch at a time, whatever the log's size."""
        while True:
            events = self.read_new()
            if not events:
                return
            yield events


# At the trainer's end, a failing batch of its log is tried this many times (with backoff) before the run fails.
DRAIN_ATTEMPTS = 4


class LogIngestion:
    """A run's log ingested as its trainer writes it, at each poll of its supervisor (workers/supervisor.py). A database away is waited out (until_stored); any other failure of a batch (a bug, an
    event ingestion cannot store) is recorded on the run and the batch tried again after a backoff (watched.Polled),
    while the trainer trains on and its later events wait in the log. Before, it stopped the supervisor, which
    killed the trainer and failed the run."""

    def __init__(self, run, path: Path | None = None):
        self.run = run
        self.tail = EventTail(path or run.run_dir / "events.jsonl")
        self.watch = Polled(run.pk, failures.LOG)
        self.pending: list[dict] = []  # a batch read and not stored yet
        self.error: BaseException | None = None

    def poll(self) -> bool:
        """Ingest what the log holds; whether all of it is stored (False: a batch failed, or waits for its retry)."""
        if not self.watch.due():
            return False
        try:
            while True:
                if not self.pending:
                    self.pending = self.tail.read_new()
                    if not self.pending:
                        break
                until_stored(ingest_events, self.run, self.pending)
                self.pending = []
        except Exception as exc:  # noqa: BLE001 - whatever it is, the run says it and the batch is tried again
            self.error = exc
            steps = [e["step"] for e in self.pending if isinstance(e.get("step"), int)]
            self.watch.failed(exc, min(steps) if steps else None)
            return False
        self.watch.succeeded()
        return True

    def drain(self, keep_alive) -> None:
        """The trainer has exited: every event left in its log. A failing batch is tried again with backoff, calling
        keep_alive() while it waits (the run's heartbeat), DRAIN_ATTEMPTS times in all; then its error is raised."""
        for _ in range(DRAIN_ATTEMPTS):
            while not self.watch.due():
                keep_alive()
                time.sleep(POLL_SECONDS)
            if self.poll():
                return
        raise self.error
