"""Hostile uploads to POST /api/prompt-sets: each is a 400 naming the row, field or limit, never a
500, and nothing is written. On PostgreSQL (CI) a NUL, an unpaired surrogate or an over-long id or
name reached the database and failed there."""
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from webapp import api
from webapp.prompts import parsing, uploads
from webapp.prompts.models import Prompt, PromptSet

pytestmark = pytest.mark.django_db


def upload(api_client, filename, data, name="hostile"):
    return api_client.post("/api/prompt-sets", {"name": name, "file": SimpleUploadedFile(filename, data)})


def parquet(table: pa.Table, **kwargs) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out, **kwargs)
    return out.getvalue()


HOSTILE = {
    "deep nesting": ("deep.json", b"[" * 100_000 + b"]" * 100_000, "nested more deeply"),
    "deep nesting in a line": ("deep.jsonl", b'{"prompt": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n", "line 1"),
    "an unpaired surrogate": ("s.jsonl", b'{"prompt": "2 + 2 = ?"}\n{"prompt": "x \\ud800 y"}\n',
                              "line 2: the prompt holds an unpaired surrogate"),
    "a surrogate in a label": ("s.json", b'[{"prompt": "1 + 1", "answer": "\\udfff"}]', "answer"),
    "a NUL in a JSON string": ("n.jsonl", b'{"prompt": "a\\u0000b"}\n', "NUL character (at character 2)"),
    "a NUL in a Parquet string": ("n.parquet", parquet(pa.table({"prompt": ["fine", "bad\x00bad"]})),
                                  "row 2: the prompt holds a NUL"),
    "an id over 200 characters": ("long-id.jsonl", json.dumps({"id": "x" * 201, "prompt": "1 + 1"}).encode(),
                                  "the id is 201 characters long; at most 200"),
    "a 2 MB prompt": ("big.jsonl", json.dumps({"prompt": "y" * 2_000_000}).encode(), "at most 32,000"),
    "too many rows": ("many.txt", b"1 + 1\n" * (parsing.MAX_ROWS + 1), f"at most {parsing.MAX_ROWS:,}"),
    "a Parquet file that decodes to far more than its size": (
        "bomb.parquet", parquet(pa.table({"prompt": ["a" * 1_000_000] * 250}), compression="zstd"),
        "decodes to"),
}


def refusal(api_client, response) -> dict:
    """A file up to the inline size is refused in the request (400); a larger one is accepted for a
    worker (202) and refused by it, the upload then carrying the error."""
    if response.status_code == 202:
        upload_id = response.json()["upload"]["id"]
        assert uploads.parse_upload(upload_id) == "failed"
        return api_client.get(f"/api/prompt-uploads/{upload_id}").json()["upload"]
    assert response.status_code == 400, response.content[:500]
    return response.json()


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_a_hostile_file_is_refused_naming_what_is_wrong_and_nothing_is_saved(api_client, case):
    filename, data, expected = HOSTILE[case]
    error = refusal(api_client, upload(api_client, filename, data))
    assert expected in error["error"], error
    assert not PromptSet.objects.exists() and not Prompt.objects.exists()


@pytest.mark.parametrize("name, expected", [("a\x00b", "control character '\\x00'"), ("n" * 201, "at most 200"),
                                            ("tab\there", "control character '\\t'")])
def test_a_hostile_set_name_is_a_400_naming_the_name(api_client, name, expected):
    response = upload(api_client, "ok.jsonl", b'{"prompt": "1 + 1"}\n', name=name)
    assert response.status_code == 400 and response.json()["field"] == "name"
    assert expected in response.json()["error"]
    assert not PromptSet.objects.exists()


def test_a_file_name_with_control_characters_is_kept_printable(api_client):
    response = upload(api_client, "we\x01ird\x00.jsonl", b'{"prompt": "1 + 1"}\n', name="")
    assert response.status_code == 201, response.content
    assert PromptSet.objects.get().source_filename == "weird.jsonl"


def test_a_deeply_nested_line_in_a_json_file_is_refused_naming_the_line(api_client):
    # found by the fuzz corpus (tests/webapp/test_upload_fuzz.py): the check for a single JSON object
    # in a .json file let Python's RecursionError through as a 500
    error = refusal(api_client, upload(api_client, "deep.json", b'{"prompt": ' + b"[" * 50_000 + b"]" * 50_000 + b"}\n"))
    assert error["error"].startswith("line 1: JSON nested more deeply"), error


def test_a_parquet_bomb_is_refused_from_its_metadata_before_anything_is_decoded(monkeypatch):
    data = parquet(pa.table({"prompt": ["a" * 1_000_000] * 250}), compression="zstd", use_dictionary=False)
    assert len(data) < 100_000  # 250 MB of text in a few kilobytes

    def no_decoding(*args, **kwargs):
        raise AssertionError("the file was decoded before its size was checked")

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", no_decoding)
    with pytest.raises(parsing.PromptFileError) as refused:
        parsing.parse_prompt_file("bomb.parquet", data, max_bytes=1_000_000)
    message = str(refused.value)
    assert message.startswith("the Parquet file's columns read (prompt) hold 250,0") and "by its metadata" in message
    assert "at most 10,000,000 bytes" in message


def test_only_the_columns_a_prompt_set_uses_are_read_from_parquet():
    # a large column nobody reads (a verl file's other fields) neither counts nor is decoded
    table = pa.table({"prompt": ["1 + 1", "2 + 2"], "answer": ["2", "4"], "junk": ["x" * 8_000_000] * 2})
    parsed = parsing.parse_prompt_file("with-junk.parquet", parquet(table, compression="zstd"), max_bytes=1_000_000)
    assert [(r.prompt, r.label) for r in parsed.rows] == [("1 + 1", "2"), ("2 + 2", "4")]


DICTIONARY_BOMB = """
import io, resource, sys
import pyarrow as pa, pyarrow.parquet as pq
from webapp.prompts.parsing import PromptFileError, parse_prompt_file

# 64 rows of one 4 MiB value, held once by the file's dictionary page: a few kilobytes
column = pa.DictionaryArray.from_arrays(pa.array([0] * 64, pa.int32()), pa.array(["x" * (4 * 2**20)]))
out = io.BytesIO()
pq.write_table(pa.table({"prompt": column}), out, compression="zstd", store_schema=False)
data = out.getvalue()
del column
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    parse_prompt_file("bomb.parquet", data, max_bytes=20 * 2**20)
except PromptFileError as exc:
    print(exc)
print(len(data), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def test_a_value_repeated_by_a_parquet_dictionary_is_measured_before_it_is_expanded():
    import subprocess
    import sys

    from django.conf import settings

    # in a process of its own, so its peak memory is the parse's: read dense, the first batch alone was 256 MiB
    done = subprocess.run([sys.executable, "-c", DICTIONARY_BOMB], cwd=settings.BASE_DIR, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    message, sizes = done.stdout.strip().splitlines()
    file_bytes, grown_mb = map(int, sizes.split())
    assert file_bytes < 10_000
    assert message == ("the Parquet file decodes to more than 209,715,200 bytes by row 51; at most 10 times the "
                       "upload limit is read")
    assert grown_mb < 64, f"the parse grew the process by {grown_mb} MB"


def test_rows_are_measured_through_dictionaries_lists_and_structs_as_they_decode():
    verl = pa.table({
        "prompt": pa.array([[{"role": "user", "content": "abc"}], [], None,
                            [{"role": "system", "content": None}, {"role": "user", "content": "hello"}]]),
        "reward_model": pa.array([{"ground_truth": "12"}, {"ground_truth": None}, None, {"ground_truth": "7"}]),
        "answer": pa.array(["x", None, "yy", "zzz"]).dictionary_encode(),
    })
    measured = sum(parsing._row_sizes(column) for column in verl.columns)

    def decoded(value):
        if isinstance(value, str):
            return len(value)
        if isinstance(value, dict):
            return sum(decoded(v) for v in value.values())
        if isinstance(value, list):
            return sum(decoded(v) for v in value)
        return 0

    expected = [decoded(row) for row in verl.to_pylist()]
    assert list(measured) == expected == [4 + 3 + 2 + 1, 0, 2, 6 + 4 + 5 + 1 + 3]


# (a lone surrogate cannot travel in a form: UTF-8 has no bytes for it; in JSON it can, test_hostile_run_requests.py)
@pytest.mark.parametrize("team", ["²", "9" * 5000, "a\x00b"])
def test_a_hostile_team_for_an_upload_is_a_4xx_naming_the_team(api_client, team):
    response = api_client.post("/api/prompt-sets", {"name": "t", "team": team,
                                                    "file": SimpleUploadedFile("p.txt", b"1 + 1\n")})
    assert response.status_code in (400, 404), response.content[:300]
    assert response.json()["field"] == "team"
    assert not PromptSet.objects.exists()


def multipart_with_file_name(file_name: str) -> tuple[bytes, str]:
    """A form as a browser sends it; the test client would cut the name to 255 characters first."""
    boundary = "evolabboundary"
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\nlong\r\n"
            f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{file_name}\"\r\n"
            f"Content-Type: text/plain\r\n\r\n1 + 1\n\r\n--{boundary}--\r\n")
    return body.encode(), f"multipart/form-data; boundary={boundary}"


def test_a_file_name_of_1000_characters_is_refused_saying_it_is_too_long(api_client):
    body, content_type = multipart_with_file_name("p" * 996 + ".txt")
    response = api_client.post("/api/prompt-sets", body, content_type=content_type)
    assert response.status_code == 400, response.content[:300]
    assert response.json() == {"error": api.PART_HEADERS_TOO_LONG, "field": "file"}
    assert "file name is too long" in api.PART_HEADERS_TOO_LONG
    assert not PromptSet.objects.exists()


def test_the_upload_page_says_the_file_name_is_too_long(client, user):
    client.force_login(user)
    body, content_type = multipart_with_file_name("p" * 996 + ".txt")
    response = client.post("/prompt-sets/", body, content_type=content_type)
    assert response.status_code == 400
    assert "The file name is too long" in response.content.decode()
    assert not PromptSet.objects.exists()
