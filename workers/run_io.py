"""What the run supervisor (workers/supervisor.py) gives and asks of a run whatever its engine: the run directory
its job is given, and the database calls of a poll, made to outlast a database that goes away for a while."""
import json
import logging
import shutil
import time

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection

from rl.methods import get_method
from webapp.external.queues import external_queue
from webapp.runs import model_names
from webapp.runs.models import Run
from webapp.tasks import INDEX_ROLLOUT_TEXT, send

log = logging.getLogger(__name__)

POLL_SECONDS = 0.5


def uses_references(run: Run) -> bool:
    """Whether the run's method reads y* with these hyperparameters (Method.reference_field_for): a
    variant that votes its own reference runs label-free and gets no reference at all."""
    return get_method(run.method).reference_field_for(run.hyperparameters) is not None


def delete_run_dir(run_id: int) -> bool:
    """Remove a deleted run's directory (its prompts, event log and checkpoints); False when there was none.
    Only once its row is gone: a run still stored keeps its files."""
    folder = settings.RUNS_DIR / str(int(run_id))
    if Run.objects.filter(pk=run_id).exists() or not folder.is_dir():
        return False
    shutil.rmtree(folder)
    log.info("run %s: deleted its directory %s", run_id, folder)
    return True


def set_aside_stale_run_dir(run: Run) -> None:
    """A fresh run must start from an empty directory: one left under the same id (a
    database restored from a backup, a test database flushed while the data directory
    stayed) would otherwise feed its old event log to this run. It is renamed, not deleted."""
    if run.run_dir.exists() and any(run.run_dir.iterdir()):
        stale = run.run_dir.with_name(f"{run.pk}.stale-{int(time.time() * 1000)}")
        run.run_dir.rename(stale)
        log.warning("run %s: moved an old directory of the same id aside to %s", run.pk, stale)


def prepare_run_dir(run: Run):
    """The run's prompts and CONFIG.json in its directory; the path of CONFIG.json. ModelNameError, with nothing
    written, when its model or embedding model names no folder on this worker."""
    model = model_names.resolve(run.model, "model")
    embedding_model = model_names.resolve(run.embedding_model, "embedding_model")
    run.run_dir.mkdir(parents=True, exist_ok=True)
    prompts_path = run.run_dir / "prompts.jsonl"
    with open(prompts_path, "w", encoding="utf-8") as f:
        for row in run.prompt_set.trainer_rows(with_references=uses_references(run)):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    eval_path = None
    if run.eval_prompt_set is not None:
        # The eval set's labels are what evaluation scores against; they go to the
        # trainer's periodic eval only, never to a reward (rl/callbacks.py::PeriodicEval).
        eval_path = run.run_dir / f"eval-{slug(run.eval_prompt_set.name)}.jsonl"
        with open(eval_path, "w", encoding="utf-8") as f:
            for row in run.eval_prompt_set.trainer_rows(with_references=False):
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    config_path = run.run_dir / "config.json"
    config_path.write_text(json.dumps(run.trainer_config(prompts_path, eval_path, model, embedding_model), indent=2))
    return config_path


def slug(name: str) -> str:
    # The file's stem becomes the eval event's `prompt_set`: keep it readable and safe.
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")[:60] or "eval"


def cancel_requested(run: Run) -> bool:
    return Run.objects.filter(pk=run.pk, cancel_requested=True).exists()


# What a database that went away raises (a restart, a failover, a network cut); anything else
# (a constraint, a corrupt event) is a real error and stops the supervisor.
DATABASE_AWAY = (OperationalError, InterfaceError)
RETRY_SECONDS_MAX = 10.0


def until_stored(write, *args):
    """`write(*args)` once the database answers: while it is away the trainer trains on and its events
    wait in the log, so nothing is lost by waiting. Each write is a transaction of its own and safe to
    repeat (ingestion skips the seqs it holds), so a write cut off mid-way is simply done again."""
    delay, warned = 0.5, False
    while True:
        try:
            return write(*args)
        except DATABASE_AWAY as exc:
            if not warned:
                log.warning("the database is away (%s); retrying every %.0f s at most", exc, RETRY_SECONDS_MAX)
                warned = True
            connection.close()  # a new connection on the next try
            time.sleep(delay)
            delay = min(delay * 2, RETRY_SECONDS_MAX)


def once(read, *args):
    """`read(*args)`, or None when the database is away (a poll's check, tried again at the next poll)."""
    try:
        return read(*args)
    except DATABASE_AWAY:
        connection.close()
        return None


def index_texts(run: Run, how, watch) -> None:
    """The search's text index, behind ingestion (webapp/explorer/text_search.py). A failure here costs
    only search speed (unindexed rollouts are read from their text), so it never stops the run: the database
    away is tried at the next poll, any other failure is recorded on the run and tried after a backoff
    (`watch`, a workers.watched.Polled)."""
    if not watch.due():
        return
    try:
        how(run.pk)
    except DATABASE_AWAY as exc:
        log.warning("run %s: rollout texts left unindexed for now: %s", run.pk, exc)
        connection.close()
    except Exception as exc:  # noqa: BLE001 - a bug or a refused statement: on the run, retried with backoff
        watch.failed(exc)
    else:
        watch.succeeded()


def index_the_rest(run: Run, how, watch) -> None:
    """At the trainer's end: the rest of the text index, here; while it is failing, by the index task instead, which
    Celery retries with backoff until it succeeds and takes the failure off the run (nothing here would again)."""
    index_texts(run, how, watch)
    if watch.attempts:
        send(INDEX_ROLLOUT_TEXT, [run.pk], queue=external_queue())
