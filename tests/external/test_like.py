"""LIKE and ILIKE of MLflow's search filters (webapp/external/like.py) agree with SQL's meaning, checked against a
plain dynamic-programming matcher, and take time linear in the value whatever the pattern."""
import time

import pytest
from hypothesis import given, settings, strategies as st

from webapp.external.like import casefolded, like


def reference(pattern: str, value: str) -> bool:
    """SQL's LIKE by dynamic programming over (pattern prefix, value prefix): slow, plainly right."""
    reachable = [True] + [False] * len(value)  # the empty pattern prefix matches the empty value prefix
    for p in pattern:
        if p == "%":
            for i in range(1, len(value) + 1):
                reachable[i] = reachable[i] or reachable[i - 1]
        else:
            reachable = [False] + [reachable[i] and (p == "_" or p == value[i]) for i in range(len(value))]
    return reachable[-1]


@pytest.mark.parametrize("pattern, value, expected", [
    ("abc", "abc", True),
    ("abc", "abcd", False),
    ("", "", True),
    ("", "a", False),
    ("%", "", True),
    ("%", "anything", True),
    ("%%", "", True),
    ("a%%b", "ab", True),
    ("a%%b", "axxb", True),
    ("_", "", False),
    ("_", "x", True),
    ("__", "x", False),
    ("a_c", "abc", True),
    ("a_c", "ac", False),
    ("%b_d%", "abcde", True),
    ("%b_d%", "abcxe", False),
    ("abcdef", "abc", False),  # the pattern is longer than the value
    ("a%a", "a", False),  # prefix and suffix may not overlap
    ("a%a", "aa", True),
    ("ab%ba", "aba", False),
    ("ab%ba", "abba", True),
    ("%a%a%a%a%b", "a" * 300, False),
    ("%a%a%a%a%b", "a" * 300 + "b", True),
    ("%_a_%", "xay", True),
    ("%a_a%", "aaa", True),
    ("q%_en%", "qwen-grpo", True),
    ("100%", "100% sure", True),  # % is a wildcard wherever it is: there is no escape
])
def test_worked_examples(pattern, value, expected):
    assert like(pattern, value) is expected
    assert reference(pattern, value) is expected


@settings(max_examples=600, deadline=None)
@given(st.text("ab%_", max_size=9), st.text("abc", max_size=12))
def test_it_agrees_with_the_reference_on_small_alphabets(pattern, value):
    assert like(pattern, value) == reference(pattern, value)


@settings(max_examples=300, deadline=None)
@given(st.text("aAbBß%_", max_size=8), st.text("aAbBßẞ", max_size=10))
def test_ilike_is_like_on_both_sides_folded_one_character_for_one(pattern, value):
    assert like(pattern, value, fold=True) == reference(casefolded(pattern), casefolded(value))
    assert len(casefolded(value)) == len(value)


def test_ilike_ignores_case():
    assert like("QWEN%", "qwen-grpo", fold=True) and not like("QWEN%", "qwen-grpo")
    assert like("%STRASSE", "strasse", fold=True)
    assert like("_", "İ", fold=True)  # its lower case is two characters: kept as one


@pytest.mark.parametrize("pattern, value", [
    ("%a%a%a%a%b", "a" * 8000),  # a tag value's limit
    ("%" * 250 + "b", "a" * 8000),
    ("%_" * 200 + "b", "a" * 8000),
    # every letter of the pattern is in the value, and no place matches: the scan reads the whole value
    ("%a_a_a_b%", "ab" * 4000),
    ("%" + "a_" * 120 + "b%", "ab" * 4000),
    ("%a_b%" * 100, "ab" * 4000),
])
def test_a_hostile_pattern_against_the_longest_value_takes_milliseconds(pattern, value):
    started = time.perf_counter()
    assert like(pattern, value) is False and like(pattern, value, fold=True) is False
    assert time.perf_counter() - started < 0.5
