"""A run's artifacts through MLflow's artifact service (`/mlflow/api/2.0/mlflow-artifacts/artifacts/...`), the
calls the pinned client makes for a run whose artifact_uri is `mlflow-artifacts:/EXPERIMENT/RUN/artifacts`:
log_artifact(s), log_text, log_dict, log_figure (PUT a file), list_artifacts (GET ?path=), download_artifacts
(GET a file) and delete. Files are kept whole with the run (RunArtifact), at most settings.EXTERNAL_MAX_ARTIFACT_BYTES
each: Evolab is not a model store, and a checkpoint past the limit is refused naming its size.

verl's MLflow logger uploads each validation's generations as `val_step{N}.json` (a list of {input, output, score},
or {"table_name", "rows": [...]} in later versions): the upload that stores such a file also turns it into the
run's evaluation generations of step N (EvalGeneration), in the same transaction, so the run page shows them."""
import json
import math
import posixpath
import re

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from rl.answer_rules import answer_rule
from rl.params import finite
from webapp.plain_text import storable

from . import reporting
from .experiments import Caller
from .mlflow_protocol import invalid, missing
from .models import EvalGeneration, RunArtifact

# EXPERIMENT/RUN/artifacts[/PATH]: the root MLflow's server gives a run's artifacts
_RUN_ROOT = re.compile(r"(?P<experiment>[0-9]+)/(?P<run>[^/]+)/artifacts(?:/(?P<path>.*))?", re.DOTALL)
_VALIDATION_FILE = re.compile(r"val_step(?P<step>-?[0-9]{1,18})\.json")
MAX_GENERATIONS_PER_FILE = 20_000
MAX_GENERATION_CHARS = 400_000  # as a reported rollout's prompt or completion (rollouts.py)


def safe_path(path: str) -> str:
    """MLflow's validate_path_is_safe: no '#', backslash, NUL, absolute path or '..' segment (the path is a key
    here, never a file name, but a client reads back what it lists and must not be led out of its directory)."""
    if (any(c in path for c in "#\\\x00") or path.startswith("/") or ".." in path.split("/")
            or re.match(r"[A-Za-z]:", path)):
        raise invalid("Invalid path")
    return path.strip("/")


def _locate(caller: Caller, path: str, *, to_write: bool):
    """(the external run, the path inside its artifacts) of a service path; another team's run and a run of
    another experiment answer as a missing one."""
    found = _RUN_ROOT.fullmatch(safe_path(path))
    if found is None:
        raise invalid(f"Invalid path {path!r}: Evolab keeps artifacts of runs, at EXPERIMENT_ID/RUN_ID/artifacts/PATH")
    external = reporting.find(caller, found["run"])
    if str(external.experiment_id) != found["experiment"]:
        raise missing(f"Run with id={found['run']} not found in experiment {found['experiment']}")
    if to_write:
        caller.require_member(external.run.team_id)
    return external, (found["path"] or "").strip("/")


def upload(caller: Caller, path: str, body, declared_length: int | None) -> None:
    """Keep a file PUT to the service (replacing one at the same path), read from `body` (a file-like object);
    a val_stepN.json of verl's shape becomes step N's evaluation generations."""
    external, relative = _locate(caller, path, to_write=True)
    if not relative:
        raise invalid("Invalid path: name the file under the run's artifacts")
    limit = settings.EXTERNAL_MAX_ARTIFACT_BYTES
    if declared_length is not None and declared_length > limit:
        raise _too_large(relative, declared_length, limit)
    content = body.read(limit + 1)
    if len(content) > limit:
        raise _too_large(relative, len(content), limit)
    if RunArtifact.objects.filter(run_id=external.pk, path__startswith=relative + "/").exists():
        raise invalid(f"Invalid path {relative!r}: it is a directory of the run's artifacts")
    with transaction.atomic():
        RunArtifact.objects.update_or_create(run_id=external.pk, path=relative, defaults={
            "content": content, "size": len(content), "uploaded_at": timezone.now()})
        _record_generations(external, relative, content)


def _too_large(relative: str, size: int, limit: int):
    return invalid(f"Artifact {relative!r} is {size} bytes; Evolab keeps artifacts of at most {limit} bytes "
                   f"(EVOLAB_MAX_ARTIFACT_BYTES): log checkpoints and models to a store of your own")


def download(caller: Caller, path: str) -> RunArtifact:
    return _file(*_locate(caller, path, to_write=False))


def listing(caller: Caller, path: str) -> list[tuple[str, bool, int | None]]:
    """The entries directly under a directory of the run's artifacts, as (name, is_dir, size): MLflow's server
    lists a file or a missing path as nothing."""
    return _entries(*_locate(caller, path, to_write=False))


def run_listing(external, path: str) -> list[tuple[str, bool, int | None]]:
    """The tracking API's artifacts/list of a run the caller sees (reporting.find): the same entries, named by their
    path from the run's root."""
    relative = safe_path(path or "")
    return [(posixpath.join(relative, name) if relative else name, is_dir, size)
            for name, is_dir, size in _entries(external, relative)]


def run_file(external, path: str) -> RunArtifact:
    """MLflow's get-artifact (its UI's download link) of a run the caller sees: a file by its path from the run's
    root."""
    return _file(external, safe_path(path or ""))


def _file(external, relative: str) -> RunArtifact:
    artifact = RunArtifact.objects.filter(run_id=external.pk, path=relative).first()
    if artifact is None:
        raise missing(f"No such file or directory: {relative!r}")
    return artifact


def _entries(external, relative: str) -> list[tuple[str, bool, int | None]]:
    prefix = relative + "/" if relative else ""
    entries: dict[str, tuple[str, bool, int | None]] = {}
    for stored, size in (RunArtifact.objects.filter(run_id=external.pk, path__startswith=prefix)
                         .values_list("path", "size")):
        name, slash, _ = stored[len(prefix):].partition("/")
        entries[name] = (name, True, None) if slash else (name, False, size)
    return [entries[name] for name in sorted(entries)]


def delete(caller: Caller, path: str) -> None:
    """Delete a file, or a directory with everything under it, and the evaluation generations read from them."""
    external, relative = _locate(caller, path, to_write=True)
    with transaction.atomic():
        files = RunArtifact.objects.filter(run_id=external.pk)
        if relative:
            files = files.filter(path=relative) | files.filter(path__startswith=relative + "/")
        paths = list(files.values_list("path", flat=True))
        EvalGeneration.objects.filter(run_id=external.pk, artifact_path__in=paths).delete()
        RunArtifact.objects.filter(run_id=external.pk, path__in=paths).delete()


def _record_generations(external, relative: str, content: bytes) -> None:
    """Step N's evaluation generations from verl's val_stepN.json at the root of the run's artifacts. A file of
    that name in another shape is kept as an artifact and read as nothing else (verl writes no other)."""
    named = _VALIDATION_FILE.fullmatch(relative)
    rows = _verl_rows(content) if named else None
    if rows is None:
        return
    step = int(named["step"])
    rule = answer_rule(external.answer_rule)
    generations = []
    for index, row in enumerate(rows):
        prompt, output = storable(str(row["input"]))[:MAX_GENERATION_CHARS], storable(str(row["output"]))[:MAX_GENERATION_CHARS]
        answer = rule(output)
        score = finite(row.get("score"))
        extra = {k: v for k, v in row.items() if k not in ("input", "output", "score")}
        if score is None and row.get("score") is not None:
            extra["score"] = row["score"]  # a score that is not a number (verl passes the reward function's) is kept as written
        generations.append(EvalGeneration(run_id=external.pk, step=step, index=index, prompt=prompt, output=output,
                                          answer=storable(answer) if answer is not None else None, score=score,
                                          extra=_json_safe(extra), artifact_path=relative))
    EvalGeneration.objects.filter(run_id=external.pk, step=step).delete()
    EvalGeneration.objects.bulk_create(generations, batch_size=1000)


def _verl_rows(content: bytes) -> list[dict] | None:
    try:
        data = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        data = data["rows"]  # verl since 0.6: {"table_name": "val/generations", "rows": [...]}
    if (not isinstance(data, list) or len(data) > MAX_GENERATIONS_PER_FILE
            or not all(isinstance(r, dict) and "input" in r and "output" in r for r in data)):
        return None
    return data


def _json_safe(value):
    """The row's other fields as JSON the database keeps: NaN and infinities become text, as do NUL characters."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {storable(str(k)): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return storable(value) if isinstance(value, str) else value
