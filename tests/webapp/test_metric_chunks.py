"""Long series close into chunks rendered once (webapp/metrics/series.py) and read back exactly."""
import json
import threading

import pytest
from django.db import connection

from tests.factories import make_prompt_set
from webapp.alerts import engine
from webapp.metrics import series
from webapp.metrics.models import MetricChunk, MetricPoint
from webapp.runs.models import Run
from webapp.metrics.series import CHUNK_STEPS, OPEN_TAIL
from webapp.runs.queries import metric_series_of_runs
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000.0
# closes the ranges [0, C) and [C, 2C) of C = CHUNK_STEPS steps: the last step lies more than OPEN_TAIL past 2C
STEPS = 2 * CHUNK_STEPS + OPEN_TAIL + 200
C = CHUNK_STEPS


@pytest.fixture
def run(user):
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=STEPS,
                              created_by=user)


def log(steps, start_seq=0, value=lambda s: 1.0 / s):
    return [{"seq": start_seq + n, "time": T0 + s, "type": "metrics", "step": s,
             "values": {"entropy": value(s), "loss": None if s == 7 else 0.5 * s}} for n, s in enumerate(steps)]


def expected(steps, value=lambda s: 1.0 / s):
    return {"steps": list(steps), "values": [value(s) for s in steps], "times": [T0 + s for s in steps]}


def test_a_long_series_closes_into_chunks_and_reads_back_every_point(run):
    ingest_events(run, log(range(1, STEPS + 1)))
    run.refresh_from_db()
    assert run.series_closed_until == 2 * C
    chunks = MetricChunk.objects.filter(series__run=run, series__name="entropy").order_by("first_step")
    assert [(c.first_step, c.last_step) for c in chunks] == [(0, C - 1), (C, 2 * C - 1)]
    assert not MetricPoint.objects.filter(series__run=run, step__lt=2 * C).exists()  # not kept twice
    read = metric_series_of_runs([run.pk])[run.pk]
    assert read["entropy"] == expected(range(1, STEPS + 1))
    assert read["loss"]["values"][6] is None and read["loss"]["values"][7] == 4.0  # a missing value stays missing


def test_the_api_sends_closed_chunks_as_rendered_and_the_same_json_as_the_lists(api_client, run):
    ingest_events(run, log(range(1, STEPS + 1)))
    body = api_client.get(f"/api/runs/{run.pk}/metrics?names=entropy").json()
    assert body == {"run": run.pk, "metrics": {"entropy": expected(range(1, STEPS + 1))}}
    cut = api_client.get(f"/api/runs/{run.pk}/metrics?names=entropy&since_step={C + C // 2}").json()  # through a chunk
    assert cut["metrics"]["entropy"] == expected(range(C + C // 2 + 1, STEPS + 1))
    assert json.loads(series.read_json(run.pk, ["entropy"], STEPS - 10)) == {"entropy": expected(range(STEPS - 9, STEPS + 1))}


def test_a_closed_step_logged_again_reopens_its_chunk_and_keeps_the_later_value(run):
    ingest_events(run, log(range(1, STEPS + 1)))
    # a resumed trainer logs the steps from the middle of the second chunk on again, with other values
    again = log(range(C + C // 2, STEPS + 1), start_seq=STEPS, value=lambda s: 2.0)
    ingest_events(run, again)
    run.refresh_from_db()
    assert run.series_closed_until == 2 * C  # closed again once stored
    values = metric_series_of_runs([run.pk])[run.pk]["entropy"]
    assert values["steps"] == list(range(1, STEPS + 1))
    assert values["values"] == [1.0 / s for s in range(1, C + C // 2)] + [2.0] * (STEPS - C - C // 2 + 1)


def test_the_alert_rules_read_their_head_from_closed_chunks(run):
    ingest_events(run, log(range(1, STEPS + 1)))
    read = engine.evaluate_steps(run, [STEPS]).by_step  # what the rules read to judge the last step
    steps = sorted(read)
    assert steps[:3] == [1, 2, 3] and steps[-1] == STEPS
    assert read[1]["entropy"] == 1.0
    assert len(steps) == 21 + 201  # the first 21 steps and the last 201


def test_a_live_run_logging_one_step_per_call_closes_its_chunks_as_it_goes(run):
    for event in log(range(1, C + OPEN_TAIL + 3)):
        ingest_events(run, [event])
    run.refresh_from_db()
    assert run.series_closed_until == C
    assert MetricChunk.objects.filter(series__run=run, series__name="entropy").count() == 1
    assert metric_series_of_runs([run.pk])[run.pk]["entropy"] == expected(range(1, C + OPEN_TAIL + 3))


def test_the_run_page_overview_thins_packed_chunks_exactly_as_downsample_thins_the_full_series(run):
    from webapp.runs.queries import downsample

    ingest_events(run, log(range(1, STEPS + 1), value=lambda s: (s * 7919) % 113 / 113))
    ingest_events(run, [{"seq": STEPS, "time": T0 + 0.5, "type": "eval", "step": 1, "values": {"pass@16": 0.5}}])
    overview, thinned = series.overview(run.pk, 200)
    full = metric_series_of_runs([run.pk])[run.pk]
    assert sorted(overview) == sorted(full) and thinned == ["entropy", "loss"]
    for name, points in full.items():
        assert overview[name] == downsample(points, 200), name
    assert overview["loss"]["values"].count(None) <= 1  # the missing step-7 loss never wins a bucket


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite: the reads hold the write lock (IMMEDIATE), so "
                    "no ingestion can come in between them; one between would wait for them here and never end")
def test_the_overview_reads_one_state_while_a_new_series_is_ingested_between_its_reads(run, monkeypatch):
    # The run page read the series, then their chunks, then their open points, each in its own snapshot: a metric
    # first logged in between had points but no series, and the page answered 500 (KeyError).
    ingest_events(run, log(range(1, STEPS + 1)))
    unpack, late = series.unpack, []

    def ingest_a_new_metric():
        try:
            ingest_events(run, [{"seq": STEPS, "time": T0 + STEPS + 1, "type": "metrics", "step": STEPS + 1,
                                 "values": {"entropy": 0.5, "late_metric": 1.0}}])
        finally:
            connection.close()

    def unpack_while_ingestion_goes_on(packed):
        if not late:  # once, between the chunks' read and the open points' read
            late.append(threading.Thread(target=ingest_a_new_metric))
            late[0].start()
            late[0].join()
        return unpack(packed)

    monkeypatch.setattr(series, "unpack", unpack_while_ingestion_goes_on)
    metrics, _ = series.overview(run.pk, max_points=10_000)
    assert late and "entropy" in metrics
    assert metrics["entropy"]["steps"][-1] == STEPS  # the state when the read began: no half of the next step
    assert "late_metric" not in metrics
    monkeypatch.setattr(series, "unpack", unpack)
    assert series.overview(run.pk, max_points=10_000)[0]["late_metric"]["steps"] == [STEPS + 1]
