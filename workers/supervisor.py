"""The run supervisor: starts the trainer as a child process, tails its event log into
the database, relays cancel requests as SIGTERM, and records how the child ended.

A crash of the child never reaches the worker: the child is a separate process and its
exit code and stderr tail are recorded on the run.
"""
import json
import logging
import os
import signal
import subprocess
import sys
import time

from django.conf import settings
from django.db import DatabaseError

from rl import launch
from rl.methods import get_method
from webapp.runs import lifecycle, text_search
from webapp.runs.models import Run, RunEvent

from .ingest import EventTail, ingest_events

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5
# After SIGTERM the trainer finishes its step and writes a checkpoint; a child that takes
# longer than this is killed so that cancel always ends.
CANCEL_GRACE_SECONDS = float(os.environ.get("EVOLAB_CANCEL_GRACE_SECONDS", 120))
STDERR_TAIL_CHARS = 4000


def trainer_command(run: Run, config_path, resume: bool) -> list[str]:
    """`python -m rl.train ...` for 0 or 1 GPU, `accelerate launch ...` for more (rl/launch.py)."""
    return launch.trainer_command(
        config_path, run.run_dir, resume=resume, gpus=run.gpus, python=settings.TRAINER_PYTHON or sys.executable
    )


def uses_references(run: Run) -> bool:
    """Whether the run's method reads y* with these hyperparameters (Method.reference_field_for): a
    variant that votes its own reference runs label-free and gets no reference at all."""
    return get_method(run.method).reference_field_for(run.hyperparameters) is not None


def _set_aside_stale_run_dir(run: Run) -> None:
    """A fresh run must start from an empty directory: one left under the same id (a
    database restored from a backup, a test database flushed while the data directory
    stayed) would otherwise feed its old event log to this run. It is renamed, not deleted."""
    if run.run_dir.exists() and any(run.run_dir.iterdir()):
        stale = run.run_dir.with_name(f"{run.pk}.stale-{int(time.time() * 1000)}")
        run.run_dir.rename(stale)
        log.warning("run %s: moved an old directory of the same id aside to %s", run.pk, stale)


def _prepare_run_dir(run: Run):
    run.run_dir.mkdir(parents=True, exist_ok=True)
    prompts_path = run.run_dir / "prompts.jsonl"
    with open(prompts_path, "w", encoding="utf-8") as f:
        for row in run.prompt_set.trainer_rows(with_references=uses_references(run)):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    eval_path = None
    if run.eval_prompt_set is not None:
        # The eval set's labels are what evaluation scores against; they go to the
        # trainer's periodic eval only, never to a reward (rl/callbacks.py::PeriodicEval).
        eval_path = run.run_dir / f"eval-{_slug(run.eval_prompt_set.name)}.jsonl"
        with open(eval_path, "w", encoding="utf-8") as f:
            for row in run.eval_prompt_set.trainer_rows(with_references=False):
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    config_path = run.run_dir / "config.json"
    config_path.write_text(json.dumps(run.trainer_config(prompts_path, eval_path), indent=2))
    return config_path


def _slug(name: str) -> str:
    # The file's stem becomes the eval event's `prompt_set`: keep it readable and safe.
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")[:60] or "eval"


def _tail(path, chars=STDERR_TAIL_CHARS) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - chars))
            return f.read().decode("utf-8", "replace")
    except FileNotFoundError:
        return ""


def _final_state(run: Run, exit_code: int, cancel_sent: bool) -> tuple[str, str]:
    last_status = RunEvent.objects.filter(run=run, type="status").order_by("-seq").first()
    reported = last_status.payload.get("state") if last_status else None
    reported_message = last_status.payload.get("message", "") if last_status else ""
    if exit_code == 0 and reported in (Run.SUCCEEDED, Run.CANCELLED):
        return reported, reported_message
    if exit_code == 0 and cancel_sent:
        return Run.CANCELLED, reported_message or "cancelled"
    if exit_code == 0:
        return Run.SUCCEEDED, reported_message
    if cancel_sent and exit_code in (-signal.SIGTERM, -signal.SIGKILL):
        return Run.CANCELLED, f"cancelled; the trainer was stopped by signal {-exit_code}"
    if reported == Run.FAILED and reported_message:
        return Run.FAILED, reported_message
    if exit_code < 0:
        return Run.FAILED, f"the trainer was killed by signal {-exit_code}"
    return Run.FAILED, f"the trainer exited with code {exit_code}"


def supervise(run_id: int) -> str | None:
    run = lifecycle.claim(run_id)
    if run is None:
        log.info("run %s is not queued; nothing to do", run_id)
        return None
    resume = run.resume_requested
    Run.objects.filter(pk=run.pk).update(resume_requested=False)

    if not resume:
        _set_aside_stale_run_dir(run)
    config_path = _prepare_run_dir(run)
    stdout_path, stderr_path = run.run_dir / "stdout.log", run.run_dir / "stderr.log"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    with open(stdout_path, "ab") as out, open(stderr_path, "ab") as err:
        child = subprocess.Popen(
            trainer_command(run, config_path, resume),
            cwd=settings.BASE_DIR,
            stdout=out,
            stderr=err,
            env=env,
            # Same process group as the worker on purpose: stopping the worker's group
            # (`make demo`'s Ctrl-C, a deploy) also SIGTERMs the trainer, which then
            # checkpoints, so the run ends `cancelled` and can be resumed.
        )
    try:
        exit_code, cancel_sent = _watch(run, child)
    except Exception as exc:
        # The supervisor itself failed (a corrupt log line, a lost database): stop the
        # trainer rather than leave it training unwatched, and say why on the run.
        child.kill()
        child.wait()
        lifecycle.finish(run, Run.FAILED, f"the run supervisor stopped: {exc}", child.returncode, _tail(stderr_path))
        raise
    state, message = _final_state(run, exit_code, cancel_sent)
    lifecycle.finish(run, state, message, exit_code, _tail(stderr_path) if state == Run.FAILED else "")
    log.info("run %s ended %s (exit code %s)", run.pk, state, exit_code)
    return state


def _watch(run: Run, child: subprocess.Popen) -> tuple[int, bool]:
    """Ingest the log until the child exits, relaying a cancel as SIGTERM."""
    tail = EventTail(run.run_dir / "events.jsonl")
    cancel_sent_at = None
    while True:
        for batch in tail.batches():
            ingest_events(run, batch)
        _index_texts(run, text_search.catch_up)  # a bounded batch per poll
        exit_code = child.poll()
        if exit_code is not None:
            break
        if cancel_sent_at is None and Run.objects.filter(pk=run.pk, cancel_requested=True).exists():
            child.send_signal(signal.SIGTERM)
            cancel_sent_at = time.monotonic()
        elif cancel_sent_at is not None and time.monotonic() - cancel_sent_at > CANCEL_GRACE_SECONDS:
            child.kill()
        time.sleep(POLL_SECONDS)
    for batch in tail.batches():
        ingest_events(run, batch)
    _index_texts(run, text_search.catch_up_fully)
    return exit_code, cancel_sent_at is not None


def _index_texts(run: Run, how) -> None:
    """The search's text index, behind ingestion (webapp/runs/text_search.py). A failure here costs
    only search speed (unindexed rollouts are read from their text), so it never stops the run."""
    try:
        how(run.pk)
    except DatabaseError as exc:
        log.warning("run %s: rollout texts left unindexed for now: %s", run.pk, exc)
