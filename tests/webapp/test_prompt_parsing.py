"""Tests for webapp.prompts.parsing: every upload format, and every bad file."""
import csv
import io
import json
import math
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from webapp.prompts.parsing import ParsedPromptSet, PromptFileError, parse_prompt_file

DATASETS = Path(__file__).resolve().parents[3] / "shared" / "datasets"
LIMIT = 10_000_000


def parse(filename: str, data: bytes | str, max_bytes: int = LIMIT) -> ParsedPromptSet:
    if isinstance(data, str):
        data = data.encode()
    return parse_prompt_file(filename, data, max_bytes)


def error(filename: str, data: bytes | str, max_bytes: int = LIMIT) -> PromptFileError:
    with pytest.raises(PromptFileError) as info:
        parse(filename, data, max_bytes)
    return info.value


def shared(name: str) -> bytes:
    path = DATASETS / name
    if not path.exists():
        pytest.skip(f"shared dataset {path} is not available (expected next to the repo)")
    return path.read_bytes()


def parquet_bytes(columns: dict) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(pa.table(columns), buffer)
    return buffer.getvalue()


def verl_columns(prompts, truths, indexes):
    return {
        "prompt": [[{"role": "system", "content": "Reason step by step."},
                    {"role": "user", "content": p}] for p in prompts],
        "reward_model": [{"ground_truth": t, "style": "rule"} for t in truths],
        "extra_info": [{"index": i, "split": "train"} for i in indexes],
    }


# --- formats that parse ----------------------------------------------------------

def test_it_parses_the_aime24_json_array_into_30_labelled_rows():
    parsed = parse("aime24.json", shared("aime24.json"))
    assert parsed.format == "json"
    assert len(parsed.rows) == 30
    assert parsed.has_labels
    first = parsed.rows[0]
    assert (first.id, first.label, first.position) == ("0", "204", 1)
    assert first.prompt.startswith("Every morning Aya goes for a $9$-kilometer-long walk")
    assert [row.position for row in parsed.rows] == list(range(1, 31))


@pytest.mark.parametrize("name, count", [("amc.json", 83), ("math500.json", 500)])
def test_it_parses_the_other_shared_json_sets_keeping_answers_as_strings(name, count):
    parsed = parse(name, shared(name))
    assert len(parsed.rows) == count
    assert all(isinstance(row.label, str) and row.label for row in parsed.rows)
    assert len({row.id for row in parsed.rows}) == count


def test_it_parses_the_verl_parquet_taking_the_user_message_and_ground_truth():
    parsed = parse("aime24_verl.parquet", shared("aime24_verl.parquet"))
    aime = parse("aime24.json", shared("aime24.json"))
    assert parsed.format == "verl_parquet"
    assert len(parsed.rows) == 480
    assert parsed.rows[0].prompt == aime.rows[0].prompt
    assert "step by step" not in parsed.rows[0].prompt
    assert [row.label for row in parsed.rows[:30]] == [row.label for row in aime.rows]


def test_it_keeps_the_system_message_of_a_chat_style_prompt():
    parsed = parse("train.parquet", parquet_bytes(verl_columns(["1+1?"], ["2"], ["q-a"])))
    assert (parsed.rows[0].prompt, parsed.rows[0].system) == ("1+1?", "Reason step by step.")
    aime = parse("aime24_verl.parquet", shared("aime24_verl.parquet"))
    assert aime.rows[0].system == "Please reason step by step, and put your final answer within \\boxed{}."


def test_a_prompt_without_a_system_message_has_none():
    parsed = parse("p.jsonl", b'{"prompt": [{"role": "user", "content": "2+2?"}]}\n{"prompt": "3+3?"}\n')
    assert [row.system for row in parsed.rows] == [None, None]


def test_it_rejects_a_system_message_that_is_not_text():
    data = json.dumps({"prompt": [{"role": "system", "content": 5}, {"role": "user", "content": "q"}]}).encode()
    with pytest.raises(PromptFileError) as error:
        parse("p.jsonl", data)
    assert error.value.line == 1 and error.value.field == "prompt" and "system message" in str(error.value)


def test_it_gives_verl_rows_position_ids_when_their_extra_info_index_repeats():
    parsed = parse("aime24_verl.parquet", shared("aime24_verl.parquet"))
    assert [row.id for row in parsed.rows] == [f"row-{n}" for n in range(1, 481)]


def test_it_uses_the_verl_extra_info_index_as_id_when_it_is_unique():
    data = parquet_bytes(verl_columns(["1+1?", "2+2?"], ["2", "4"], ["q-a", "q-b"]))
    parsed = parse("train.parquet", data)
    assert parsed.format == "verl_parquet"
    assert [(r.id, r.prompt, r.label) for r in parsed.rows] == [
        ("q-a", "1+1?", "2"), ("q-b", "2+2?", "4")]


def test_it_takes_the_last_user_message_of_a_multi_turn_chat_prompt():
    messages = [{"role": "user", "content": "first"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": "second"}]
    parsed = parse("chat.jsonl", json.dumps({"prompt": messages}))
    assert parsed.rows[0].prompt == "second"


def test_it_parses_a_plain_parquet_with_numeric_answers_as_strings():
    data = parquet_bytes({"prompt": ["a?", "b?"], "answer": [7, 12], "id": [10, 11]})
    parsed = parse("set.parquet", data)
    assert parsed.format == "parquet"
    assert [(r.id, r.label) for r in parsed.rows] == [("10", "7"), ("11", "12")]


def test_it_treats_null_and_nan_parquet_answers_as_missing_labels():
    data = parquet_bytes({"prompt": ["a?", "b?", "c?"], "answer": [1.5, None, math.nan]})
    assert [r.label for r in parse("set.parquet", data).rows] == ["1.5", None, None]


def test_it_parses_jsonl_skipping_blank_lines_with_consecutive_positions():
    text = '{"prompt": "a", "answer": 1}\n\n  \n{"prompt": "b", "extra": [1]}\r\n'
    parsed = parse("set.jsonl", text)
    assert parsed.format == "jsonl"
    assert [(r.id, r.prompt, r.label, r.position) for r in parsed.rows] == [
        ("1", "a", "1", 1), ("2", "b", None, 2)]


def test_it_reads_a_json_file_that_holds_json_lines():
    parsed = parse("set.json", '{"prompt": "a"}\n{"prompt": "b"}\n')
    assert parsed.format == "jsonl"
    assert [r.prompt for r in parsed.rows] == ["a", "b"]


def test_it_keeps_the_literal_text_of_numeric_json_answers():
    parsed = parse("set.json", '[{"prompt": "a", "answer": 142.0}, {"prompt": "b", '
                               '"answer": 1e3}, {"prompt": "c", "answer": 7}]')
    assert [r.label for r in parsed.rows] == ["142.0", "1e3", "7"]


def test_it_accepts_label_as_an_alternative_to_answer():
    parsed = parse("set.jsonl", '{"prompt": "a", "label": "x"}\n{"prompt": "b", "answer": "y"}')
    assert [r.label for r in parsed.rows] == ["x", "y"]


def test_it_parses_csv_with_quoted_multiline_fields_and_commas():
    text = 'id,prompt,answer\nq1,"Line one,\nline ""two""",5\nq2,plain,\n'
    parsed = parse("set.csv", text)
    assert parsed.format == "csv"
    assert [(r.id, r.prompt, r.label) for r in parsed.rows] == [
        ("q1", 'Line one,\nline "two"', "5"), ("q2", "plain", None)]


@pytest.mark.parametrize("separator", [",", "\t", ";"])
def test_it_reads_csv_separated_by_commas_tabs_or_semicolons(separator):
    text = f"Prompt{separator} Answer\r\nwhat?{separator}42\r\n"
    parsed = parse("set.csv", text)
    assert [(r.prompt, r.label) for r in parsed.rows] == [("what?", "42")]


def test_it_parses_plain_text_one_prompt_per_non_blank_line():
    parsed = parse("set.txt", "first prompt\r\n\n   \nsecond prompt\n")
    assert parsed.format == "text"
    assert [(r.id, r.prompt, r.label, r.position) for r in parsed.rows] == [
        ("1", "first prompt", None, 1), ("2", "second prompt", None, 2)]
    assert not parsed.has_labels


def test_it_reports_labels_when_at_least_one_row_has_one():
    assert parse("a.jsonl", '{"prompt": "a"}\n{"prompt": "b", "answer": "1"}').has_labels
    assert not parse("a.jsonl", '{"prompt": "a"}\n{"prompt": "b", "answer": "  "}').has_labels


def test_it_strips_a_utf8_byte_order_mark():
    parsed = parse("set.csv", "\ufeffprompt,answer\nhi,1\n".encode())
    assert [(r.prompt, r.label) for r in parsed.rows] == [("hi", "1")]


@pytest.mark.parametrize("content, fmt", [
    ('[{"prompt": "a"}]', "json"),
    ('{"prompt": "a"}\n', "jsonl"),
    ("prompt,answer\na,1\n", "csv"),
    (parquet_bytes({"prompt": ["a"]}), "parquet"),
])
def test_it_sniffs_the_format_when_the_extension_is_unknown(content, fmt):
    parsed = parse("upload.dat", content)
    assert parsed.format == fmt
    assert parsed.rows[0].prompt == "a"


def test_it_generates_ids_that_never_collide_with_explicit_ones():
    rows = [{"prompt": "a", "id": "2"}, {"prompt": "b"}, {"prompt": "c", "id": "row-2"}]
    parsed = parse("set.json", json.dumps(rows))
    assert [r.id for r in parsed.rows] == ["2", "row-2-2", "row-2"]


# --- bad files -----------------------------------------------------------------------

def test_it_rejects_an_empty_file():
    exc = error("set.json", b"")
    assert str(exc) == "the file is empty"
    assert exc.line is None


def test_it_rejects_a_file_over_the_size_limit_before_parsing_it():
    exc = error("set.txt", b"\xff" * 12_300_000, max_bytes=10_000_000)
    assert str(exc) == "the file is 12.3 MB, over the 10 MB limit"


def test_it_gives_exact_sizes_when_rounding_would_hide_the_overflow():
    exc = error("set.txt", b"x" * 10_000_001, max_bytes=10_000_000)
    assert str(exc) == "the file is 10,000,001 bytes, over the 10,000,000-byte limit"


def test_it_rejects_invalid_json_on_a_jsonl_line_naming_that_line():
    lines = ['{"prompt": "p%d"}' % n for n in range(1, 7)] + ['{"prompt": "p7" "id": 1}']
    exc = error("set.jsonl", "\n".join(lines))
    assert str(exc) == "line 7: invalid JSON (Expecting ',' delimiter at column 17)"
    assert exc.line == 7


def test_it_reports_the_line_of_invalid_json_inside_an_array():
    exc = error("set.json", '[\n  {"prompt": "a"},\n  {"prompt": "b",}\n]')
    assert str(exc).startswith("line 3: invalid JSON (Expecting property name")
    assert exc.line == 3


def test_it_rejects_a_row_without_a_prompt_key_naming_the_keys_found():
    exc = error("set.json", '[{"prompt": "a"}, {"question": "b", "answer": 1}]')
    assert str(exc) == "row 2: no 'prompt' key (keys found: 'question', 'answer')"
    assert (exc.line, exc.field) == (2, "prompt")


def test_it_rejects_a_csv_without_a_prompt_column_naming_the_columns():
    exc = error("set.csv", "question,answer\nwhat?,1\n")
    assert str(exc) == ("line 1: the header has no 'prompt' column "
                        "(columns found: 'question', 'answer')")
    assert exc.field == "prompt"


def test_it_rejects_a_parquet_without_a_prompt_column_naming_the_columns():
    exc = error("set.parquet", parquet_bytes({"question": ["a"], "answer": ["1"]}))
    assert str(exc) == "no 'prompt' column (columns found: 'question', 'answer')"
    assert exc.field == "prompt"


@pytest.mark.parametrize("filename, content, where", [
    ("set.json", '[{"prompt": "a"}, {"prompt": "b"}, {"prompt": "  "}]', "row 3"),
    ("set.jsonl", '{"prompt": "a"}\n\n{"prompt": ""}\n', "line 3"),
    ("set.csv", 'prompt,id\n"a\nb",1\n" \n ",2\n', "line 4"),
    ("set.parquet", parquet_bytes({"prompt": ["a", "\t"]}), "row 2"),
])
def test_it_rejects_an_empty_or_blank_prompt_naming_the_row(filename, content, where):
    exc = error(filename, content)
    assert str(exc) == f"{where}: empty prompt"
    assert exc.field == "prompt"


@pytest.mark.parametrize("value, kind", [(5, "a number"), ({"text": "a"}, "an object"),
                                         (None, "null"), (True, "a boolean")])
def test_it_rejects_a_prompt_that_is_not_a_string(value, kind):
    exc = error("set.jsonl", '{"prompt": "ok"}\n' + json.dumps({"prompt": value}))
    assert str(exc) == f"line 2: the prompt must be a string, not {kind}"
    assert exc.field == "prompt"


def test_it_rejects_a_chat_prompt_without_a_user_message():
    exc = error("set.json", json.dumps([{"prompt": [{"role": "system", "content": "x"}]}]))
    assert str(exc) == "row 1: the chat-style prompt has no message with role 'user'"


def test_it_rejects_an_answer_that_is_not_a_string_or_a_number():
    exc = error("set.json", '[{"prompt": "a", "answer": [1, 2]}]')
    assert str(exc) == "row 1: 'answer' must be a string or a number, not a list"
    assert exc.field == "answer"


def test_it_rejects_duplicate_ids_naming_both_rows():
    rows = [{"prompt": f"p{n}", "id": "q1" if n in (2, 9) else f"x{n}"} for n in range(1, 11)]
    exc = error("set.json", json.dumps(rows))
    assert str(exc) == "rows 2 and 9 share the id 'q1'"
    assert (exc.line, exc.field) == (9, "id")


def test_it_rejects_duplicate_ids_in_csv_naming_both_lines():
    exc = error("set.csv", "id,prompt\n7,a\n8,b\n7,c\n")
    assert str(exc) == "lines 2 and 4 share the id '7'"


def test_it_rejects_duplicate_ids_in_a_plain_parquet():
    exc = error("set.parquet", parquet_bytes({"prompt": ["a", "b"], "id": ["k", "k"]}))
    assert str(exc) == "rows 1 and 2 share the id 'k'"


def test_it_rejects_non_utf8_bytes_naming_the_line_and_byte_offset():
    exc = error("set.txt", b"fine\nalso fine\nbad \xff byte\n")
    assert str(exc) == ("line 3: the file is not UTF-8 text "
                        "(byte 0xff at byte offset 19 cannot be decoded)")
    assert exc.line == 3


def test_it_rejects_nul_bytes_in_a_text_format():
    exc = error("set.jsonl", b'{"prompt": "a"}\n\x00\x00\x00')
    assert str(exc) == ("line 2: contains a NUL byte (at byte offset 16); "
                        "this looks like a binary file, not text")


def test_it_rejects_a_file_that_is_neither_parquet_nor_text():
    exc = error("upload.bin", bytes(range(256)))
    assert str(exc) == "cannot tell the format of 'upload.bin': it is neither Parquet nor UTF-8 text"


def test_it_rejects_a_parquet_extension_with_content_that_is_not_parquet():
    exc = error("set.parquet", b"prompt,answer\na,1\n")
    assert str(exc).startswith("the file is not a valid Parquet file (")


def test_it_rejects_an_unsupported_extension_with_undetectable_content():
    exc = error("notes.md", "# Some prompts\n\n- one\n- two\n")
    assert str(exc).startswith("cannot tell the format of 'notes.md': use a .json, .jsonl,")


@pytest.mark.parametrize("filename, content", [
    ("set.json", "[]"), ("set.jsonl", "\n\n \n"), ("set.csv", "prompt,answer\n"),
    ("set.txt", "\n   \n"), ("set.parquet", parquet_bytes({"prompt": pa.array([], pa.string())})),
])
def test_it_rejects_a_file_with_zero_prompts(filename, content):
    assert str(error(filename, content)) == "the file has no prompts"


def test_it_rejects_a_csv_row_with_more_fields_than_the_header():
    exc = error("set.csv", "prompt,answer\na,1\nb,2,3\n")
    assert str(exc) == "line 3: 3 fields, but the header has 2 columns"


def test_it_rejects_malformed_csv_quoting_naming_the_line():
    exc = error("set.csv", 'prompt\nok\n"bad"quote\n')
    assert str(exc).startswith("line 3: invalid CSV (")


def test_it_rejects_a_json_array_element_that_is_not_an_object():
    exc = error("set.json", '[{"prompt": "a"}, "b"]')
    assert str(exc) == "row 2: expected an object with a 'prompt' key, found a string"


def test_it_rejects_a_single_pretty_printed_json_object():
    exc = error("set.json", '{\n  "data": [{"prompt": "a"}]\n}\n')
    assert str(exc).startswith("the file holds a single JSON object")


def test_its_errors_are_value_errors_whose_message_is_the_sentence():
    exc = error("set.txt", "")
    assert isinstance(exc, ValueError)
    assert exc.message == str(exc)


# --- properties ----------------------------------------------------------------------

texts = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1).filter(str.strip)
labels = st.none() | texts.map(str.strip)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(texts, labels), min_size=1, max_size=8))
def test_it_round_trips_any_prompts_and_labels_through_jsonl(pairs):
    data = "\n".join(json.dumps({"prompt": p, "answer": a}, ensure_ascii=False) for p, a in pairs)
    parsed = parse("set.jsonl", data)
    assert [(r.prompt, r.label) for r in parsed.rows] == pairs


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(texts, labels), min_size=1, max_size=8))
def test_it_round_trips_any_prompts_and_labels_through_csv(pairs):
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)
    writer.writerow(["prompt", "answer"])
    writer.writerows([p, a or ""] for p, a in pairs)
    parsed = parse("set.csv", buffer.getvalue())
    assert [(r.prompt, r.label) for r in parsed.rows] == pairs


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["a.json", "a.jsonl", "a.csv", "a.txt", "a.parquet", "a.bin"]),
       st.binary(min_size=1, max_size=300) | texts.map(str.encode))
def test_it_raises_only_prompt_file_errors_on_arbitrary_bytes(filename, data):
    try:
        parsed = parse(filename, data)
    except PromptFileError as exc:
        assert str(exc)
    else:
        assert parsed.rows and all(r.prompt.strip() for r in parsed.rows)


def test_it_reports_its_progress_every_few_thousand_rows_and_at_the_end(monkeypatch):
    from webapp.prompts import parsing

    monkeypatch.setattr(parsing, "PROGRESS_EVERY_ROWS", 10)
    seen = []
    data = "\n".join(f"prompt {i}" for i in range(25)).encode()
    parsing.parse_prompt_file("p.txt", data, 10**6, progress=lambda checked, total: seen.append((checked, total)))
    assert seen == [(0, 25), (10, 25), (20, 25), (25, 25)]
