"""Text from a request or a trainer that the database will store: names, models, tags, model output."""
import re
import unicodedata

_SURROGATE = re.compile(r"[\ud800-\udfff]")


def control_character(text: str) -> str | None:
    """The first control character (NUL among them, which PostgreSQL refuses in text) or unpaired
    surrogate (which UTF-8 cannot hold) in `text`, or None."""
    return next((c for c in text if unicodedata.category(c) in ("Cc", "Cs")), None)


def storable(text: str) -> str:
    """Model output is any text, and PostgreSQL's text columns refuse NUL and UTF-8 cannot hold an unpaired
    surrogate: each becomes U+FFFD, the replacement character, and the rest is kept as written."""
    if "\x00" in text:
        text = text.replace("\x00", "\ufffd")
    try:
        text.encode("utf-8")  # fails only on an unpaired surrogate (checked in C: texts are kilobytes)
    except UnicodeEncodeError:
        text = _SURROGATE.sub("\ufffd", text)
    return text
