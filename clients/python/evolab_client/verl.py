"""`evolab sync verl DIR --run RUN`: send the rollouts verl dumps to Evolab, and keep sending.

verl with `trainer.rollout_data_dir=DIR` writes each training step's rollouts to `DIR/{step}.jsonl`
(`RayPPOTrainer._dump_generations`): one JSON object per line with `input` (the prompt, chat template
included), `output` (the response), `gts` (the ground truth), `score` (the reward function's score),
`step`, and the reward function's extra infos as further fields. The rollouts of one prompt are
consecutive (verl repeats each prompt n times, interleaved), so a line's index in its group is how many
lines of the same prompt came before it in the file.

The follower sends the files in step order, only whole lines (a file being written is read up to its last
newline), in batches, and writes its position (bytes sent of each file) to a state file after each batch
Evolab has stored. Killed and restarted it reads the state file and goes on from there; a batch that was
stored but not yet recorded is sent again and stored once (Evolab keys rollouts by step, prompt and
index). With Evolab away it waits and retries (the client's backoff), losing nothing.
"""
from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from .client import Evolab, RunRef
from .state_file import read_state, write_state

# matched whole (fullmatch): `$` also matches before a final newline ("3.jsonl\n" was a second step 3)
STEP_FILE = re.compile(r"(\d+)\.jsonl")
BASE_FIELDS = ("input", "output", "gts", "score", "step")


def step_files(directory: Path) -> list[tuple[int, Path]]:
    """verl's dumps in step order (file names `{step}.jsonl`, no padding)."""
    found = []
    for entry in os.scandir(directory):
        match = STEP_FILE.fullmatch(entry.name)
        if match and entry.is_file():
            found.append((int(match.group(1)), Path(entry.path)))
    return sorted(found)


def rollout_from_verl(line: dict, step: int, index: int) -> dict:
    """One dumped line as a rollout of Evolab's endpoint (DESIGN §4.8)."""
    rollout = {"step": line.get("step", step) if isinstance(line.get("step"), int) else step,
               "prompt": str(line.get("input", "")), "completion": str(line.get("output", "")), "index": index}
    score = line.get("score")
    if isinstance(score, (int, float)) and not isinstance(score, bool):
        rollout["reward"] = score
    gts = line.get("gts")
    if gts is not None:  # held out: monitoring only (label accuracy), as every label in Evolab
        rollout["label"] = gts if isinstance(gts, str) else json.dumps(gts, ensure_ascii=False)
    extras = {k: v for k, v in line.items() if k not in BASE_FIELDS}
    if extras:
        rollout["extras"] = extras
    return rollout


class VerlSync:
    """Follows one dump folder for one run. `state_path` keeps the position between runs of the command."""

    def __init__(self, client: Evolab, run: RunRef, directory, state_path=None, batch_lines: int = 1000,
                 batch_bytes: int = 4 * 1024 * 1024, poll_seconds: float = 2.0, log=print):
        self.client, self.run = client, run
        self.directory = Path(directory)
        self.state_path = Path(state_path) if state_path else self.directory / f".evolab-sync-{run.id}.json"
        self.batch_lines, self.batch_bytes, self.poll_seconds = batch_lines, batch_bytes, poll_seconds
        self.log = log
        self.state = self._load_state()
        self.sent = 0

    def _load_state(self) -> dict:
        state = read_state(self.state_path, {"server": self.client.url, "run": self.run.id, "files": {}})
        if state.get("run") != self.run.id or state.get("server") != self.client.url:
            raise SystemExit(f"evolab: {self.state_path} records run {state.get('run')} on {state.get('server')}, "
                             f"not run {self.run.id} on {self.client.url}: give another --state file")
        return state

    def _save_state(self) -> None:
        write_state(self.state_path, self.state)

    def sync_once(self, final: bool = False) -> int:
        """Send every whole line not sent yet, file by file in step order; how many were sent. A file is complete
        once a later step's file exists (verl dumps steps in order, each file whole), or, with `final`, now: its
        last batch tells Evolab so (complete_through), which groups the step at once."""
        sent = 0
        files = step_files(self.directory)
        for n, (step, path) in enumerate(files):
            sent += self._sync_file(step, path, complete=final or n < len(files) - 1)
        return sent

    def follow(self, stop=lambda: False) -> None:
        """Send the backlog, then keep sending what verl writes until `stop()` (or Ctrl-C)."""
        while not stop():
            if self.sync_once() == 0:
                time.sleep(self.poll_seconds)

    def _sync_file(self, step: int, path: Path, complete: bool) -> int:
        record = self.state["files"].setdefault(path.name, {"offset": 0})
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return 0
        if size < record["offset"]:  # written anew (a resumed verl dumps its step again): read it from the start
            record["offset"], record["complete"] = 0, False
        if size == record["offset"]:
            if complete and not record.get("complete"):  # all of it was sent before the next file appeared
                self._send([], record, record["offset"], complete_through=step)
            return 0
        with open(path, "rb") as handle:
            counts = self._counts_before(handle, record["offset"])
            handle.seek(record["offset"])
            data = handle.read(size - record["offset"])
        end = data.rfind(b"\n")
        if end < 0:
            return 0  # no whole line yet
        whole = end + 1 == len(data)  # nothing after the last newline: the file as verl wrote it
        lines = [raw for raw in data[: end + 1].splitlines(keepends=True)]
        sent, batch, batch_size, position = 0, [], 0, record["offset"]
        for n, raw in enumerate(lines):
            position += len(raw)
            if raw.strip():
                try:
                    line = json.loads(raw)
                except ValueError as exc:
                    raise SystemExit(f"evolab: {path} line at byte {position - len(raw)} is not JSON ({exc})")
                prompt = str(line.get("input", ""))
                index = counts.get(prompt, 0)
                counts[prompt] = index + 1
                batch.append(rollout_from_verl(line, step, index))
                batch_size += len(raw)
            last = n == len(lines) - 1
            if batch and (last or len(batch) >= self.batch_lines or batch_size >= self.batch_bytes):
                done = last and whole and complete
                sent += self._send(batch, record, position, complete_through=step if done else None)
                batch, batch_size = [], 0
        return sent

    def _counts_before(self, handle, offset: int) -> dict:
        """How many lines of each prompt the part already sent holds (a restart in the middle of a file)."""
        counts: dict[str, int] = {}
        if offset:
            for raw in handle.read(offset).splitlines():
                if raw.strip():
                    prompt = str(json.loads(raw).get("input", ""))
                    counts[prompt] = counts.get(prompt, 0) + 1
        return counts

    def _send(self, batch: list[dict], record: dict, offset: int, complete_through: int | None = None) -> int:
        answer = self.client.post_rollouts(self.run.id, batch, complete_through=complete_through)
        record["offset"] = offset
        if complete_through is not None:
            record["complete"] = True
        self._save_state()
        self.sent += len(batch)
        if batch:
            self.log(f"evolab: step {batch[-1]['step']}: {answer.get('stored', 0)} rollouts stored"
                     f"{', ' + str(answer['duplicates']) + ' already there' if answer.get('duplicates') else ''}")
        return len(batch)
