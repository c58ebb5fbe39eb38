"""Prompt files fuzzed by their structure, not only their bytes: hypothesis builds Parquet tables (any Arrow type
under the column names a prompt set reads, names repeated, nested chat lists and structs, values at the edges of
their types) and JSON / JSONL / CSV rows of any JSON shape. Parsing each ends in a prompt set or in a
PromptFileError naming what is wrong: never another exception, which the upload API and page answered with a 500
(a Parquet file naming `prompt` twice, a date past Python's calendar)."""
import csv
import datetime
import decimal
import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from webapp.prompts import parsing

NAMES = st.sampled_from(["prompt", "answer", "label", "id", "reward_model", "extra_info", "index", "ground_truth",
                         "role", "content", "other"])
TEXT = st.text(max_size=12)
INT64 = st.integers(-2**63, 2**63 - 1)

# Arrow types with a strategy for their Python values (None anywhere: every column is nullable)
SCALARS = [
    (pa.string(), TEXT), (pa.large_string(), TEXT), (pa.binary(), st.binary(max_size=8)),
    (pa.int64(), INT64), (pa.int8(), st.integers(-128, 127)), (pa.uint64(), st.integers(0, 2**64 - 1)),
    (pa.float64(), st.floats(allow_nan=True, allow_infinity=True)), (pa.float32(), st.floats(width=32)),
    (pa.bool_(), st.booleans()),
    (pa.date32(), st.integers(-2**31, 2**31 - 1)), (pa.date64(), st.integers(-2**62, 2**62)),
    (pa.timestamp("ms"), st.integers(-2**62, 2**62)), (pa.timestamp("us", tz="UTC"), st.integers(-2**62, 2**62)),
    (pa.duration("s"), st.integers(-2**62, 2**62)), (pa.time64("us"), st.integers(0, 86_400 * 10**6 - 1)),
    (pa.decimal128(38, 3), st.decimals(min_value=-10**30, max_value=10**30, places=3, allow_nan=False)),
]


@st.composite
def arrow_columns(draw, depth=0):
    """(type, strategy of its values): a scalar, or a list, struct or map of columns."""
    choice = draw(st.integers(0, 3 if depth < 2 else 0))
    if choice == 0:
        kind, values = draw(st.sampled_from(SCALARS))
        return kind, _raw(kind, values)
    if choice == 1:
        kind, values = draw(arrow_columns(depth + 1))
        return pa.list_(kind), st.lists(values, max_size=3)
    if choice == 2:
        names = draw(st.lists(NAMES, min_size=1, max_size=3, unique=True))
        children = [draw(arrow_columns(depth + 1)) for _ in names]
        return (pa.struct([(n, k) for n, (k, _) in zip(names, children)]),
                st.fixed_dictionaries({n: v for n, (_, v) in zip(names, children)}))
    kind, values = draw(arrow_columns(depth + 1))
    return pa.map_(pa.string(), kind), st.lists(st.tuples(TEXT, values), max_size=2)


def _raw(kind, values):
    """Temporal values given as their integer storage, the way a file holds them (hypothesis' datetimes stop where
    Python's do; a file's do not)."""
    if pa.types.is_temporal(kind):
        return values.map(lambda n: ("raw", n))
    return values


def _array(kind, rows):
    if pa.types.is_temporal(kind) and not (pa.types.is_list(kind) or pa.types.is_struct(kind)):
        storage = pa.int32() if kind in (pa.date32(),) else pa.int64()
        return pa.array([None if r is None else r[1] for r in rows], storage).view(kind)
    return pa.array([_plain(r) for r in rows], kind)


def _plain(value):
    """Nested temporal values as Python objects where Python has them, else None."""
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "raw":
        return None
    if isinstance(value, list):
        return [_plain(v) if not isinstance(v, tuple) or v[0] == "raw" else (v[0], _plain(v[1])) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


@st.composite
def parquet_files(draw):
    names = draw(st.lists(NAMES, min_size=1, max_size=4))
    if draw(st.booleans()):
        names[0] = "prompt"
    rows = draw(st.integers(1, 4))
    arrays = []
    for _ in names:
        kind, values = draw(arrow_columns())
        arrays.append(_array(kind, [draw(st.none() | values) for _ in range(rows)]))
    out = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, names=names), out)
    return out.getvalue()


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NAMES, inner, max_size=3),
                           max_leaves=8)
ROWS = st.lists(st.dictionaries(NAMES, JSON_VALUES, max_size=4) | JSON_VALUES, min_size=1, max_size=4)


def parses_or_says_why(filename: str, data: bytes) -> None:
    try:
        parsing.parse_prompt_file(filename, data, max_bytes=10**7)
    except parsing.PromptFileError as exc:
        assert exc.message


FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.data_too_large])


@FUZZ
@given(parquet_files())
def test_any_parquet_table_is_read_or_refused_with_a_reason(data):
    parses_or_says_why("f.parquet", data)


@FUZZ
@given(ROWS, st.sampled_from(["json", "jsonl"]))
def test_any_json_shape_is_read_or_refused_with_a_reason(rows, ext):
    text = json.dumps(rows) if ext == "json" else "".join(json.dumps(r) + "\n" for r in rows)
    parses_or_says_why(f"f.{ext}", text.encode())


@FUZZ
@given(st.lists(st.lists(st.text(max_size=6), max_size=4), min_size=1, max_size=4), st.sampled_from([",", "\t", ";"]))
def test_any_csv_table_is_read_or_refused_with_a_reason(rows, delimiter):
    out = io.StringIO()
    csv.writer(out, delimiter=delimiter).writerows([["prompt", "answer", "id"], *rows])
    data = out.getvalue().encode("utf-8", "surrogatepass")
    parses_or_says_why("f.csv", data)


@pytest.mark.parametrize("case, table", [
    ("the prompt column twice", pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["prompt", "prompt"])),
    ("a date past Python's calendar", pa.table({"prompt": ["x"], "answer": pa.array([10**15], pa.date64())})),
    ("a duration past Python's", pa.table({"prompt": ["x"], "id": pa.array([2**62], pa.duration("s"))})),
])
def test_the_files_that_once_failed_are_refused_naming_the_problem(case, table):
    out = io.BytesIO()
    pq.write_table(table, out)
    with pytest.raises(parsing.PromptFileError) as refused:
        parsing.parse_prompt_file("f.parquet", out.getvalue(), max_bytes=10**7)
    assert refused.value.field in ("prompt", "answer", "id", None), refused.value.message
