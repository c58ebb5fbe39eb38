"""GET /api/runs/{id}/rollouts/export?format=jsonl|csv|parquet&<search filters> (DESIGN §4.6)."""
import csv
import io
import json

import pyarrow.parquet as pq
import pytest
from django.http import StreamingHttpResponse

from tests.factories import search_every_page
from webapp.explorer import exports

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(searched_run):
    return searched_run


every_page = search_every_page


def export(client, run, **params):
    response = client.get(f"/api/runs/{run.pk}/rollouts/export", params)
    assert isinstance(response, StreamingHttpResponse), response.content
    return response, b"".join(response.streaming_content)


def searched(client, run, **params):
    return [(r["step"], r["prompt_id"], r["index"]) for r in every_page(client, run, **params)[0]]


def test_jsonl_holds_what_the_search_finds_in_its_order(api_client, run):
    response, body = export(api_client, run, format="jsonl", valid="true", order="-reward")
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-r-rollouts-valid-by-reward-desc.jsonl"'
    rows = [json.loads(line) for line in body.decode().splitlines()]
    assert [(r["step"], r["prompt_id"], r["index"]) for r in rows] == searched(api_client, run, valid="true", order="-reward")
    assert list(rows[0]) == exports.ROLLOUT_COLUMNS and all(r["valid"] for r in rows)


def test_csv_has_a_header_and_one_exact_row_per_rollout(api_client, run):
    _, body = export(api_client, run, format="csv", step_min=2, step_max=2)
    rows = list(csv.DictReader(io.StringIO(body.decode())))
    assert len(rows) == 8 and {r["step"] for r in rows} == {"2"}
    first = every_page(api_client, run, step_min=2, step_max=2)[0][0]
    assert rows[0]["text"] == first["text"] and json.loads(rows[0]["extra"]) == first["extra"]
    assert rows[0]["reward"] == ("" if first["reward"] is None else repr(first["reward"]))
    assert rows[0]["valid"] in ("true", "false")


def test_the_three_formats_hold_the_same_rows(api_client, run):
    from webapp.prompts.models import Prompt

    Prompt.objects.filter(prompt_set=run.prompt_set, external_id="p1").update(label="1")  # some answers right
    params = {"order": "-novelty", "step_min": 2}
    lines = [json.loads(line) for line in export(api_client, run, format="jsonl", **params)[1].decode().splitlines()]
    table = pq.read_table(io.BytesIO(export(api_client, run, format="parquet", **params)[1]))
    assert table.column_names == exports.ROLLOUT_COLUMNS
    assert table.to_pylist() == [{**row, "extra": json.dumps(row["extra"])} for row in lines]
    cells = list(csv.reader(io.StringIO(export(api_client, run, format="csv", **params)[1].decode(), newline="")))
    assert cells[0] == exports.ROLLOUT_COLUMNS

    def as_csv(value):
        return "" if value is None else str(value).lower() if isinstance(value, bool) else repr(value) \
            if isinstance(value, float) else str(value)

    assert cells[1:] == [[json.dumps(row["extra"]) if key == "extra" else as_csv(row[key]) for key in exports.ROLLOUT_COLUMNS]
                         for row in lines]
    assert len(lines) == 16 and {r["correct"] for r in lines} == {True, False}


def test_each_rollout_carries_its_prompt_text_held_out_label_and_whether_its_answer_is_right(api_client, run):
    from webapp.prompts.models import Prompt

    Prompt.objects.filter(prompt_set=run.prompt_set, external_id="p1").update(label="1")
    rows = [json.loads(line) for line in export(api_client, run, format="jsonl")[1].decode().splitlines()]
    p1 = [r for r in rows if r["prompt_id"] == "p1"]
    assert {r["prompt"] for r in p1} == {"What is 2 + 3?"} and {r["label"] for r in p1} == {"1"}
    assert [r["correct"] for r in p1] == [r["answer"] == "1" for r in p1] and any(r["correct"] for r in p1)
    assert {(r["prompt"], r["label"]) for r in rows if r["prompt_id"] == "p2"} == {("What is 7 - 4?", "3")}
    assert list(rows[0])[-4:] == ["prompt", "label", "correct", "text"]  # the rollout's own text stays last


def test_a_prompt_set_without_labels_exports_no_label_or_correctness(api_client, run):
    type(run.prompt_set).objects.filter(pk=run.prompt_set.pk).update(has_labels=False)
    rows = [json.loads(line) for line in export(api_client, run, format="jsonl")[1].decode().splitlines()]
    assert {(r["label"], r["correct"]) for r in rows} == {(None, None)} and rows[0]["prompt"] == "What is 2 + 3?"


def test_the_file_is_named_after_the_run_and_the_filters(api_client, run):
    run.name = "My run: Äb/../x <y>"
    run.save(update_fields=["name"])

    def name(**params):
        return export(api_client, run, **params)[0]["Content-Disposition"].removeprefix('attachment; filename="')[:-1]

    stem = f"run-{run.pk}-my-run-ab-x-y-rollouts"
    assert name(format="csv") == f"{stem}.csv"
    assert name(format="csv", step_min=2, step_max=2, reward_min="0.5", reward_max="1") == f"{stem}-step-2-reward-0.5-1.csv"
    assert name(format="parquet", step_min=2, q="Carry ONE", in_majority="false", trained="true") == \
        f"{stem}-text-carry-one-steps-from-2-minority-trained.parquet"
    assert name(format="jsonl", prompt="p1", answer="=1/2", reward_max="-0.25", order="length") == \
        f"{stem}-prompt-p1-answer-1-2-reward-to--0.25-by-length.jsonl"
    long = name(format="csv", prompt_text="apples " * 80, answer="x" * 300)
    assert len(long) <= 160 and long.endswith(".csv") and long.startswith(stem)
    assert set(long) <= set("abcdefghijklmnopqrstuvwxyz0123456789.-")


def test_parquet_reads_back_as_the_search_results(api_client, run, monkeypatch):
    monkeypatch.setattr(exports, "EXPORT_PAGE", 5)  # several row groups, streamed one by one
    monkeypatch.setattr(exports, "FIRST_EXPORT_PAGE", 2)  # the first one short, so the download starts soon
    _, body = export(api_client, run, format="parquet", order="length")
    table = pq.read_table(io.BytesIO(body))
    assert table.num_rows == 24 and pq.ParquetFile(io.BytesIO(body)).num_row_groups == 6  # 2, then 5, 5, 5, 5 and 2
    rows = table.to_pylist()
    assert [(r["step"], r["prompt_id"], r["index"]) for r in rows] == searched(api_client, run, order="length")
    assert [r["length"] for r in rows] == sorted(r["length"] for r in rows)


def test_a_bad_filter_or_format_is_a_400_before_anything_is_sent(api_client, run):
    for params, field in [({"format": "xml"}, "format"), ({"reward_min": "nan"}, "reward_min"), ({"order": "x-y"}, "order")]:
        response = api_client.get(f"/api/runs/{run.pk}/rollouts/export", params)
        assert response.status_code == 400 and response.json()["field"] == field


def test_nothing_matching_is_an_empty_file(api_client, run):
    assert export(api_client, run, format="jsonl", answer="none such")[1] == b""
    assert export(api_client, run, format="csv", answer="none such")[1].decode().strip() == ",".join(exports.ROLLOUT_COLUMNS)
    assert pq.read_table(io.BytesIO(export(api_client, run, format="parquet", answer="none such")[1])).num_rows == 0


def test_a_download_is_sent_in_pieces_small_enough_to_queue(api_client, run, monkeypatch):
    whole = export(api_client, run, format="csv")[1]
    monkeypatch.setattr(exports, "PIECE_BYTES", 100)
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/export", {"format": "csv"})
    pieces = list(response.streaming_content)
    assert b"".join(pieces) == whole and len(pieces) > len(whole) // 100 and max(map(len, pieces)) <= 100


def test_pieces_keep_every_byte_of_text_and_binary_chunks():
    text = "é1€" * 300  # multi-byte characters cut between pieces still join back whole
    pieces = list(exports.in_pieces([text, b"\x00\xff", ""], size=7))
    assert b"".join(pieces) == text.encode() + b"\x00\xff" and max(map(len, pieces)) <= 7


def test_pieces_closed_early_close_what_they_read():
    closed = []

    def pages():
        try:
            yield "a" * 10
            yield "b" * 10
        finally:
            closed.append(True)

    read = pages()  # held here too, so only an explicit close ends it
    pieces = exports.in_pieces(read, size=4)
    assert next(pieces) == b"aaaa"
    pieces.close()  # the client went away: Django closes the response
    assert closed == [True]


def test_csv_text_a_spreadsheet_would_run_as_a_formula_is_neutralised_and_numbers_are_not():
    row = {"step": 3, "prompt_id": "@SUM(A1:A9)", "index": 0, "answer": "-3", "valid": True, "in_majority": False,
           "reward": -0.5, "advantage": -1.25, "length": 4, "used_for_training": True, "entropy": None, "extra": {},
           "prompt": "=1+1?", "label": "-2", "correct": False, "text": '=HYPERLINK("http://evil.example","click")'}
    others = [{**row, "text": text} for text in ("+1+1", "\t=1", "\r=1", "a = b", "", "a bare\rreturn")]
    cells = list(csv.DictReader(io.StringIO("".join(exports.rollouts_csv([[row, *others]])), newline="")))
    assert cells[0]["prompt_id"] == "'@SUM(A1:A9)" and cells[0]["answer"] == "'-3"
    assert (cells[0]["prompt"], cells[0]["label"], cells[0]["correct"]) == ("'=1+1?", "'-2", "false")
    assert cells[0]["text"] == "'=HYPERLINK(\"http://evil.example\",\"click\")"
    assert (cells[0]["reward"], cells[0]["advantage"], cells[0]["step"]) == ("-0.5", "-1.25", "3")  # numbers stay
    assert [c["text"] for c in cells[1:]] == ["'+1+1", "'\t=1", "'\r=1", "a = b", "", "a bare\rreturn"]  # in its row


def test_csv_metric_names_are_neutralised_too():
    cells = list(csv.reader(io.StringIO("".join(exports._csv(["name", "value"], [[("=cmd|' /C calc'!A0", -1.0)]])))))
    assert cells[1] == ["'=cmd|' /C calc'!A0", "-1.0"]


def test_a_text_search_export_waits_for_an_index_too_far_behind_to_hold_every_match(api_client, run, settings):
    from webapp.explorer import text_search

    settings.TEXT_SEARCH_UNINDEXED_MAX = 10
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/export", {"format": "jsonl", "q": "boxed"})
    assert response.status_code == 400 and response.json()["field"] == "q"
    assert "14 rollouts past the 10 unindexed ones a search reads were not searched" in response.json()["error"]
    text_search.catch_up(run.pk, limit=14)
    _, body = export(api_client, run, format="jsonl", q="boxed")
    assert len(body.decode().splitlines()) == len(searched(api_client, run, q="boxed")) > 0


def test_an_unknown_parameter_is_a_400_naming_it_not_a_file_of_every_rollout(api_client, run):
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/export", {"format": "csv", "step": "40"})
    assert response.status_code == 400 and response.json()["field"] == "step"
    assert "step_min" in response.json()["error"]
