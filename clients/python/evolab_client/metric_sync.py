"""`evolab sync wandb|tensorboard|trackio DIR`: a logger's files into an Evolab run, live or archived.

A run folder's files are read from where the last read stopped, only whole records (a file being written is read
up to its last complete record), and the points go to the run through Evolab's metrics endpoint (`POST
/api/runs/{id}/metrics`, up to 100,000 points a request as columns, charted before it answers), so Evolab maps the
trainer's metric names (verl, TRL, OpenRLHF) and charts them as it does for a run logged through MLflow. The position
(bytes read of each file) is written to a state file once what was read is stored; a restarted sync reads the state
file and goes on from there. Points read twice (killed between storing and recording) are stored once: a step charted
again with the values it holds changes nothing. Each request also carries the sync's running totals (points,
rollouts, values skipped by kind), which Evolab's imports page shows.

The run: `--run` names an existing one; otherwise the first sync creates one in the experiment and with the name the
run's own files give (W&B's project and run name; Trackio's project and run name; TensorBoard: the folder's name,
in `--experiment` or Default),
with the logged config as its parameters, and the state file keeps its id for every later sync.
"""
from __future__ import annotations

import copy
import json
import math
import os
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .client import Evolab, RunRef
from .state_file import read_state, write_state
from . import trackio_files
from .completions import rollouts_from_table

STATE_FILE = ".evolab-sync.json"
POINTS_PER_REQUEST = 100_000  # Evolab's metrics endpoint takes at most this many a request
PARAMS_PER_REQUEST = 100
MAX_PARAM_VALUE = 6000
READ_BYTES = 8 * 1024 * 1024


@dataclass
class Read:
    """What one read of one file gave."""

    points: list = field(default_factory=list)  # wandb_files.Point
    params: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    run: dict = field(default_factory=dict)  # name, experiment, start (ms), tags, from the files themselves
    finished: bool | None = None  # the logger recorded the run's end: True when it succeeded
    rollouts: list = field(default_factory=list)  # (step, rollout lines) of a table of completions


class FileSource:
    """A logger's files, read by bytes: the position in each is the offset after its last whole record."""

    read_size = READ_BYTES  # of a file at a time: a large archive is never read into memory whole
    ends_itself = False  # whether the files record the run's end

    @staticmethod
    def unread(path: Path, offset: int) -> int:
        """Bytes not read yet; negative when the file is shorter than what was read (written anew)."""
        try:
            return path.stat().st_size - offset
        except FileNotFoundError:
            return 0


class WandbSource(FileSource):
    """A W&B run folder (`wandb/run-DATE-ID/` or `offline-run-...`): its one `run-ID.wandb` file."""

    name = "wandb"
    ends_itself = True  # its exit record

    def __init__(self, directory):
        from .wandb_files import WandbRun

        self.directory = Path(directory)
        files = sorted(self.directory.glob("run-*.wandb"))
        if not files:
            raise SystemExit(f"evolab: {self.directory} holds no run-*.wandb file: give a W&B run folder "
                             "(wandb/run-...), or its parent with --all")
        self.run = WandbRun(files[0])

    def files(self) -> list[Path]:
        return [self.run.path]

    def read(self, path: Path, offset: int, state: dict, limit: int) -> tuple[Read, int]:
        self.run.step_metric = state.get("step_metric") or self.run.step_metric
        self.run.step_value = state.get("step_value", self.run.step_value)
        batch, end = self.run.read(offset, limit)
        state["step_metric"], state["step_value"] = batch.step_metric, batch.step_value
        if "reward_weights" in batch.config:  # GRPOConfig's, for the total of a completions table's rewards
            state["reward_weights"] = batch.config["reward_weights"]
        read = Read(points=batch.points, params=batch.config, skipped=batch.skipped, finished=batch.finished)
        if batch.run:
            read.run = {"name": batch.run["name"], "experiment": batch.run["project"], "start": batch.run["start"],
                        "tags": {"wandb.run_id": batch.run["id"], "wandb.project": batch.run["project"]}}
        for step, key, value in batch.tables:
            lines = self._rollouts(step, value, state.get("reward_weights"))
            if lines:  # a table of completions: rollouts, not skipped
                read.rollouts.append((step, lines))
                read.skipped["table"] -= 1
        read.skipped = {kind: count for kind, count in read.skipped.items() if count}
        return read, end

    def _rollouts(self, step: int, value: dict, weights) -> list[dict]:
        """TRL's completions table (log_completions), which W&B keeps in the run's files/ folder, as rollouts."""
        path = self.directory / "files" / str(value.get("path", ""))
        try:
            table = json.loads(path.read_text())
            weights = json.loads(weights) if isinstance(weights, str) else weights
        except (OSError, ValueError):
            return []
        return rollouts_from_table(step, table, weights if isinstance(weights, list) else None)


class TensorboardSource(FileSource):
    """A TensorBoard run folder: its `events.out.tfevents.*` files, in the order they were written."""

    name = "tensorboard"

    def __init__(self, directory):
        from .tensorboard_files import TensorboardRun

        self.directory = Path(directory)
        self.run = TensorboardRun(self.directory)
        if not self.run.files():
            raise SystemExit(f"evolab: {self.directory} holds no events.out.tfevents.* file: give the folder a "
                             "SummaryWriter wrote to, or a parent of such folders with --all")

    def files(self) -> list[Path]:
        return self.run.files()

    def read(self, path: Path, offset: int, state: dict, limit: int) -> tuple[Read, int]:
        points, params, skipped, end = self.run.read(path, offset, limit)
        return Read(points=points, params=params, skipped=skipped,
                    run={"name": self.directory.name, "tags": {}}), end


class TrackioSource:
    """One run of a Trackio project database (`TRACKIO_DIR/PROJECT.db`), read by rows: the position is the last row
    id read. Its state file is the run's own, beside the database."""

    name = "trackio"
    read_size = 5000  # rows
    ends_itself = False

    def __init__(self, database, run: dict):
        self.database, self.trackio_run = Path(database), run
        self.directory = self.database.parent
        self.state_name = f".evolab-sync-trackio-{self.database.stem}-{run['id']}.json"
        self._connection = None

    @property
    def connection(self):
        """One read-only connection for the follower's every poll, opened at the first."""
        if self._connection is None:
            self._connection = trackio_files.connect(self.database)
        return self._connection

    def files(self) -> list[Path]:
        return [self.database]

    def unread(self, path: Path, offset: int) -> int:
        return trackio_files.unread(self.connection, self.trackio_run["id"], offset)

    def read(self, path: Path, offset: int, state: dict, limit: int) -> tuple[Read, int]:
        points, skipped, last = trackio_files.read(self.connection, self.trackio_run["id"], offset, limit)
        run = self.trackio_run
        return Read(points=points, params=run["config"] if offset == 0 else {}, skipped=skipped,
                    run={"name": run["name"], "experiment": run["project"], "tags": {"trackio.run_id": run["id"]}}), last


def trackio_runs(directory) -> list[TrackioSource]:
    """Every run of every project database in a Trackio folder."""
    return [TrackioSource(database, run) for database in trackio_files.databases(directory)
            for run in trackio_files.runs(database)]


SOURCES = {"wandb": WandbSource, "tensorboard": TensorboardSource}


class MetricSync:
    """Follows one run folder of a logger into one Evolab run; `state_path` keeps the position between runs."""

    def __init__(self, client: Evolab, source, run: str | None = None, experiment: str | None = None,
                 name: str | None = None, trainer: str | None = None, state_path=None, poll_seconds: float = 0.2,
                 log=print):
        self.client, self.source, self.log = client, source, log
        self.wanted_run, self.experiment, self.name, self.trainer = run, experiment, name, trainer
        self.state_path = Path(state_path) if state_path else source.directory / getattr(source, "state_name", STATE_FILE)
        self.poll_seconds = poll_seconds
        self.state = self._load_state()
        self.run: RunRef | None = None
        self.sent = 0
        self._pending: list | None = None  # [the read's requests in flight, the state to write once they are stored]

    # -- the state file

    def _load_state(self) -> dict:
        state = read_state(self.state_path, {"server": self.client.url, "source": self.source.name, "run": None,
                                             "files": {}, "points": 0, "skipped": {}, "finished": None})
        if state.get("server") != self.client.url:
            raise SystemExit(f"evolab: {self.state_path} records a sync to {state.get('server')}, not "
                             f"{self.client.url}: give another --state file")
        return state

    def _save_state(self) -> None:
        write_state(self.state_path, self.state)

    # -- the run

    def _resolve_run(self) -> RunRef:
        if self.state["run"] is not None:
            if self.wanted_run and str(self.wanted_run) != str(self.state["run"]):
                found = self.client.find_run(self.wanted_run)
                if found is None or found.id != self.state["run"]:
                    raise SystemExit(f"evolab: {self.state_path} sends this folder to run {self.state['run']}, not "
                                     f"{self.wanted_run}: give another --state file to send it elsewhere")
                return found  # the run the state file names, found by the name given
            found = self.client.find_run(str(self.state["run"]))
            if found is None:
                raise SystemExit(f"evolab: run {self.state['run']} (from {self.state_path}) is gone")
            return found
        if self.wanted_run:
            found = self.client.find_run(self.wanted_run)
            if found is None:
                raise SystemExit(f"evolab: no run {self.wanted_run!r}")
            run = found
        else:
            told = self.state.get("told", {})  # what the files said of the run (W&B's run record)
            tags = {**told.get("tags", {}), "evolab.source": self.source.name}
            if self.trainer:
                tags["evolab.trainer"] = self.trainer
            run = self.client.create_run(self.name or told.get("name"), experiment=self.experiment or told.get("experiment"),
                                         tags=tags, start_time=told.get("start"))
            self.log(f"evolab: created run {run.id} ({run.name}): {self.client.url}/runs/{run.id}/")
        self.state["run"] = run.id
        self._save_state()
        return run

    # -- reading and sending

    def sync_once(self) -> int:
        """Read and send every whole record not sent yet, file by file; how many points were sent."""
        sent = 0
        for path in self.source.files():
            record = self.state["files"].setdefault(path.name, {"offset": 0})
            limit = self.source.read_size
            while True:
                left = self.source.unread(path, record["offset"])
                if left < 0:  # written anew from the start: read it again (its points are kept once)
                    record["offset"] = 0
                    continue
                if left == 0:
                    break
                read, end = self.source.read(path, record["offset"], self.state, limit)
                if end == record["offset"]:
                    if left <= limit:
                        break  # only part of a record so far
                    limit *= 4  # a record longer than a read
                    continue
                sent += self._send(read)
                record["offset"] = end
                self._when_stored(copy.deepcopy(self.state))
        self._wait()
        return sent

    # -- points in flight: the next read is parsed while the server stores the last one's points

    def _in_background(self, bodies: list[dict]) -> None:
        """Send a read's points on the sender thread, once the read before has been stored: one request at a time,
        in order. Everything else (the run, parameters, rollouts, the end) is sent on this thread."""
        self._wait()
        path = f"/api/runs/{int(self.run.id)}/metrics"
        self._pending = [_Background(lambda: [self.client.post(path, body) for body in bodies]), None]

    def _when_stored(self, state: dict) -> None:
        """The state to write once the read in flight is stored (at once when none is): a killed sync resumes
        from the last read Evolab has, with what the reader knew then."""
        if self._pending is None:
            write_state(self.state_path, state)
        else:
            self._pending[1] = state

    def _wait(self) -> None:
        """The read in flight stored (its error raised here) and its state written."""
        if self._pending is None:
            return
        future, state = self._pending
        self._pending = None
        future.result()
        if state is not None:
            write_state(self.state_path, state)

    def _send(self, read: Read) -> int:
        if read.run:  # kept until the run is made: W&B writes its run record before anything worth sending
            self.state["told"] = {**self.state.get("told", {}), **read.run}
        if not (read.points or read.params or read.finished is not None or read.skipped or read.rollouts):
            return 0
        if self.run is None:
            self.run = self._resolve_run()
        self._send_params(read.params)
        points = [p for p in read.points if 0 <= p.step < 2**31]  # the steps a chart holds
        if len(points) < len(read.points):
            read.skipped["step outside 0..2^31-1"] = len(read.points) - len(points)
        for step, lines in read.rollouts:  # each table is one step's whole batch; stored once however often sent
            for start in range(0, len(lines), 1000):
                self.client.post_rollouts(self.run.id, lines[start:start + 1000],
                                          complete_through=step if start + 1000 >= len(lines) else None)
            self.state["rollouts"] = self.state.get("rollouts", 0) + len(lines)
            self.log(f"evolab: {len(lines)} rollouts of step {step} stored")
        for kind, count in read.skipped.items():
            self.state["skipped"][kind] = self.state["skipped"].get(kind, 0) + count
        self._send_points(points)
        self.state["points"] += len(points)
        self.sent += len(points)
        if points:
            self.log(f"evolab: {len(points)} points stored, through step {max(p.step for p in points)}")
        if read.finished is not None and self.state["finished"] is None:
            self.finish("FINISHED" if read.finished else "FAILED")
        return len(points)

    def _send_points(self, points: list) -> None:
        """Through Evolab's metrics endpoint (`POST /api/runs/{id}/metrics`), POINTS_PER_REQUEST a request as
        columns, charted before it answers; the last request carries the sync's totals for the imports page. A
        request is sent even without points when only the totals changed (values skipped, rollouts)."""
        keys: dict[str, int] = {}
        rows = [[keys.setdefault(p.key[:250], len(keys)), p.step, p.timestamp, _json_number(p.value)] for p in points]
        names = list(keys)
        bodies = [{"keys": names, "points": rows[start:start + POINTS_PER_REQUEST]}
                  for start in range(0, max(len(rows), 1), POINTS_PER_REQUEST)]
        bodies[-1]["sync"] = self._totals(len(points))
        self._in_background(bodies)

    def _totals(self, sending: int) -> dict:
        """What the imports page shows of this sync: its running totals once this request is stored."""
        return {"logger": self.source.name, "folder": str(Path(self.source.directory).resolve())[:1000],
                "host": socket.gethostname()[:200], "files": len(self.state["files"]),
                "points": self.state["points"] + sending, "rollouts": self.state.get("rollouts", 0),
                "skipped": {kind[:40]: count for kind, count in self.state["skipped"].items()}}

    def _send_params(self, params: dict) -> None:
        """The config as the run's parameters, each key once: MLflow's params never change, so a value the logger
        changed later (W&B's config.update(allow_val_change=True)) keeps the first one, and the command says so."""
        sent = self.state.setdefault("params", {})
        new = {}
        for key, value in params.items():
            key, value = key[:250], str(value)[:MAX_PARAM_VALUE]
            if key not in sent:
                new[key] = value
            elif sent[key] != value:
                self.log(f"evolab: parameter {key} changed to {value!r}; the run keeps {sent[key]!r}")
        items = sorted(new.items())
        for i in range(0, len(items), PARAMS_PER_REQUEST):
            self.client.mlflow("runs/log-batch", {"run_id": self.run.mlflow_run_id, "params": [
                {"key": k, "value": v} for k, v in items[i:i + PARAMS_PER_REQUEST]]})
        sent.update(new)

    def finish(self, status: str) -> None:
        """The run ended (the logger said so, or an import of a folder with no end marker is complete)."""
        self._wait()  # every point stored first
        if self.state["finished"] is not None or self.state["run"] is None:
            return  # ended already, or nothing was ever read: no run to end
        if self.run is None:  # a later import with nothing new to send still ends the run
            self.run = self._resolve_run()
        self.client.finish(self.run.mlflow_run_id, status)
        self.state["finished"] = status
        self._save_state()
        self.log(f"evolab: run {self.run.id} {status.lower()}")

    def follow(self, stop=lambda: False) -> None:
        """Send the backlog, then what the logger writes until it records the run's end, `stop()` or Ctrl-C."""
        while not stop() and self.state["finished"] is None:
            if self.sync_once() == 0:
                time.sleep(self.poll_seconds)

    def summary(self) -> str:
        skipped = ", ".join(f"{count} {kind}" for kind, count in sorted(self.state["skipped"].items()))
        rollouts = self.state.get("rollouts", 0)
        return (f"evolab: {self.state['points']} points sent to run {self.state['run']}"
                + (f", {rollouts} rollouts" if rollouts else "") + (f"; skipped {skipped}" if skipped else ""))


class _Background:
    """A call on a daemon thread (Ctrl-C never waits for a request retrying while Evolab is away); result() waits
    for it and raises what it raised."""

    def __init__(self, call):
        self._error = None

        def run():
            try:
                call()
            except BaseException as exc:  # noqa: BLE001 - raised again in result(), on the sync's own thread
                self._error = exc
        self._thread = threading.Thread(target=run, daemon=True, name="evolab-sync-send")
        self._thread.start()

    def result(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error


def _json_number(value: float):
    """A value as the metrics endpoint takes it: NaN and ±inf as MLflow's JSON writes them."""
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def run_folders(directory, source: str) -> list[Path]:
    """With --all: every run folder under `directory` (W&B: the folders holding a run-*.wandb, not the latest-run
    link; TensorBoard: every folder holding event files), in name order."""
    from .tensorboard_files import EVENT_FILE

    root = Path(directory)
    found = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not (root / folder / d).is_symlink())
        if source == "wandb" and any(f.startswith("run-") and f.endswith(".wandb") for f in files):
            found.add(Path(folder))
        elif source == "tensorboard" and any(EVENT_FILE.fullmatch(f) for f in files):
            found.add(Path(folder))
    return sorted(found)
