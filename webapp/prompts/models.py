from django.conf import settings
from django.db import models, transaction

from webapp.accounts.models import Team


class TeamQuerySet(models.QuerySet):
    """Rows of a team: visible to its members (prompt sets and the uploads that become them)."""

    def visible_to(self, user):
        return self.filter(team__in=Team.objects.of(user))


class PromptSet(models.Model):
    name = models.CharField(max_length=200)
    team = models.ForeignKey("accounts.Team", on_delete=models.PROTECT, related_name="prompt_sets")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="prompt_sets")
    source_filename = models.CharField(max_length=255, blank=True)
    format = models.CharField(max_length=20)
    row_count = models.PositiveIntegerField(default=0)
    has_labels = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return self.name

    @classmethod
    def create_from_parsed(cls, *, name, owner, team, filename, parsed):
        """Save a parsed file as one set, all rows or none (one transaction)."""
        with transaction.atomic():
            prompt_set = cls.objects.create(
                name=name,
                owner=owner,
                team=team,
                source_filename=filename,
                format=parsed.format,
                row_count=len(parsed.rows),
                has_labels=parsed.has_labels,
            )
            Prompt.objects.bulk_create(
                [
                    Prompt(prompt_set=prompt_set, position=row.position, external_id=row.id, text=row.prompt, label=row.label,
                           system=row.system)
                    for row in parsed.rows
                ],
                batch_size=500,
            )
        return prompt_set

    def trainer_rows(self, with_references: bool = False):
        """Rows in the trainer's prompt file format (DESIGN §4.1). `label` is held out:
        the trainer uses it for monitoring only. A method that needs references (DARL,
        RLPR, RLVR) gets the label again as `reference`, which is how it uses the labels
        explicitly; label-free methods never receive a `reference`. A chat-style upload's
        own system message rides as `system` (the trainer gives it instead of the paper's)."""
        for p in self.prompts.order_by("position"):
            row = {"id": p.external_id, "prompt": p.text}
            if p.system:
                row["system"] = p.system
            if p.label is not None:
                row["label"] = p.label
                if with_references:
                    row["reference"] = p.label
            yield row

    def to_json(self):
        return {
            "id": self.id,
            "name": self.name,
            "team": self.team_id,
            "format": self.format,
            "source_filename": self.source_filename,
            "row_count": self.row_count,
            "has_labels": self.has_labels,
            "created_at": self.created_at.isoformat(),
            "owner": self.owner.username,
        }


class Prompt(models.Model):
    prompt_set = models.ForeignKey(PromptSet, on_delete=models.CASCADE, related_name="prompts")
    position = models.PositiveIntegerField()
    external_id = models.CharField(max_length=200)
    text = models.TextField()
    # Held-out label: monitoring metrics only, never a label-free reward.
    label = models.TextField(null=True, blank=True)
    # A chat-style upload's own system message (verl parquet); the trainer uses it instead of the paper's.
    system = models.TextField(null=True, blank=True)

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["prompt_set", "external_id"], name="unique_prompt_id_per_set")]

    def to_json(self):
        return {"id": self.external_id, "position": self.position, "prompt": self.text, "label": self.label,
                "system": self.system}


class PromptUpload(models.Model):
    """A prompt file too large to parse inside a web request (over PROMPT_UPLOAD_INLINE_MAX_BYTES):
    its bytes wait here for a worker (webapp/prompts/uploads.py), which parses them off the web
    server, records its progress on this row and saves the set, all rows or none."""

    QUEUED, PARSING, SAVING, DONE, FAILED = "queued", "parsing", "saving", "done", "failed"
    STATES = [(s, s) for s in (QUEUED, PARSING, SAVING, DONE, FAILED)]

    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="prompt_uploads")
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="prompt_uploads")
    name = models.CharField(max_length=200)  # the set's name to be (as typed, or the file's)
    filename = models.CharField(max_length=255)
    size = models.PositiveBigIntegerField()
    # The file itself, in the database rather than on the web host's disk: a worker on another host
    # reads it (docs/architecture.md, several hosts). Emptied once the set is saved or refused.
    data = models.BinaryField(default=bytes)
    state = models.CharField(max_length=10, choices=STATES, default=QUEUED)
    rows_checked = models.PositiveIntegerField(default=0)
    row_count = models.PositiveIntegerField(null=True)  # known once the file is read
    error = models.TextField(blank=True)
    error_field = models.CharField(max_length=20, blank=True)  # "file", "name", or a row's field ("prompt", "id", ...)
    prompt_set = models.OneToOneField(PromptSet, null=True, blank=True, on_delete=models.SET_NULL, related_name="upload")
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    # Written with each progress report: a worker that stops reporting has stopped (uploads.resend_stale).
    updated_at = models.DateTimeField(auto_now=True)

    objects = TeamQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    @property
    def finished(self) -> bool:
        return self.state in (self.DONE, self.FAILED)

    def to_json(self):
        return {
            "id": self.id,
            "team": self.team_id,
            "name": self.name,
            "filename": self.filename,
            "size": self.size,
            "state": self.state,
            "rows_checked": self.rows_checked,
            "row_count": self.row_count,
            "error": self.error or None,
            "field": self.error_field or None,
            "prompt_set": self.prompt_set_id,
            "attempts": self.attempts,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "owner": self.owner.username,
        }
