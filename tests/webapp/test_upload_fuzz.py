"""The upload fuzz corpus: a few hundred hostile prompt files, built here from a fixed seed, each
uploaded through the API and through the upload page. Every answer is a success that saved the whole
file or a refusal that saved nothing: never a 500 (the test client re-raises a view's exception), never
a partial write. Files over the inline size are read by the worker's code, called as its task calls it."""
import csv
import io
import json
import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from webapp.prompts import parsing, uploads
from webapp.prompts.models import Prompt, PromptSet, PromptUpload

pytestmark = pytest.mark.django_db

# Values that broke something once, or might: control and format characters, surrogates, numbers
# JSON cannot hold, markup, lengths at and over each limit.
NASTY = {
    "nul": "a\x00b", "lone high surrogate": "x\ud800y", "lone low surrogate": "\udfff", "bell": "ring\x07",
    "escape": "\x1b[31mred", "del": "a\x7fb", "rtl override": "abc\u202edcba", "zero width": "\u200b\u200d\ufeff",
    "bom inside": "\ufeffprompt", "line separator": "one\u2028two", "crlf": "a\r\nb", "lone cr": "a\rb",
    "tab": "a\tb", "script": "<script>alert(1)</script>", "attribute": '"><img src=x onerror=alert(1)>',
    "css": "</style><style>*{display:none}", "template": "{{ 7*7 }}{% debug %}", "formula": "=HYPERLINK(\"x\")",
    "sql": "'); DROP TABLE prompts_prompt; --", "emoji": "🧮" * 50, "combining": "e" + "\u0301" * 500,
    "whitespace only": " \t ", "empty": "", "quote soup": "\"'`\\", "json in text": '{"prompt": "inner"}',
    "limit": "p" * parsing.MAX_PROMPT_CHARS, "over limit": "p" * (parsing.MAX_PROMPT_CHARS + 1),
    "id limit": "i" * parsing.MAX_ID_CHARS, "id over limit": "i" * (parsing.MAX_ID_CHARS + 1),
    "path": "../../etc/passwd", "null word": "null", "nan word": "NaN",
}
# JSON values in a field that should hold text
ODD_JSON = {"infinity": "Infinity", "minus infinity": "-Infinity", "nan": "NaN", "huge": "1e400", "long int": "9" * 5000,
            "negative zero": "-0", "true": "true", "null": "null", "object": '{"a": 1}', "array": "[1, 2]",
            "deep array": "[" * 5000 + "]" * 5000, "nested chat": '[{"role": "user", "content": [1]}]'}


def jsonl_file(rows):
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8", "surrogatepass")


def json_file(rows):
    return json.dumps(rows, ensure_ascii=False).encode("utf-8", "surrogatepass")


def csv_file(rows):
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=sorted({k for r in rows for k in r}))
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8", "surrogatepass")


def txt_file(rows):
    return "\n".join(str(r["prompt"]) for r in rows).encode("utf-8", "surrogatepass")


def parquet_file(rows):
    columns = sorted({k for r in rows for k in r})
    return _parquet(pa.table({c: [r.get(c) for r in rows] for c in columns}))


WRITERS = {"jsonl": jsonl_file, "json": json_file, "csv": csv_file, "txt": txt_file, "parquet": parquet_file}


def corpus() -> list[tuple[str, str, bytes, str]]:
    """(case, filename, bytes, set name)"""
    rng = random.Random(20261124)
    base = [{"id": f"q{i}", "prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1, 6)]
    files = []
    for value_name, value in NASTY.items():
        for field in ("prompt", "id", "answer"):
            rows = [dict(r) for r in base]
            rows[2][field] = value
            for ext, writer in WRITERS.items():
                if {"prompt": ext == "txt", "id": ext != "jsonl", "answer": ext != "parquet"}[field]:
                    continue  # the other writers carry the value the same way
                try:
                    data = writer(rows)
                except (UnicodeEncodeError, pa.ArrowException):
                    continue  # the format cannot carry the value at all
                files.append((f"{value_name} in the {field} ({ext})", f"f.{ext}", data, "fuzz"))
    for value_name, literal in ODD_JSON.items():
        for field in ("prompt", "id", "answer"):
            line = '{"id": "q9", "prompt": "fine", "answer": "1"}'.replace(
                {"prompt": '"fine"', "id": '"q9"', "answer": '"1"'}[field], literal)
            files.append((f"{value_name} as the {field} (jsonl)", "f.jsonl", (line + "\n").encode(), "fuzz"))
            if field == "prompt":
                files.append((f"{value_name} as the {field} (json)", "f.json", f"[{line}]".encode(), "fuzz"))
    structural = {
        "empty file": b"", "only whitespace": b" \n\t\n", "only a BOM": b"\xef\xbb\xbf", "a UTF-16 file": "prompt\nhi\n".encode("utf-16"),
        "latin-1 bytes": "caf\xe9 ?\n".encode("latin-1"), "random bytes": bytes(rng.randrange(256) for _ in range(4096)),
        "gzip bytes": b"\x1f\x8b\x08\x00" + bytes(200), "zip bytes": b"PK\x03\x04" + bytes(200),
        "a Parquet header only": b"PAR1", "a truncated Parquet file": parquet_file(base)[:-40] + b"PAR1",
        "a JSON object not a list": b'{"prompt": "x", "answer": 1, "more": {"a": [1]}}',
        "unclosed JSON": b'[{"prompt": "x"', "trailing comma": b'[{"prompt": "x"},]', "a JSON string": b'"just text"',
        "a JSON number": b"42", "an empty JSON list": b"[]", "a list of numbers": b"[1, 2, 3]", "nulls": b"[null, null]",
        "duplicate keys": b'[{"prompt": "a", "prompt": "b"}]', "duplicate ids": jsonl_file([{"id": "1", "prompt": "a"}, {"id": "1", "prompt": "b"}]),
        "csv without a prompt column": b"question,answer\n1+1,2\n", "csv unbalanced quote": b'prompt\n"1 + 1\n',
        "csv ragged rows": b"prompt,answer\n1+1\n2+2,4,extra,extra\n", "csv NUL": b"prompt\na\x00b\n",
        "csv a million columns": b"prompt," + b",".join(b"c%d" % i for i in range(20000)) + b"\nx\n",
        "csv only a header": b"prompt,answer\n", "a 1 MB line": b"x" * (1024 * 1024 + 10) + b"\n",
        "deep JSON": b"[" * 100_000 + b"]" * 100_000, "deep JSONL line": b'{"prompt": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n",
        "too many rows": b"1 + 1\n" * (parsing.MAX_ROWS + 1),
        "a Parquet bomb": _parquet_bomb(),
        "a Parquet list column": _parquet(pa.table({"prompt": [["a", "b"], ["c"]]})),
        "a Parquet struct column": _parquet(pa.table({"prompt": [{"x": 1}, {"x": 2}]})),
        "a Parquet int column": _parquet(pa.table({"prompt": [1, 2]})),
        "a Parquet binary column": _parquet(pa.table({"prompt": pa.array([b"\xff\xfe", b"ok"], pa.binary())})),
        "a Parquet with no rows": _parquet(pa.table({"prompt": pa.array([], pa.string())})),
        "a Parquet null prompt": _parquet(pa.table({"prompt": ["a", None]})),
        # found by the structural fuzzing (test_upload_structure_fuzz.py): each was a 500
        "a Parquet whose prompts are all null": _parquet(pa.table({"prompt": pa.array([None, None], pa.string())})),
        "a Parquet naming prompt twice": _parquet(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])],
                                                                       names=["prompt", "prompt"])),
        "a Parquet date past Python's calendar": _parquet(pa.table({"prompt": ["x"],
                                                                     "answer": pa.array([10**15], pa.date64())})),
        "verl parquet with a NUL system message": _parquet(pa.table({"prompt": [[{"role": "system", "content": "s\x00"},
                                                                                 {"role": "user", "content": "u"}]]})),
        "verl parquet without a user": _parquet(pa.table({"prompt": [[{"role": "system", "content": "s"}]]})),
    }
    for n, (case, data) in enumerate(structural.items()):
        # under its own extension's reader and under another's (or none): the sniffing is attacked too
        for ext in ("jsonl", "json", "csv", "txt", "parquet", "bin")[n % 3::3]:
            files.append((f"{case} as .{ext}", f"f.{ext}", data, "fuzz"))
    # seeded mutations of valid files: bytes flipped, cut short, doubled
    valid = [jsonl_file(base), json_file(base), csv_file(base), parquet_file(base)]
    for n in range(30):
        data = bytearray(rng.choice(valid))
        kind = n % 3
        if kind == 0:
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
        elif kind == 1:
            del data[rng.randrange(1, len(data)):]
        else:
            data.extend(bytes(data))
        files.append((f"mutation {n}", rng.choice(["f.jsonl", "f.json", "f.csv", "f.parquet", "f"]), bytes(data), "fuzz"))
    for name_case, name in {"NUL": "a\x00b", "over-long": "n" * 201, "newline": "a\nb",
                            "markup": "<b>bold</b>", "emoji": "🧮 set"}.items():
        files.append((f"a set name with {name_case}", "f.jsonl", jsonl_file(base), name))
    return files


def _parquet(table):
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def _parquet_bomb():
    out = io.BytesIO()
    pq.write_table(pa.table({"prompt": ["a" * 1_000_000] * 250}), out, compression="zstd")
    return out.getvalue()


CORPUS = corpus()


def test_the_corpus_is_a_few_hundred_files():
    assert len(CORPUS) >= 300


def settle(api_client, response, before: int) -> str:
    """'saved' or 'refused'; checks that a success saved every row and a refusal saved nothing."""
    body = response.json()
    saved = response.status_code == 201
    if response.status_code == 202:
        upload_id = body["upload"]["id"]
        state = uploads.parse_upload(upload_id)
        body = api_client.get(f"/api/prompt-uploads/{upload_id}").json()["upload"]
        assert state == body["state"] and state in ("done", "failed"), body
        saved = state == "done"
        if saved:
            body = body["prompt_set"]
        else:
            assert body["error"] and body["field"], body
    elif not saved:
        assert response.status_code == 400, body
        assert body["error"] and body["field"] in ("file", "name"), body
    if saved:
        assert Prompt.objects.filter(prompt_set_id=body["id"]).count() == body["row_count"] > 0
        assert PromptSet.objects.count() == before + 1
        return "saved"
    assert PromptSet.objects.count() == before
    return "refused"


@pytest.mark.parametrize("case, filename, data, name", CORPUS, ids=[c[0] for c in CORPUS])
def test_a_fuzzed_file_is_saved_whole_or_refused_with_a_reason_through_the_api_and_the_page(
        api_client, user, settings, case, filename, data, name):
    settings.PROMPT_UPLOAD_INLINE_MAX_BYTES = 64 * 1024  # the larger files take the worker's path
    before = PromptSet.objects.count()
    response = api_client.post("/api/prompt-sets", {"name": name, "file": SimpleUploadedFile(filename, data)})
    assert response["Content-Type"] == "application/json"
    by_api = settle(api_client, response, before)

    browser = Client()  # the page takes a session, never the API client's token
    browser.force_login(user)
    before = PromptSet.objects.count()
    page = browser.post("/prompt-sets/", {"name": name, "file": SimpleUploadedFile(filename, data)})
    if page.status_code == 302 and "/uploads/" in page["Location"]:
        upload = PromptUpload.objects.order_by("-id").first()
        uploads.parse_upload(upload.pk)
        page = browser.get(page["Location"])
    if page.status_code == 302:
        by_page = "saved"
        assert PromptSet.objects.count() == before + 1
    else:
        assert page.status_code in (200, 400)
        assert b'role="alert"' in page.content
        assert PromptSet.objects.count() == before
        by_page = "refused"
    assert by_page == by_api, case
