"""GET /api/runs/{id}/metrics/export?format=csv|parquet (DESIGN §4.6): every point, streamed."""
import csv
import io
from datetime import datetime, timezone

import pyarrow.parquet as pq
import pytest
from django.http import StreamingHttpResponse

from tests.factories import make_prompt_set
from webapp.metrics import series
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000.0


@pytest.fixture
def run(user):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2000, created_by=user)
    events = [{"seq": n, "time": T0 + n, "type": "metrics", "step": n + 1,
               "values": {"entropy": 1.0 / (n + 1), "loss": float("nan") if n == 1 else 0.1 * n}} for n in range(3)]
    events.append({"seq": 3, "time": T0 + 10, "type": "eval", "step": 3, "values": {"pass@1": 0.25}})
    ingest_events(run, events)
    return run


def export(client, run, query):
    response = client.get(f"/api/runs/{run.pk}/metrics/export{query}")
    assert isinstance(response, StreamingHttpResponse), response.content
    return response, b"".join(response.streaming_content)


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def when(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, timezone.utc)


def test_csv_has_one_row_per_point_with_its_event_time_in_iso_8601_utc(api_client, run):
    response, body = export(api_client, run, "?format=csv")
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-r-metrics.csv"'
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows[0] == ["name", "step", "value", "time"]
    assert iso(T0) == "2023-11-14T22:13:20.000Z"
    assert rows[1:] == [
        ["entropy", "1", "1.0", iso(T0)], ["entropy", "2", "0.5", iso(T0 + 1)], ["entropy", "3", repr(1 / 3), iso(T0 + 2)],
        ["eval/pass@1", "3", "0.25", iso(T0 + 10)],
        ["loss", "1", "0.0", iso(T0)], ["loss", "2", "", iso(T0 + 1)], ["loss", "3", repr(0.1 * 2), iso(T0 + 2)],
    ]


def test_parquet_reads_back_as_the_same_points_with_utc_timestamps(api_client, run):
    response, body = export(api_client, run, "?format=parquet&names=entropy,loss")
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-r-metrics-entropy-loss.parquet"'
    table = pq.read_table(io.BytesIO(body))
    assert str(table.schema.field("time").type) == "timestamp[ms, tz=UTC]"
    table = table.to_pydict()
    assert table["name"] == ["entropy"] * 3 + ["loss"] * 3
    assert table["step"] == [1, 2, 3, 1, 2, 3]
    assert table["value"][:3] == [1.0, 0.5, 1 / 3] and table["value"][4] is None
    assert table["time"] == [when(T0), when(T0 + 1), when(T0 + 2)] * 2


def test_the_wide_layout_has_a_row_per_step_and_a_column_per_metric(api_client, run):
    response, body = export(api_client, run, "?format=csv&layout=wide")
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-r-metrics-wide.csv"'
    rows = list(csv.reader(io.StringIO(body.decode())))
    assert rows == [
        ["step", "time", "entropy", "eval/pass@1", "loss"],
        ["1", iso(T0), "1.0", "", "0.0"],
        ["2", iso(T0 + 1), "0.5", "", ""],  # no eval at step 2; the loss was NaN
        ["3", iso(T0 + 2), repr(1 / 3), "0.25", repr(0.1 * 2)],  # the step's time: its first point's
    ]


def test_the_wide_parquet_holds_the_same_table(api_client, run):
    _, body = export(api_client, run, "?format=parquet&layout=wide&names=eval/pass@1,entropy")
    table = pq.read_table(io.BytesIO(body))
    assert table.column_names == ["step", "time", "entropy", "eval/pass@1"]
    assert table.to_pydict() == {"step": [1, 2, 3], "time": [when(T0), when(T0 + 1), when(T0 + 2)],
                                 "entropy": [1.0, 0.5, 1 / 3], "eval/pass@1": [None, None, 0.25]}


def test_a_long_wide_export_comes_in_several_row_groups(api_client, user, monkeypatch):
    from webapp.explorer import exports

    monkeypatch.setattr(exports, "WIDE_STEPS_PER_PIECE", 7)
    run = Run.objects.create(name="w", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2000, created_by=user)
    ingest_events(run, [{"seq": n, "time": T0 + n, "type": "metrics", "step": n + 1,
                         "values": {"a": float(n), **({"b": -float(n)} if n % 2 else {})}} for n in range(20)])
    _, body = export(api_client, run, "?format=parquet&layout=wide")
    assert pq.ParquetFile(io.BytesIO(body)).num_row_groups == 3
    table = pq.read_table(io.BytesIO(body)).to_pydict()
    assert table["step"] == list(range(1, 21)) and table["a"] == [float(n) for n in range(20)]
    assert table["b"] == [-float(n) if n % 2 else None for n in range(20)]
    rows = list(csv.reader(io.StringIO(export(api_client, run, "?layout=wide")[1].decode())))
    assert len(rows) == 21 and rows[2] == ["2", iso(T0 + 1), "1.0", "-1.0"]


def test_a_long_run_exports_closed_chunks_and_open_points_alike(api_client, user):
    run = Run.objects.create(name="long", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2000, created_by=user)
    steps = series.CHUNK_STEPS + series.OPEN_TAIL + 10
    ingest_events(run, [{"seq": n, "time": T0 + n, "type": "metrics", "step": n + 1, "values": {"entropy": float(n)}}
                        for n in range(steps)])
    _, body = export(api_client, run, "?format=parquet")
    table = pq.read_table(io.BytesIO(body)).to_pydict()
    assert table["step"] == list(range(1, steps + 1)) and table["value"] == [float(n) for n in range(steps)]


def test_an_unknown_format_is_a_400_naming_the_field(api_client, run):
    response = api_client.get(f"/api/runs/{run.pk}/metrics/export?format=xlsx")
    assert response.status_code == 400 and response.json()["field"] == "format" and "'xlsx'" in response.json()["error"]
    response = api_client.get(f"/api/runs/{run.pk}/metrics/export?layout=tall")
    assert response.status_code == 400 and response.json()["field"] == "layout" and "'tall'" in response.json()["error"]


def test_a_run_without_metrics_exports_just_the_header(api_client, user):
    empty = Run.objects.create(name="e", method="ttrl", prompt_set=make_prompt_set(user, name="e"), max_steps=2, created_by=user)
    assert export(api_client, empty, "")[1] == b"name,step,value,time\r\n"  # RFC 4180 line ends
    assert pq.read_table(io.BytesIO(export(api_client, empty, "?format=parquet")[1])).num_rows == 0
    assert export(api_client, empty, "?layout=wide")[1] == b"step,time\r\n"
    assert pq.read_table(io.BytesIO(export(api_client, empty, "?format=parquet&layout=wide")[1])).num_rows == 0


def test_an_unknown_parameter_is_a_400_naming_it_not_a_whole_export(api_client, run):
    # `step=40` read as a filter it is not gave every step's points, with nothing to say so
    response = api_client.get(f"/api/runs/{run.pk}/metrics/export?format=csv&step=40")
    assert response.status_code == 400 and response.json()["field"] == "step"
    assert "'step'" in response.json()["error"] and "names" in response.json()["error"]


def test_the_wide_layout_s_header_neutralises_metric_names_a_spreadsheet_would_run(api_client, user):
    """A trainer names its metrics (any MLflow key): in the wide layout they are the header's cells."""
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=5, created_by=user)
    hostile = ["+SUM(1)", "=cmd|' /C calc'!A0", "@x", "-2+3"]
    ingest_events(run, [{"seq": 0, "time": T0, "type": "metrics", "step": 1,
                         "values": {**{name: 1.0 for name in hostile}, "entropy": 0.5}}])
    header = next(csv.reader(io.StringIO(export(api_client, run, "?format=csv&layout=wide")[1].decode())))
    assert header == ["step", "time", "'+SUM(1)", "'-2+3", "'=cmd|' /C calc'!A0", "'@x", "entropy"]
