import json

import pytest

from tests.factories import RunStream, TeamListener, charts_of, event_log, make_prompt_set
from webapp.metrics.models import MetricPoint
from webapp.runs.models import Group, Rollout, Run, RunEvent
from webapp.runs.ingestion import ingest_events
from workers.event_tail import EventTail

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(user):
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)


def snapshot(run):
    return (
        list(RunEvent.objects.filter(run=run).values_list("seq", "type", "step", "payload")),
        list(MetricPoint.objects.filter(series__run=run).order_by("series__clock", "series__name", "step")
             .values_list("series__clock", "series__name", "step", "value")),
        list(Group.objects.filter(run=run).values_list("seq", "step", "prompt_id", "majority_answer")),
        list(Rollout.objects.filter(group__run=run).values_list("group__seq", "index", "text", "reward", "advantage")),
    )


def test_replaying_the_same_log_twice_yields_identical_rows(run):
    events = event_log()
    assert ingest_events(run, events) == len(events)
    first = snapshot(run)
    assert ingest_events(run, events) == 0
    assert snapshot(run) == first
    assert len(first[3]) == 2 * 2 * 4  # steps × prompts × rollouts


def test_a_restarted_reader_skips_what_was_ingested_and_adds_the_rest(run):
    events = event_log(steps=3)
    ingest_events(run, events[:5])
    ingest_events(run, events)  # a restarted supervisor reads the log from the start
    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == [e["seq"] for e in events]
    run.refresh_from_db()
    assert run.last_seq == events[-1]["seq"] and run.last_step == 3


def test_it_stores_metrics_by_name_and_step(run):
    ingest_events(run, event_log())
    entropy = list(MetricPoint.objects.filter(series__run=run, series__name="entropy").values_list("step", "value"))
    assert entropy == [(1, 1.0), (2, 0.5)]


def test_it_stores_a_diverged_loss_as_missing_rather_than_failing(run):
    events = [{"seq": 0, "time": 1.0, "type": "metrics", "step": 1, "values": {"loss": float("nan")}}]
    ingest_events(run, events)
    assert MetricPoint.objects.get(series__run=run, series__name="loss").value is None


def test_it_pushes_each_new_event_to_the_runs_live_stream(run):
    stream = RunStream(run.pk)
    ingest_events(run, event_log(steps=1))
    messages = stream.receive()
    kinds = [m["type"] for m in messages]
    # the trainer's statuses are stored, not pushed: the run's state reaches the page from its lifecycle alone
    assert kinds == ["group", "group", "metrics"]
    assert messages[2]["values"]["entropy"] == 1.0


def test_a_trainer_that_says_running_again_is_pushed_as_a_resume_after_the_step_it_had_logged(run):
    # the run page places its marker there; its own idea of the last step may be ahead (an API
    # read that raced the socket)
    stream = RunStream(run.pk)
    first = event_log(steps=2)[:-2]
    ingest_events(run, first)
    assert "resume" not in [m["type"] for m in stream.receive()]  # its first start
    resumed = {"seq": len(first), "time": 1_700_000_100.0, "type": "status", "state": "running", "message": "resumed"}
    ingest_events(run, [resumed] + event_log(steps=1, start_seq=len(first) + 1, start_step=3))
    messages = stream.receive()
    assert [m for m in messages if m["type"] in ("resume", "status")] == [
        {"type": "resume", "step": 2, "time": 1_700_000_100.0}]


def test_one_poll_tells_the_run_page_its_events_and_the_team_run_list_its_progress(run):
    page, run_list = RunStream(run.pk), TeamListener(run.team_id)
    ingest_events(run, event_log(steps=1))
    assert [m["type"] for m in page.receive()][2] == "metrics"
    (progress,) = run_list.receive()
    assert progress["type"] == "run" and progress["last_step"] == 1 and progress["health"]["entropy"] == 1.0


def test_the_tail_leaves_a_half_written_line_for_the_next_read(tmp_path):
    path = tmp_path / "events.jsonl"
    first, second = event_log(steps=1)[:2]
    path.write_text(json.dumps(first) + "\n" + json.dumps(second)[:10])
    tail = EventTail(path)
    assert [e["seq"] for e in tail.read_new()] == [0]
    with open(path, "a") as f:
        f.write(json.dumps(second)[10:] + "\n")
    assert [e["seq"] for e in tail.read_new()] == [1]
    assert tail.read_new() == []


def test_the_tail_of_a_missing_log_is_empty(tmp_path):
    assert EventTail(tmp_path / "events.jsonl").read_new() == []


def test_it_stores_model_output_containing_nul_characters(run):
    # The tiny byte-level policy can emit a NUL; PostgreSQL refuses it in text and JSON columns.
    events = event_log(steps=1)
    group = events[1]
    group["majority_answer"] = "5\x00"
    group["rollouts"][0].update(text="so \x00 \\boxed{5\x00}", answer="5\x00", extra={"note": "a\x00b"})
    assert ingest_events(run, events) == len(events)
    rollout = Rollout.objects.get(group__run=run, group__seq=group["seq"], index=0)
    assert rollout.text == "so \ufffd \\boxed{5\ufffd}" and rollout.answer == "5\ufffd" and rollout.extra == {"note": "a\ufffdb"}
    assert Group.objects.get(run=run, seq=group["seq"]).majority_answer == "5\ufffd"


def test_a_replayed_log_is_skipped_by_its_seq_without_reading_the_stored_events(run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    events = event_log(steps=3)
    ingest_events(run, events)
    with CaptureQueriesContext(connection) as queries:
        assert ingest_events(run, events) == 0  # a restarted supervisor replays the whole log
    statements = [q["sql"].lower() for q in queries.captured_queries]
    assert not any("runs_runevent" in sql for sql in statements), statements
    assert not any(sql.startswith(("insert", "update")) for sql in statements), statements


def test_a_stale_run_object_still_skips_what_another_reader_stored(run):
    events = event_log(steps=2)
    ingest_events(Run.objects.get(pk=run.pk), events)  # another supervisor's copy of the row
    assert run.last_seq == -1  # this copy never saw that
    assert ingest_events(run, events) == 0 and run.last_seq == events[-1]["seq"]
    assert RunEvent.objects.filter(run=run).count() == len(events)


def test_a_long_log_is_read_and_ingested_in_bounded_batches_exactly_once(run, tmp_path):
    events = event_log(steps=40)
    path = tmp_path / "events.jsonl"
    lines = [json.dumps(e) + "\n" for e in events]
    path.write_text("".join(lines))
    budget = 4 * max(len(line) for line in lines)
    batches = list(EventTail(path, batch_bytes=budget).batches())
    assert len(batches) > 5
    assert all(sum(len(json.dumps(e)) + 1 for e in batch) <= budget for batch in batches)
    assert [e["seq"] for batch in batches for e in batch] == [e["seq"] for e in events]
    for batch in batches + batches[:3]:  # and a replay of the first ones
        ingest_events(run, batch)
    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == [e["seq"] for e in events]
    assert Rollout.objects.filter(group__run=run).count() == 40 * 2 * 4


def test_a_line_longer_than_the_batch_is_still_read_whole(tmp_path):
    events = event_log(steps=1)
    path = tmp_path / "events.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    tail = EventTail(path, batch_bytes=16)  # smaller than any line
    assert [e["seq"] for batch in tail.batches() for e in batch] == [e["seq"] for e in events]


def test_ingestion_commits_without_waiting_for_the_disk_and_only_ingestion_does(run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "postgresql":
        pytest.skip("synchronous_commit is PostgreSQL's")
    with CaptureQueriesContext(connection) as queries:
        ingest_events(run, event_log(steps=1))
    statements = [q["sql"].lower() for q in queries.captured_queries if q["sql"].upper() != "BEGIN"]
    assert statements[0].startswith("set local synchronous_commit to off")  # before anything is written
    with connection.cursor() as cursor:  # SET LOCAL ended with the ingestion transaction
        cursor.execute("SHOW synchronous_commit")
        assert cursor.fetchone()[0] == "on"


def test_each_metric_value_and_rollout_is_stored_once_not_again_in_the_event_payload(run):
    events = event_log(steps=1)
    ingest_events(run, events)
    payloads = {}
    for kind, payload in RunEvent.objects.filter(run=run).order_by("seq").values_list("type", "payload"):
        payloads.setdefault(kind, []).append(payload)
    # MetricPoint, Group and Rollout rows hold these events' values
    assert payloads["metrics"] == [{}] and payloads["group"] == [{}, {}]
    # status, stage, checkpoint, log and eval events keep theirs
    assert [p["state"] for p in payloads["status"]] == ["running", "succeeded"]
    assert payloads["checkpoint"][0]["path"] == "checkpoints/step-1"
    assert MetricPoint.objects.filter(series__run=run, step=1, series__name="entropy").exists()
    assert Rollout.objects.filter(group__run=run, group__step=1).count() == 2 * 4


def test_a_step_logged_again_after_a_resume_keeps_the_later_value_and_time(run):
    # A trainer killed after step 2 and resumed from its step-1 checkpoint logs step 2 again.
    first = [{"seq": 0, "time": 10.0, "type": "metrics", "step": 1, "values": {"entropy": 1.0}},
             {"seq": 1, "time": 20.0, "type": "metrics", "step": 2, "values": {"entropy": 0.9}}]
    again = [{"seq": 2, "time": 30.0, "type": "metrics", "step": 2, "values": {"entropy": 0.7}},
             {"seq": 3, "time": 40.0, "type": "metrics", "step": 3, "values": {"entropy": 0.6}}]
    ingest_events(run, first)
    ingest_events(run, again)
    series = charts_of(run)["entropy"]
    assert series == {"steps": [1, 2, 3], "values": [1.0, 0.7, 0.6], "times": [10.0, 30.0, 40.0]}


def test_a_step_logged_twice_in_one_batch_keeps_the_later_value(run):
    events = [{"seq": 0, "time": 10.0, "type": "metrics", "step": 1, "values": {"entropy": 1.0}},
              {"seq": 1, "time": 20.0, "type": "metrics", "step": 1, "values": {"entropy": 0.5}}]
    ingest_events(run, events)
    assert charts_of(run)["entropy"] == {"steps": [1], "values": [0.5], "times": [20.0]}


def test_an_eval_of_a_step_already_logged_gets_its_own_series_and_time(run):
    ingest_events(run, [{"seq": 0, "time": 10.0, "type": "metrics", "step": 4, "values": {"entropy": 1.0}}])
    ingest_events(run, [{"seq": 1, "time": 15.0, "type": "eval", "step": 4, "values": {"pass@16": 0.5}}])
    series = charts_of(run)
    assert series["eval/pass@16"] == {"steps": [4], "values": [0.5], "times": [15.0]}
    assert series["entropy"] == {"steps": [4], "values": [1.0], "times": [10.0]}


def test_a_point_is_one_narrow_row_of_its_series(run):
    ingest_events(run, event_log(steps=2))
    point = MetricPoint.objects.filter(series__run=run, series__name="entropy").first()
    # (series, step) is the primary key: no id, no run, no name and no seq repeated on every point
    assert [f.column for f in MetricPoint._meta.concrete_fields] == ["series_id", "step", "value"]
    assert point.pk == (point.series_id, point.step)


def test_points_and_rollouts_are_written_with_copy_on_postgresql(run):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    if connection.vendor != "postgresql":
        pytest.skip("COPY is PostgreSQL's")
    with CaptureQueriesContext(connection) as queries:
        ingest_events(run, event_log(steps=1))
    inserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT")]
    assert not any("metricpoint" in sql or "runs_rollout" in sql for sql in inserts)
    assert MetricPoint.objects.filter(series__run=run).exists() and Rollout.objects.filter(group__run=run).exists()


@pytest.mark.django_db(transaction=True)
def test_ingestion_analyses_a_bulk_loaded_table_once_a_tenth_of_it_changed(user, monkeypatch):
    import time

    from django.db import connection

    from tests.waiting import wait_until
    from webapp.runs import table_statistics

    if connection.vendor != "postgresql":
        pytest.skip("planner statistics are PostgreSQL's")
    monkeypatch.setattr(table_statistics, "_last_check", time.monotonic())  # ingestion's own checks wait
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=30, created_by=user)
    ingest_events(run, event_log(steps=20, group_size=16))  # 640 rollouts: past 50 + 10% of the table
    rollouts = Rollout._meta.db_table

    def changed():
        with connection.cursor() as cursor:
            cursor.execute("SELECT n_mod_since_analyze FROM pg_stat_user_tables WHERE relname = %s", [rollouts])
            return cursor.fetchone()[0]

    # the statistics system reports within a second
    wait_until(lambda: changed() >= 640, 10, every=0.2, what="the statistics system to count the 640 rollouts",
               last=changed)
    assert rollouts in table_statistics.keep_statistics(force=True)
    assert changed() == 0
    assert rollouts not in table_statistics.keep_statistics(force=True)  # nothing new since


def test_it_stores_model_output_with_an_unpaired_surrogate(run):
    # a log line may hold "\ud800" (a JSON escape json.loads keeps as it is): UTF-8 cannot encode it
    events = event_log(steps=1)
    group = events[1]
    group["rollouts"][0].update(text="so \ud800 \\boxed{5}", answer="5\udfff", extra={"note": "a\ud83db"})
    assert ingest_events(run, events) == len(events)
    rollout = Rollout.objects.get(group__run=run, group__seq=group["seq"], index=0)
    assert rollout.text == "so \ufffd \\boxed{5}" and rollout.answer == "5\ufffd" and rollout.extra == {"note": "a\ufffdb"}
