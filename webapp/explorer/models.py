"""The rollout text search's rows (webapp/explorer/text_search.py reads and writes them). The runs app's
migrations made their tables (runs/0009), which keep their names; the explorer's own migrations only took the
models over (explorer/0001, state only)."""
from django.db import models


class RolloutText(models.Model):
    """The words of one rollout's text, for the search's `q` (webapp/explorer/text_search.py): a table of
    its own, filled behind ingestion, because an index on the rollout table itself slowed ingestion
    fourfold. PostgreSQL keeps a tsvector under a GIN index, SQLite an FTS5 table; both are made by
    migration runs/0009 (text_search.create), read and written by raw SQL only."""

    rollout = models.OneToOneField("runs.Rollout", primary_key=True, on_delete=models.DO_NOTHING, db_constraint=False,
                                   related_name="+")  # PostgreSQL's table cascades itself; FTS5 has no keys
    run = models.ForeignKey("runs.Run", on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+")
    document = models.TextField()

    class Meta:
        db_table = "runs_rollouttext"


class TextIndexMark(models.Model):
    """How far a run's rollout texts are indexed: every rollout of the run with id <= through has its
    RolloutText row; the ones after it are matched by reading their text."""

    run = models.OneToOneField("runs.Run", primary_key=True, on_delete=models.CASCADE, related_name="+")
    through = models.BigIntegerField(default=0)

    class Meta:
        db_table = "runs_textindexmark"
