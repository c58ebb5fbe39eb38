"""The metric store takes over its models from the runs app (runs/0021): the tables runs/0006 and later made are
kept as they are (state only), and the models' content types, with any permission granted on them, follow."""
import django.db.models.deletion
from django.db import migrations, models

from webapp.model_moves import content_types_moved

MODELS = ["metricseries", "metricpoint", "metricchunk"]


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("runs", "0021_metric_store_models_to_metrics"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name="MetricSeries",
                fields=[
                    ("id", models.AutoField(primary_key=True, serialize=False)),
                    ("name", models.CharField(max_length=200)),
                    ("clock", models.BooleanField(default=False)),
                    ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="series",
                                              to="runs.run")),
                ],
                options={"db_table": "runs_metricseries"},
            ),
            migrations.CreateModel(
                name="MetricPoint",
                fields=[
                    ("pk", models.CompositePrimaryKey("series", "step", blank=True, editable=False, primary_key=True,
                                                      serialize=False)),
                    ("step", models.IntegerField()),
                    ("value", models.FloatField(null=True)),
                    ("series", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                                 related_name="points", to="metrics.metricseries")),
                ],
                options={"db_table": "runs_metricpoint", "ordering": ["series", "step"]},
            ),
            migrations.CreateModel(
                name="MetricChunk",
                fields=[
                    ("pk", models.CompositePrimaryKey("series", "first_step", blank=True, editable=False,
                                                      primary_key=True, serialize=False)),
                    ("first_step", models.IntegerField()),
                    ("last_step", models.IntegerField()),
                    ("steps", models.TextField()),
                    ("values", models.TextField()),
                    ("times", models.TextField()),
                    ("packed", models.BinaryField()),
                    ("series", models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE,
                                                 related_name="chunks", to="metrics.metricseries")),
                ],
                options={"db_table": "runs_metricchunk", "ordering": ["series", "first_step"]},
            ),
            migrations.AddConstraint(
                model_name="metricseries",
                constraint=models.UniqueConstraint(fields=("run", "clock", "name"), name="unique_series_name_per_run"),
            ),
        ]),
        content_types_moved(MODELS, "runs", "metrics"),
    ]
