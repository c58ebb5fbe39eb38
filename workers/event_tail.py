"""Reading a trainer's event log (DESIGN §4.2) for ingestion (webapp/runs/ingestion.py)."""
from pathlib import Path

from rl.events import tail_events

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
