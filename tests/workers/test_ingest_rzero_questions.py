"""R-Zero question sets arrive as `questions` events and become RZeroQuestion rows, idempotently."""
import pytest

from tests.factories import RunStream, make_prompt_set
from webapp.runs.models import Run, RunEvent, RZeroQuestion
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db(transaction=True)


def row(i, kept=False, question="Q{i}?"):
    return {"id": f"it1-q{i}", "question": question.format(i=i) if question else None, "text": f"<question>Q{i}?"
            "</question>", "p_hat": 0.4 if question else None, "pseudo_label": "7" if question else None,
            "answers": ["7", "7", None] if question else [], "kept": kept}


def questions(seq, rows, offset=0, total=None, iteration=1):
    return {"seq": seq, "time": 1.0 + seq, "type": "questions", "iteration": iteration, "offset": offset,
            "total": total if total is not None else offset + len(rows), "questions": rows}


@pytest.fixture
def run(user):
    return Run.objects.create(name="rz", method="r_zero", prompt_set=make_prompt_set(user), max_steps=1, created_by=user)


def stored(run):
    return list(RZeroQuestion.objects.filter(run=run).values_list("iteration", "index", "question_id", "kept"))


def test_a_pool_written_in_several_events_is_stored_in_pool_order(run):
    pool = [row(0, kept=True), row(1), row(2, question=None)]
    ingest_events(run, [questions(0, pool[:2], total=3), questions(1, pool[2:], offset=2, total=3)])
    assert stored(run) == [(1, 0, "it1-q0", True), (1, 1, "it1-q1", False), (1, 2, "it1-q2", False)]
    assert run.rzero_questions(1) == pool
    assert run.rzero_iterations() == [1]


def test_replaying_the_log_stores_every_question_once(run):
    events = [questions(0, [row(0), row(1)], total=3), questions(1, [row(2)], offset=2, total=3)]
    ingest_events(run, events)
    first = stored(run)
    assert ingest_events(run, events) == 0
    ingest_events(run, events[1:])  # a restarted supervisor re-reading part of the log
    assert stored(run) == first


def test_the_rows_live_in_their_own_table_not_twice_in_the_event_payload(run):
    ingest_events(run, [questions(0, [row(0)])])
    payload = RunEvent.objects.get(run=run, seq=0).payload
    assert "questions" not in payload and payload["iteration"] == 1 and payload["total"] == 1


def test_a_set_written_again_supersedes_the_earlier_one(run):
    # a questions phase cut short by a hard kill runs again on resume and writes its set from offset 0 again
    ingest_events(run, [questions(0, [row(0), row(1)], total=2)])
    ingest_events(run, [questions(1, [row(5, kept=True)], total=1)])
    assert stored(run) == [(1, 0, "it1-q5", True)]


def test_a_question_set_is_announced_on_the_runs_channel(run):
    stream = RunStream(run.pk)
    ingest_events(run, [questions(0, [row(0, kept=True), row(1)], iteration=2)])
    (message,) = stream.receive()
    assert message == {"type": "questions", "iteration": 2, "offset": 0, "count": 2, "total": 2}
