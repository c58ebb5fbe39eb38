"""Waiting in tests, on events rather than on the clock.

`wait_until` polls a condition until it holds and returns what it returned, so a test goes on the moment the thing
happened and fails with what it last saw. `assert_stays` is the other claim, that something does NOT happen: it
checks the condition throughout the period, not once after a sleep, so a change at any moment fails the test at that
moment. A bare `time.sleep(n)` followed by an assertion was both slow (it always waited n) and weak (it saw one
instant)."""
import asyncio
import inspect
import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout: float, *, every: float = 0.1, what: str = "the condition",
               last: Callable[[], object] | None = None) -> T:
    """condition()'s first truthy value, polled every `every` seconds for at most `timeout`; an AssertionError
    naming `what` (and `last()`, what was seen, where given) when it never holds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise _timed_out(timeout, what, last is not None, last() if last is not None else None)
        time.sleep(every)


async def wait_until_async(condition, timeout: float, *, every: float = 0.1, what: str = "the condition",
                           last=None):
    """wait_until for a test's event loop: condition() (awaited when it returns an awaitable) polled with
    asyncio.sleep, so the loop's other tasks (the test's sockets) go on meanwhile."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value
        if time.monotonic() >= deadline:
            seen = last() if last is not None else None
            raise _timed_out(timeout, what, last is not None, (await seen) if inspect.isawaitable(seen) else seen)
        await asyncio.sleep(every)


def _timed_out(timeout: float, what: str, told: bool, seen) -> AssertionError:
    return AssertionError(f"timed out after {timeout:g} s waiting for {what}"
                          + (f"; last seen: {str(seen)[:2000]}" if told else ""))


def assert_stays(condition: Callable[[], object], seconds: float, *, every: float = 0.1,
                 what: str = "the condition") -> None:
    """condition() holds at each poll for `seconds`; an AssertionError naming `what` the first time it does not."""
    started = time.monotonic()
    while True:
        if not condition():
            raise AssertionError(f"{what} stopped holding after {time.monotonic() - started:.1f} s")
        if time.monotonic() - started >= seconds:
            return
        time.sleep(every)
