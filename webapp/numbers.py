"""Whole numbers read from request text (query parameters, form fields).

`str.isdigit` is true for '²' and '١', and int() refuses the first; a number past the database's
bigint makes a query fail. Both were 500s: a text is a whole number here only when it is 1 to 18
ASCII digits."""

MAX_DIGITS = 18  # below 2^63: any id or step fits a bigint


def is_whole_number(text) -> bool:
    return isinstance(text, str) and 0 < len(text) <= MAX_DIGITS and text.isascii() and text.isdigit()


def whole_number(text) -> int | None:
    """int(text) when it is a whole number as above, else None."""
    return int(text) if is_whole_number(text) else None


class IdConverter:
    """The `<id:...>` path converter (registered by webapp/runs/apps.py): like Django's `int`, but at most
    MAX_DIGITS digits, so /api/runs/99999999999999999999 is a 404 instead of a database error."""

    regex = f"[0-9]{{1,{MAX_DIGITS}}}"

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value) -> str:
        return str(value)
