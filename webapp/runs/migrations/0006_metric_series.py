"""Metric points become narrow rows of a series (issue 9): MetricSeries (run, name) and
MetricPoint (series, step, value) with (series, step) as the only index; a point's time is
read from its clock series instead of being joined from RunEvent per point."""

import django.db.models.deletion
from django.db import migrations, models


def copy_points(apps, schema_editor):
    """Old rows (run, seq, step, name, value) into series and points: the later seq of a
    step wins, and each metrics/eval event's time becomes a point of its clock series."""
    Old = apps.get_model("runs", "OldMetricPoint")
    RunEvent = apps.get_model("runs", "RunEvent")
    MetricSeries = apps.get_model("runs", "MetricSeries")
    MetricPoint = apps.get_model("runs", "MetricPoint")
    for run_id in Old.objects.values_list("run_id", flat=True).distinct().order_by("run_id"):
        latest = {}
        for name, step, value in Old.objects.filter(run_id=run_id).order_by("seq").values_list("name", "step", "value"):
            latest[(False, name, step)] = value
        for kind, step, time in (RunEvent.objects.filter(run_id=run_id, type__in=["metrics", "eval"])
                                 .exclude(step=None).order_by("seq").values_list("type", "step", "time")):
            latest[(True, kind, step)] = time
        ids = {}
        for clock, name in sorted({(clock, name) for clock, name, _ in latest}):
            ids[(clock, name)] = MetricSeries.objects.create(run_id=run_id, clock=clock, name=name).pk
        MetricPoint.objects.bulk_create(
            [MetricPoint(series_id=ids[(clock, name)], step=step, value=value)
             for (clock, name, step), value in latest.items()],
            batch_size=1000,
        )


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0005_rzero_question"),
    ]

    operations = [
        migrations.RenameModel("MetricPoint", "OldMetricPoint"),
        migrations.CreateModel(
            name="MetricSeries",
            fields=[
                ("id", models.AutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=200)),
                ("clock", models.BooleanField(default=False)),
                ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="series",
                                          to="runs.run")),
            ],
            options={
                "constraints": [models.UniqueConstraint(fields=("run", "clock", "name"),
                                                        name="unique_series_name_per_run")],
            },
        ),
        migrations.CreateModel(
            name="MetricPoint",
            fields=[
                ("pk", models.CompositePrimaryKey("series", "step", blank=True, editable=False, primary_key=True,
                                                  serialize=False)),
                # columns in this order: 4 + 4 + 8 bytes with no alignment padding
                ("series", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                             related_name="points", to="runs.metricseries")),
                ("step", models.IntegerField()),
                ("value", models.FloatField(null=True)),
            ],
            options={"ordering": ["series", "step"]},
        ),
        migrations.CreateModel(
            name="MetricChunk",
            fields=[
                ("pk", models.CompositePrimaryKey("series", "first_step", blank=True, editable=False, primary_key=True,
                                                  serialize=False)),
                ("series", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                             related_name="chunks", to="runs.metricseries")),
                ("first_step", models.IntegerField()),
                ("last_step", models.IntegerField()),
                ("steps", models.TextField()),
                ("values", models.TextField()),
                ("times", models.TextField()),
                ("packed", models.BinaryField()),
            ],
            options={"ordering": ["series", "first_step"]},
        ),
        migrations.AddField(model_name="run", name="series_closed_until", field=models.IntegerField(default=0)),
        migrations.RunPython(copy_points, migrations.RunPython.noop),
        migrations.DeleteModel("OldMetricPoint"),
    ]
