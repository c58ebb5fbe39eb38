"""The metric store's models move to their own app (webapp/metrics, migration metrics/0001): only Django's record of
them leaves this app; their tables stay as they are, under their names (runs_metric*)."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0020_transition_previous_state"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(model_name="metricpoint", name="series"),
            migrations.RemoveField(model_name="metricseries", name="run"),
            migrations.DeleteModel(name="MetricChunk"),
            migrations.DeleteModel(name="MetricPoint"),
            migrations.DeleteModel(name="MetricSeries"),
        ]),
    ]
