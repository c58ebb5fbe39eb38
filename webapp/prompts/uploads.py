"""Large prompt files, parsed by a worker instead of the web server.

A file over PROMPT_UPLOAD_INLINE_MAX_BYTES is kept as a PromptUpload (its bytes in the database, so a
worker on another host can read them) and the `parse_prompt_upload` task is queued on the uploads
queue. The worker parses it off the web server, reports progress on the row (its page and
GET /api/prompt-uploads/{id} show it), and saves the set in one transaction: all rows or none, the
error naming the row and field otherwise. The task takes the upload's id and is safe to deliver twice;
a lost message or a worker that died mid-parse is sent again by the periodic `resend_stale`.
"""
import logging
import time
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from webapp.tasks import PARSE_PROMPT_UPLOAD, send, send_on_commit

from .models import PromptSet, PromptUpload
from .parsing import PromptFileError, parse_prompt_file

log = logging.getLogger(__name__)

PROGRESS_EVERY_SECONDS = 0.5
MAX_ATTEMPTS = 3  # a file that kills its worker three times is refused, not retried for ever


def queue_upload(*, user, team, name: str, filename: str, data: bytes) -> PromptUpload:
    """Keep the file and queue its parse once the row is committed."""
    with transaction.atomic():
        upload = PromptUpload.objects.create(team=team, owner=user, name=name, filename=filename, size=len(data),
                                             data=data)
        send_on_commit(PARSE_PROMPT_UPLOAD, [upload.pk], queue=queue())
    return upload


def queue() -> str:
    return settings.QUEUE_PREFIX + "uploads"


def parse_upload(upload_id: int) -> str:
    """The worker's part: parse, report progress, save. Returns the upload's final state (or why it
    did nothing: another worker holds it, or it is finished)."""
    upload = _claim(upload_id)
    if upload is None:
        return "skipped"
    try:
        parsed = parse_prompt_file(upload.filename, bytes(upload.data), settings.PROMPT_FILE_MAX_BYTES,
                                   progress=_reporter(upload.pk))
    except PromptFileError as exc:
        return _fail(upload.pk, str(exc), exc.field or "file")
    PromptUpload.objects.filter(pk=upload.pk).update(state=PromptUpload.SAVING, rows_checked=len(parsed.rows),
                                                     row_count=len(parsed.rows), updated_at=timezone.now())
    with transaction.atomic():
        # the row lock makes a second delivery that got this far wait, then find the set saved
        current = PromptUpload.objects.select_for_update().get(pk=upload.pk)
        if current.finished:
            return "skipped"
        prompt_set = PromptSet.create_from_parsed(name=upload.name, owner=upload.owner, team=upload.team,
                                                  filename=upload.filename, parsed=parsed)
        current.state, current.prompt_set, current.data = PromptUpload.DONE, prompt_set, b""
        current.save(update_fields=["state", "prompt_set", "data", "updated_at"])
    log.info("prompt upload %s saved as set %s (%s rows)", upload.pk, prompt_set.pk, len(parsed.rows))
    return PromptUpload.DONE


def _claim(upload_id: int) -> PromptUpload | None:
    """Take the upload if it is queued, or if its worker stopped reporting (it died mid-parse)."""
    stale = timezone.now() - timedelta(seconds=settings.PROMPT_UPLOAD_STALE_SECONDS)
    with transaction.atomic():
        upload = (PromptUpload.objects.select_for_update().select_related("owner", "team")
                  .filter(Q(state=PromptUpload.QUEUED) | Q(state__in=[PromptUpload.PARSING, PromptUpload.SAVING],
                                                          updated_at__lt=stale), pk=upload_id).first())
        if upload is None:
            return None
        if upload.attempts >= MAX_ATTEMPTS:
            upload.state, upload.error_field, upload.data = PromptUpload.FAILED, "file", b""
            upload.error = (f"parsing this file stopped its worker {upload.attempts} times; "
                            "split it into smaller files or ask an admin to look at the worker's log")
            upload.save(update_fields=["state", "error", "error_field", "data", "updated_at"])
            return None
        upload.state, upload.attempts, upload.rows_checked = PromptUpload.PARSING, upload.attempts + 1, 0
        upload.save(update_fields=["state", "attempts", "rows_checked", "updated_at"])
    return upload


def _reporter(upload_id: int):
    """A progress callback that writes at most every PROGRESS_EVERY_SECONDS (each write is a heartbeat)."""
    last = [0.0]

    def report(checked: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_EVERY_SECONDS:
            last[0] = now
            PromptUpload.objects.filter(pk=upload_id).update(rows_checked=checked, row_count=total,
                                                             updated_at=timezone.now())
    return report


def _fail(upload_id: int, message: str, field: str) -> str:
    PromptUpload.objects.filter(pk=upload_id).update(state=PromptUpload.FAILED, error=message, error_field=field,
                                                     data=b"", updated_at=timezone.now())
    return PromptUpload.FAILED


def resend_stale(now=None) -> list[int]:
    """Send again the uploads nobody is working on: queued ones whose message may be lost (the broker
    was away when they were sent) and claimed ones whose worker stopped reporting."""
    stale = (now or timezone.now()) - timedelta(seconds=settings.PROMPT_UPLOAD_STALE_SECONDS)
    ids = list(PromptUpload.objects.filter(
        state__in=[PromptUpload.QUEUED, PromptUpload.PARSING, PromptUpload.SAVING], updated_at__lt=stale,
    ).values_list("pk", flat=True))
    for upload_id in ids:
        send(PARSE_PROMPT_UPLOAD, args=[upload_id], queue=queue())
    if ids:
        log.warning("prompt uploads sent to a worker again: %s", ids)
    return ids
