"""Final answers: extraction from completions, equivalence, majority vote.

``answers_equal`` asks math-verify, but in a child process (see
``rl/_math_verify_worker.py``): math-verify's own timeout uses ``signal.alarm``,
which only works in the main thread and cannot interrupt SymPy while it is inside
one long C call (``10^{10^{10}}``). A child process can always be killed, so the
caller gets an answer within the limit from any thread, in any process.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections import Counter
from functools import lru_cache
from typing import Iterable, Sequence

DEFAULT_TIMEOUT_S = 3.0
STARTUP_TIMEOUT_S = 60.0
# Longer answers are compared as strings: no real answer is this long, and
# parsing kilobytes of LaTeX is where math-verify gets slow.
MAX_VERIFY_CHARS = 500

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def extract_boxed(text: str | None) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), stripped; None when absent.

    Braces are matched with nesting, escaped ``\\{``/``\\}`` do not count, and a box that
    is never closed (a truncated completion) gives None. ``\\boxed 5`` (no braces)
    gives the next token, as LaTeX reads it.
    """
    if not text:
        return None
    starts = [m.end() for m in _BOX_COMMAND.finditer(text)]
    if not starts:
        return None
    i = starts[-1]
    n = len(text)
    while i < n and text[i].isspace():
        i += 1
    if i >= n:
        return None
    if text[i] != "{":
        match = re.match(r"[^\s$]+", text[i:])
        return match.group(0).strip() if match else None
    depth = 0
    j = i
    while j < n:
        ch = text[j]
        if ch == "\\":
            j += 2  # skip the escaped character, e.g. \{ or \}
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[i + 1 : j].strip()
        j += 1
    return None


_SPACING = re.compile(r"\\[,;:! ]|\\left|\\right|\s+|\$")


def normalize_answer(answer: str) -> str:
    """A canonical string for voting and for the fast equality path.

    Only rewrites that never change the meaning: spacing commands, ``\\left``/``\\right``,
    dollar signs, ``\\dfrac``/``\\tfrac`` and a trailing full stop.
    """
    s = _SPACING.sub("", answer)
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    return s.rstrip(".")


class _MathVerifyProcess:
    """One long-lived math-verify child, restarted after a timeout or a crash."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._retry_after = 0.0

    def _start(self) -> subprocess.Popen:
        script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_math_verify_worker.py")
        proc = subprocess.Popen(
            [sys.executable, "-u", script, str(os.getpid())],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        # Start-up (Python, math-verify, SymPy) is waited for here, with its own
        # generous limit, so that it never eats into a comparison's time limit.
        ready, _, _ = select.select([proc.stdout], [], [], STARTUP_TIMEOUT_S)
        if not ready or proc.stdout.readline().strip() != "ready":
            proc.kill()
            proc.wait()
            raise OSError("the math-verify worker did not start")
        return proc

    def _kill(self) -> None:
        if self._proc is not None:
            try:
                self._proc.kill()
                self._proc.wait(timeout=5)
            except Exception:
                pass
        self._proc = None

    def compare(self, a: str, b: str, timeout_s: float) -> bool | None:
        """True/False from math-verify, None on timeout, parse failure or crash."""
        with self._lock:
            for _attempt in range(2):  # a dead child is restarted once
                if self._proc is None or self._proc.poll() is not None:
                    self._kill()
                    if time.monotonic() < self._retry_after:
                        return None  # the worker failed to start recently: strings decide
                    try:
                        self._proc = self._start()
                    except OSError:
                        self._retry_after = time.monotonic() + STARTUP_TIMEOUT_S
                        return None
                proc = self._proc
                try:
                    proc.stdin.write(json.dumps([a, b]) + "\n")
                    proc.stdin.flush()
                except (BrokenPipeError, OSError, ValueError):
                    self._kill()
                    continue
                ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
                if not ready:
                    self._kill()  # stuck in SymPy: the only cure is a new process
                    return None
                line = proc.stdout.readline()
                if not line:
                    self._kill()
                    continue
                try:
                    return json.loads(line)
                except ValueError:
                    self._kill()
                    return None
            return None

    def close(self) -> None:
        with self._lock:
            self._kill()

    def forget_after_fork(self) -> None:
        # A forked process (Celery prefork) must not share the parent's pipes, and the
        # lock may have been held by a thread that does not exist here: start afresh.
        self._lock = threading.Lock()
        self._proc = None
        self._retry_after = 0.0


_verifier = _MathVerifyProcess()
atexit.register(_verifier.close)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_verifier.forget_after_fork)


@lru_cache(maxsize=65536)
def _cached_math_equal(a: str, b: str, timeout_s: float) -> bool | None:
    return _verifier.compare(a, b, timeout_s)


def answers_equal(a: str | None, b: str | None, timeout_s: float = DEFAULT_TIMEOUT_S) -> bool:
    """Whether two final answers are mathematically equivalent.

    Equal normalised strings are equal without asking math-verify. Otherwise
    math-verify decides within ``timeout_s``; on timeout or parse failure the
    normalised strings decide (so the result is then False).
    """
    if a is None or b is None:
        return False
    na, nb = normalize_answer(a), normalize_answer(b)
    if na == nb:
        return True
    if not na or not nb or len(na) > MAX_VERIFY_CHARS or len(nb) > MAX_VERIFY_CHARS:
        return False
    # Symmetric cache key: math-verify's verify(gold, pred) is nearly symmetric, and
    # a vote must not depend on argument order.
    key = (na, nb) if na <= nb else (nb, na)
    result = _cached_math_equal(key[0], key[1], float(timeout_s))
    return bool(result) if result is not None else False


def majority_vote(answers: Iterable[str | None]) -> str | None:
    """Most common non-None answer, votes counted on normalised strings.

    A tie goes to the answer seen first; the answer is returned as first written.
    None when every answer is None (or there are none).
    """
    counts: Counter[str] = Counter()
    first_form: dict[str, str] = {}
    for answer in answers:
        if answer is None:
            continue
        key = normalize_answer(answer)
        counts[key] += 1
        first_form.setdefault(key, answer)
    if not counts:
        return None
    # max() returns the first maximal key and dicts keep insertion order: first seen wins.
    winner = max(counts, key=counts.__getitem__)
    return first_form[winner]


def equivalence_vote(answers: Iterable[str | None]) -> tuple[str | None, int]:
    """The largest class of mathematically equivalent answers: its first written answer and its size.

    Each answer joins the first class whose first answer it equals (``answers_equal``: normalised strings, then
    math-verify), else opens a class, as R-Zero's release groups its solver's answers
    (question_evaluate/evaluate.py, ``answer_counts``); a tie goes to the class seen first. (None, 0) when every
    answer is None.
    """
    classes: list[list] = []  # [first written answer, size], in order of first appearance
    for answer in answers:
        if answer is None:
            continue
        for found in classes:
            if answers_equal(answer, found[0]):
                found[1] += 1
                break
        else:
            classes.append([answer, 1])
    if not classes:
        return None, 0
    winner = max(classes, key=lambda found: found[1])  # max() keeps the first maximal: first seen wins
    return winner[0], winner[1]


def matches_reference(answers: Sequence[str | None], reference: str | None) -> list[bool]:
    """For each answer, whether it is equivalent to ``reference`` (False for None)."""
    if reference is None:
        return [False] * len(answers)
    return [answers_equal(answer, reference) for answer in answers]
