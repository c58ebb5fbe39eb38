import itertools

import pytest

from tests.waiting import assert_stays, wait_until


def test_wait_until_returns_the_first_value_that_holds():
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "done", timeout=5, every=0.01) == "done"


def test_wait_until_names_what_it_waited_for_and_what_it_last_saw():
    with pytest.raises(AssertionError, match=r"waiting for the run to end; last seen: running"):
        wait_until(lambda: False, timeout=0.05, every=0.01, what="the run to end", last=lambda: "running")


def test_assert_stays_fails_the_moment_the_condition_breaks():
    counter = itertools.count()
    with pytest.raises(AssertionError, match="the run still queued stopped holding"):
        assert_stays(lambda: next(counter) < 3, seconds=5, every=0.01, what="the run still queued")


def test_assert_stays_passes_when_the_condition_holds_throughout():
    assert_stays(lambda: True, seconds=0.05, every=0.01)
