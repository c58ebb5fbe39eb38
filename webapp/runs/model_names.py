"""What a run's `model` and `embedding_model` may name (docs/security.md, "Files and models"): a name, never a path
on the worker.

- `model`: "default" (the shipped policy), the name of a folder under one of the workers' model roots
  (EVOLAB_MODEL_ROOTS, e.g. `Qwen3-4B-Base` or `Qwen/Qwen3-4B-Base`), or `run:<id>` for the last checkpoint of a
  run the user can see (`run:<id>/checkpoint-<step>` for another of its checkpoints);
- `embedding_model`: "" (the shipped MiniLM), or a folder under the model roots.

The web checks a name's form, and that a `run:<id>` is a run of one of the user's teams; the worker turns the name
into a folder (`resolve`) when it writes the trainer's CONFIG.json, which keeps DESIGN §4.1's paths. The web never
reads the worker's disk (DESIGN §3). Every refusal, on either side, is the same sentence, so a user cannot tell a
folder that is missing from one outside the roots or another team's run, and cannot probe the worker's paths.
"""
import re
from pathlib import Path

from django.conf import settings

from rl.params import FieldError
from rl.policy import CHECKPOINTS_DIR, last_checkpoint
from webapp.accounts.access import teams_of

from .models import Run

# Folder names of one to four segments; a segment starts with a letter or digit, so "." and ".." never pass
_SEGMENT = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}"
_ROOT_NAME = re.compile(rf"{_SEGMENT}(?:/{_SEGMENT}){{0,3}}")
_RUN_CHECKPOINT = re.compile(r"run:([1-9][0-9]{0,17})(?:/(checkpoint-[0-9]{1,12}))?")
DEFAULTS = {"model": "default", "embedding_model": ""}


class ModelNameError(FieldError):
    """A model name that names nothing this Evolab offers the user; `field` is model or embedding_model. One
    sentence for every refusal, so that a missing folder and another team's run read alike."""

    def __init__(self, value: str, field: str):
        default = '"default" (the shipped policy), ' if field == "model" else "nothing (the shipped MiniLM), "
        checkpoint = ", or run:<id> for the last checkpoint of a run you can see" if field == "model" else ""
        super().__init__(field, f"{value!r} is not a model this Evolab offers: use {default}the name of a folder "
                                f"under its model roots (EVOLAB_MODEL_ROOTS){checkpoint}")

    @property
    def run_message(self) -> str:
        """As a failed run says it: the field first, as the form and the API give it beside the sentence."""
        return f"{self.field}: {self}"


def check(user, value: str, field: str) -> str:
    """The name as stored on the run, or ModelNameError: the web's half (form, and runs the user can see)."""
    value = value.strip()
    if value in ("", DEFAULTS[field]):
        return DEFAULTS[field]
    if _ROOT_NAME.fullmatch(value):
        return value
    checkpoint = _RUN_CHECKPOINT.fullmatch(value) if field == "model" else None
    if checkpoint and Run.objects.filter(pk=int(checkpoint[1]), team__in=teams_of(user), source=Run.EVOLAB).exists():
        return value
    raise ModelNameError(value, field)


def resolve(value: str, field: str) -> str | None:
    """The folder a stored name stands for, on this worker: "default" and None stay as CONFIG.json spells them.
    ModelNameError when the name has no folder here (a run stored before names, with a path, included)."""
    if value == DEFAULTS[field]:
        return value or None
    checkpoint = _RUN_CHECKPOINT.fullmatch(value) if field == "model" else None
    if checkpoint:
        run_dir = settings.RUNS_DIR / checkpoint[1]
        folder = (run_dir / CHECKPOINTS_DIR / checkpoint[2]) if checkpoint[2] else last_checkpoint(run_dir / CHECKPOINTS_DIR)
        if folder is not None and (folder / "trainer_state.json").is_file():
            return str(folder)
    elif _ROOT_NAME.fullmatch(value):
        for root in settings.MODEL_ROOTS:
            if (Path(root) / value).is_dir():
                return str(Path(root) / value)
    raise ModelNameError(value, field)
