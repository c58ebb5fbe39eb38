"""Text from a request that the database will store: names, models, tags."""
import unicodedata


def control_character(text: str) -> str | None:
    """The first control character (NUL among them, which PostgreSQL refuses in text) or unpaired
    surrogate (which UTF-8 cannot hold) in `text`, or None."""
    return next((c for c in text if unicodedata.category(c) in ("Cc", "Cs")), None)
