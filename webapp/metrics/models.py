"""The metric store's rows (webapp/metrics/series.py reads and writes them; nothing else may). The runs app's
migrations made their tables, which keep their names; they point at a run by name, and nothing here imports the
runs package."""
from django.db import models


class MetricSeries(models.Model):
    """One named series of a run: a metric ("entropy", "eval/pass@16"), or a clock.

    A clock series holds, for every step, the unix time of the event of one type ("metrics" or "eval")
    that logged that step: a point's time is its clock's value at the same step (clock_for), so a
    point row stays three narrow columns and the time of a step is stored once, not once per metric."""

    # 4-byte ids: each point row carries one, and narrow points are the point of this table.
    id = models.AutoField(primary_key=True)
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="series")
    name = models.CharField(max_length=200)
    clock = models.BooleanField(default=False)

    class Meta:
        db_table = "runs_metricseries"
        constraints = [models.UniqueConstraint(fields=["run", "clock", "name"], name="unique_series_name_per_run")]

    @staticmethod
    def clock_for(name: str) -> str:
        """The clock of a metric: eval/ metrics come from eval events, the rest from metrics events."""
        return "eval" if name.startswith("eval/") else "metrics"


class MetricPoint(models.Model):
    """One value of a series at one step. The primary key (series, step) is the only index: a
    series read is one range scan in step order, and a point costs about 70 bytes on PostgreSQL.
    A step logged twice (a resumed run replaying steps after its checkpoint) keeps the later value."""

    pk = models.CompositePrimaryKey("series", "step")
    # no index of its own: the primary key's leads with series
    series = models.ForeignKey(MetricSeries, on_delete=models.CASCADE, related_name="points", db_index=False)
    step = models.IntegerField()
    value = models.FloatField(null=True)

    class Meta:
        db_table = "runs_metricpoint"
        ordering = ["series", "step"]


class MetricChunk(models.Model):
    """A closed stretch of a series (CHUNK_STEPS steps of the run, never written again unless a step
    in it is logged again) kept as the JSON the API sends: `steps`, `values` and `times` are the
    bodies of JSON lists ("1,2,3"), rendered once when the chunk closes, so a long series is read as
    a few rows and sent without formatting a number (webapp/metrics/series.py)."""

    pk = models.CompositePrimaryKey("series", "first_step")
    series = models.ForeignKey(MetricSeries, on_delete=models.CASCADE, related_name="chunks", db_index=False)
    first_step = models.IntegerField()  # where the chunk's range starts, a multiple of CHUNK_STEPS
    last_step = models.IntegerField()  # the last step it holds
    steps = models.TextField()
    values = models.TextField()
    times = models.TextField()
    # The steps (int32) then the values (float64, NaN where missing), little-endian: what an overview
    # thins (the run page's first paint) without parsing the JSON; times come from the clock's chunk.
    packed = models.BinaryField()

    class Meta:
        db_table = "runs_metricchunk"
        ordering = ["series", "first_step"]
