from pathlib import PurePath

from django.conf import settings

from webapp.plain_text import control_character

from . import uploads
from .models import PromptSet, PromptUpload
from .parsing import PromptFileError, parse_prompt_file, too_large


def upload_prompt_set(*, user, team, name: str, uploaded_file) -> PromptSet:
    """Parse and validate the whole file, then save it in `team` in one transaction.
    Raises PromptFileError naming the line or field; on error nothing is saved. The
    caller has checked the user may upload to the team (a member or admin)."""
    filename = _clean_filename(uploaded_file.name)
    name = _set_name(name, filename)
    parsed = parse_prompt_file(filename, uploaded_file.read(), settings.PROMPT_FILE_MAX_BYTES)
    return PromptSet.create_from_parsed(name=name, owner=user, team=team, filename=filename, parsed=parsed)


def receive_prompt_file(*, user, team, name: str, uploaded_file) -> PromptSet | PromptUpload:
    """What the upload page and API call: a small file is parsed and saved now (upload_prompt_set); a
    larger one is queued for a worker (webapp/prompts/uploads.py) and its PromptUpload returned. What
    is cheap to check (the name, an empty or over-large file) is refused here either way."""
    if uploaded_file.size <= settings.PROMPT_UPLOAD_INLINE_MAX_BYTES:
        return upload_prompt_set(user=user, team=team, name=name, uploaded_file=uploaded_file)
    if uploaded_file.size > settings.PROMPT_FILE_MAX_BYTES:
        raise PromptFileError(too_large(uploaded_file.size, settings.PROMPT_FILE_MAX_BYTES))
    filename = _clean_filename(uploaded_file.name)
    return uploads.queue_upload(user=user, team=team, name=_set_name(name, filename), filename=filename,
                                data=uploaded_file.read())


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


def _set_name(typed: str | None, filename: str) -> str:
    """The set's name: as typed (checked), or the file's name without its extension."""
    return check_name((typed or "").strip()) or filename.rsplit(".", 1)[0][:NAME_MAX_CHARS]


def _clean_filename(raw: str | None) -> str:
    """The uploaded file's name, kept for display: its last path part, printable, at most 255 characters."""
    name = "".join(c for c in PurePath(raw or "").name if control_character(c) is None)
    return name[-255:] or "upload"


__all__ = ["upload_prompt_set", "receive_prompt_file", "PromptFileError"]
