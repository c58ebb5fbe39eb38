"""A worker's work on one run never fails silently (issue 36, item 7; workers/watched.py): the heatmaps, the text
index and the ingestion of a trainer's log, when they fail, show on the run's processing_failed alert (the task,
the step, the error; the traceback in the log), are tried again with backoff, and an attempt that succeeds clears
the failure. Before, a failing task left nothing on the run, a failing text index past a database error stopped
its supervisor, and so did a batch of the log that ingestion could not store, killing the trainer."""
import json
import logging

import pytest

from tests.factories import event_log, make_prompt_set
from webapp.alerts.models import Alert
from webapp.runs.models import Group, Run, RunEvent
from workers import tasks
from workers.event_tail import DRAIN_ATTEMPTS, LogIngestion
from workers.run_io import index_texts
from workers.watched import Polled, backoff

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *args, **kwargs: None)


@pytest.fixture
def run(user):
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=4, created_by=user,
                              state=Run.RUNNING)


def failure(run) -> Alert | None:
    return Alert.objects.filter(run=run, rule="processing_failed").first()


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_heatmaps_that_fail_show_on_the_run_at_their_step_and_a_later_success_clears_them(run, monkeypatch, caplog):
    from webapp.external import similarity
    from webapp.runs.ingestion import ingest_events

    ingest_events(run, event_log(steps=2))
    Group.objects.filter(run=run).update(similarity=None)

    class NoModel:
        def embed(self, texts):
            raise OSError("no sentence-transformers model at /models/MiniLM")

    monkeypatch.setattr(similarity, "_embedder", NoModel())
    monkeypatch.setattr(similarity, "_take_lease", lambda run_id, renew=False: True)
    with pytest.raises(OSError):
        tasks.embed_external_groups(run.pk)
    assert failure(run).message == ("similarity heatmaps failed at step 1: OSError: no sentence-transformers model "
                                    "at /models/MiniLM")
    assert any(r.exc_info and "similarity heatmaps failed at step 1" in r.getMessage() for r in caplog.records)

    class Model:
        def embed(self, texts):
            import numpy as np
            return np.ones((len(texts), 4), dtype=np.float32)

    monkeypatch.setattr(similarity, "_embedder", Model())
    tasks.embed_external_groups(run.pk)
    assert failure(run).state == "resolved"


def test_text_indexing_that_fails_shows_on_the_run_and_a_retry_that_succeeds_clears_it(run, monkeypatch):
    from webapp.explorer import text_search

    real = text_search.catch_up_fully
    monkeypatch.setattr(text_search, "catch_up_fully", lambda run_id: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        tasks.index_rollout_text(run.pk)
    assert failure(run).message == "text indexing failed: ZeroDivisionError: division by zero"
    monkeypatch.setattr(text_search, "catch_up_fully", real)
    tasks.index_rollout_text(run.pk)
    assert failure(run).state == "resolved"
    tasks.index_rollout_text(run.pk)  # delivered twice: nothing to clear, nothing recorded
    assert Alert.objects.filter(run=run, rule="processing_failed").count() == 1


def test_a_supervisors_text_index_that_fails_waits_out_its_backoff_and_never_stops_the_run(run):
    clock, tried = Clock(), []
    watch = Polled(run.pk, "text index", clock=clock)

    def broken(run_id):
        tried.append(clock.now)
        raise ValueError("unterminated tsquery")

    index_texts(run, broken, watch)
    index_texts(run, broken, watch)  # the next poll, within its backoff: not tried
    assert tried == [1000.0] and failure(run).message == "text indexing failed: ValueError: unterminated tsquery"
    clock.now += backoff(1)
    index_texts(run, broken, watch)
    assert len(tried) == 2 and failure(run).message.endswith("(2 attempts)")
    clock.now += backoff(2)
    index_texts(run, lambda run_id: 0, watch)
    assert failure(run).state == "resolved"


def test_at_the_trainers_end_a_failing_text_index_is_left_to_the_index_task_and_its_retries(run, monkeypatch):
    from workers.run_io import index_the_rest

    sent = []
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda name, args, queue, **kwargs: sent.append((name, args)))
    clock = Clock()
    watch = Polled(run.pk, "text index", clock=clock)
    index_texts(run, lambda run_id: 1 / 0, watch)
    index_the_rest(run, lambda run_id: 0, watch)  # still in its backoff: not tried here
    assert sent == [("workers.tasks.index_rollout_text", [run.pk])]
    clock.now += backoff(1)
    sent.clear()
    index_the_rest(run, lambda run_id: 0, watch)  # it works again: done here, nothing left to a task
    assert sent == [] and failure(run).state == "resolved"


def write_log(path, events):
    with open(path, "a") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


def test_a_batch_of_the_log_ingestion_cannot_store_is_tried_again_after_a_backoff_while_the_trainer_goes_on(
        run, tmp_path, monkeypatch, caplog):
    from workers import event_tail

    caplog.set_level(logging.ERROR)
    path = tmp_path / "events.jsonl"
    events = event_log(steps=3)
    write_log(path, events[:4])
    real = event_tail.ingest_events
    broken = {"on": True}

    def ingest(run, batch):
        if broken["on"]:
            raise KeyError("rollouts")
        return real(run, batch)

    monkeypatch.setattr(event_tail, "ingest_events", ingest)
    log = LogIngestion(run, path)
    clock = Clock()
    log.watch.clock = clock
    assert log.poll() is False
    first = failure(run)
    assert first.message == "ingestion of the trainer's log failed at step 1: KeyError: 'rollouts'"
    assert any(r.exc_info for r in caplog.records if "ingestion of the trainer's log failed" in r.getMessage())

    write_log(path, events[4:])  # the trainer trains on; its events wait in the log
    broken["on"] = False
    assert log.poll() is False  # within the backoff: not tried yet
    clock.now += backoff(1)
    assert log.poll() is True
    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == [e["seq"] for e in events]
    assert failure(run).state == "resolved"


def test_at_the_trainers_end_a_batch_that_still_fails_fails_the_run_after_its_attempts(run, tmp_path, monkeypatch,
                                                                                      settings):
    from workers import event_tail

    settings.TASK_RETRY_BASE_SECONDS = 0  # no waiting in a test
    path = tmp_path / "events.jsonl"
    write_log(path, event_log(steps=1))
    monkeypatch.setattr(event_tail, "ingest_events", lambda run, batch: {}["rollouts"])
    beats = []
    with pytest.raises(KeyError):
        LogIngestion(run, path).drain(lambda: beats.append(1))
    assert failure(run).message.endswith(f"({DRAIN_ATTEMPTS} attempts)")
