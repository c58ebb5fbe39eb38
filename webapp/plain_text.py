"""Text from a request or a trainer that the database will store: names, models, tags, model output."""
import re
import unicodedata

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def control_character(text: str) -> str | None:
    """The first control character (NUL among them, which PostgreSQL refuses in text) or unpaired
    surrogate (which UTF-8 cannot hold) in `text`, or None."""
    return next((c for c in text if unicodedata.category(c) in ("Cc", "Cs")), None)


def unpaired_surrogate(text: str) -> str | None:
    """The first unpaired surrogate in `text` (UTF-8 cannot hold one, so neither can the database: a lone "\\ud800"
    escape in a request's JSON made a UnicodeEncodeError there), or None."""
    try:
        text.encode("utf-8")  # checked in C: texts may be kilobytes
    except UnicodeEncodeError as exc:
        return text[exc.start]
    return None


def named(character: str) -> str:
    """A character control_character() or unpaired_surrogate() found, as an error message names it."""
    if unicodedata.category(character) == "Cs":
        return f"the unpaired surrogate {character!a}, which UTF-8 cannot hold"
    return f"the control character {character!a}"


def storable(text: str) -> str:
    """Model output is any text, and PostgreSQL's text columns refuse NUL and UTF-8 cannot hold an unpaired
    surrogate: each becomes U+FFFD, the replacement character, and the rest is kept as written."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    if unpaired_surrogate(text) is not None:
        text = _SURROGATE.sub("\ufffd", text)
    return text
