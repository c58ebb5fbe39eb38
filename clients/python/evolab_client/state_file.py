"""The position a sync command keeps between runs of itself: one JSON file, replaced whole."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path


def read_state(path: Path, fresh: dict) -> dict:
    """The state kept in `path`, or `fresh` when there is none yet."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        return fresh
    except ValueError as exc:
        raise SystemExit(f"evolab: the state file {path} is not JSON ({exc}); move it away to start over")


def write_state(path: Path, state: dict) -> None:
    # a new file renamed over the old: a crash leaves either position whole, never half a file
    handle, temporary = tempfile.mkstemp(dir=Path(path).parent, prefix=".evolab-sync-")
    with os.fdopen(handle, "w") as out:
        json.dump(state, out)
    os.replace(temporary, path)
