from django.conf import settings

from .models import PromptSet
from .parsing import PromptFileError, parse_prompt_file


def upload_prompt_set(*, user, team, name: str, uploaded_file) -> PromptSet:
    """Parse and validate the whole file, then save it in `team` in one transaction.
    Raises PromptFileError naming the line or field; on error nothing is saved. The
    caller has checked the user may upload to the team (a member or admin)."""
    filename = uploaded_file.name or "upload"
    data = uploaded_file.read()
    parsed = parse_prompt_file(filename, data, settings.PROMPT_FILE_MAX_BYTES)
    name = (name or "").strip() or filename.rsplit(".", 1)[0]
    return PromptSet.create_from_parsed(name=name[:200], owner=user, team=team, filename=filename, parsed=parsed)


__all__ = ["upload_prompt_set", "PromptFileError"]
