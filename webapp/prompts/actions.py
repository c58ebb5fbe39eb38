from pathlib import PurePath

from django.conf import settings

from webapp.plain_text import control_character

from .models import PromptSet
from .parsing import PromptFileError, parse_prompt_file


def upload_prompt_set(*, user, team, name: str, uploaded_file) -> PromptSet:
    """Parse and validate the whole file, then save it in `team` in one transaction.
    Raises PromptFileError naming the line or field; on error nothing is saved. The
    caller has checked the user may upload to the team (a member or admin)."""
    filename = _clean_filename(uploaded_file.name)
    name = check_name((name or "").strip()) or filename.rsplit(".", 1)[0][:NAME_MAX_CHARS]
    data = uploaded_file.read()
    parsed = parse_prompt_file(filename, data, settings.PROMPT_FILE_MAX_BYTES)
    return PromptSet.create_from_parsed(name=name, owner=user, team=team, filename=filename, parsed=parsed)


NAME_MAX_CHARS = PromptSet._meta.get_field("name").max_length


def check_name(name: str) -> str:
    """A set's name as typed, or PromptFileError(field="name"): too long, or holding control characters
    (NUL, which PostgreSQL refuses) or unpaired surrogates."""
    if len(name) > NAME_MAX_CHARS:
        raise PromptFileError(f"the name is {len(name):,} characters long; at most {NAME_MAX_CHARS} are accepted",
                              field="name")
    bad = control_character(name)
    if bad is not None:
        raise PromptFileError(f"the name holds the control character {bad!a}; use printable text", field="name")
    return name


def _clean_filename(raw: str | None) -> str:
    """The uploaded file's name, kept for display: its last path part, printable, at most 255 characters."""
    name = "".join(c for c in PurePath(raw or "").name if control_character(c) is None)
    return name[-255:] or "upload"


__all__ = ["upload_prompt_set", "PromptFileError"]
