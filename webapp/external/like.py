"""SQL's LIKE and ILIKE (`%`: any run of characters, `_`: any one character) matched in time linear in the value,
for MLflow's search filters (search_filter.py). A regular expression made from the pattern backtracked through
every way of placing its `%`s, exponentially many, inside one call that held the interpreter lock: one search of a
300-character parameter stalled every thread of the web server for 53 s (docs/security.md).

Here no regular expression is made from a pattern. The pattern is cut at its `%`s into segments of fixed length;
the first must match at the value's start, the last at its end, and each one between at the leftmost place after
the one before it. Leftmost is always right: a later place leaves less room for the segments after it, never more.
A segment without `_` is found with `str.find`; one with `_` by a bit-parallel Shift-And scan, one pass over the
value. Neither backtracks, and the scan is a Python loop, which lets other threads run between its steps."""

MAX_PATTERN_LENGTH = 500  # characters of a LIKE pattern (search_filter refuses longer ones, naming the limit)


def like(pattern: str, value: str, fold: bool = False) -> bool:
    """Whether `value` matches the LIKE `pattern` (ILIKE when `fold`: both compared case-folded)."""
    if fold:
        pattern, value = casefolded(pattern), casefolded(value)
    first, *rest = pattern.split("%")
    if not rest:
        return len(value) == len(first) and _matches_at(first, value, 0)
    *middle, last = rest
    end = len(value) - len(last)
    if end < len(first) or not _matches_at(first, value, 0) or not _matches_at(last, value, end):
        return False
    position = len(first)
    for segment in middle:
        found = _find(segment, value, position, end)
        if found < 0:
            return False
        position = found + len(segment)
    return True


def casefolded(text: str) -> str:
    """`text` with each character case-folded where that keeps it one character (so positions and `_` still count
    characters): 'ß' stays 'ß' (its fold is 'ss'), 'İ' stays 'İ'."""
    if text.isascii():
        return text.lower()
    return "".join(_fold(c) for c in text)


def _fold(c: str) -> str:
    folded = c.casefold()
    if len(folded) == 1:
        return folded
    lowered = c.lower()
    return lowered if len(lowered) == 1 else c


def _matches_at(segment: str, value: str, start: int) -> bool:
    """Whether the fixed-length `segment` (`_` matching any character) lies in `value` at `start`."""
    if "_" not in segment:
        return value.startswith(segment, start)
    if start + len(segment) > len(value):
        return False
    return all(p == "_" or p == v for p, v in zip(segment, value[start:start + len(segment)]))


def _find(segment: str, value: str, start: int, end: int) -> int:
    """The first index i >= start where `segment` lies in `value` and ends by `end`, else -1."""
    if "_" not in segment:
        return value.find(segment, start, end)
    if not all(piece in value for piece in segment.split("_")):
        return -1  # a letter run of the segment is nowhere in the value: no place can match
    # Shift-And: bit j of `state` is set when the segment's first j+1 characters end at the current character.
    length = len(segment)
    wildcard = sum(1 << j for j, p in enumerate(segment) if p == "_")
    masks: dict[str, int] = {}
    for j, p in enumerate(segment):
        if p != "_":
            masks[p] = masks.get(p, wildcard) | (1 << j)
    done, state = 1 << (length - 1), 0
    for i in range(start, end):
        state = ((state << 1) | 1) & masks.get(value[i], wildcard)
        if state & done:
            return i - length + 1
    return -1
