"""Every metric value a run trained elsewhere logs is kept as MLflow's store keeps it (LoggedMetric), with each key's
latest (LatestMetric): get-history and runs/get read them (webapp/external/logged_metrics.py). Runs logged before
get theirs from the metric store: a value per step, at its step's time, a missing value as NaN."""
import django.db.models.deletion
from django.db import migrations, models


def copy_stored_metrics(apps, schema_editor):
    from webapp.external import logged_metrics
    from webapp.metrics import series

    for run_id in apps.get_model("external", "ExternalRun").objects.values_list("run_id", flat=True):
        points = []
        for name, found in series.read([run_id])[run_id].items():
            lists = found.lists()
            for step, value, when in zip(lists["steps"], lists["values"], lists["times"]):
                points.append((name, float("nan") if value is None else value, round((when or 0) * 1000), step))
        for start in range(0, len(points), 1000):
            logged_metrics.record(run_id, points[start:start + 1000])


class Migration(migrations.Migration):

    dependencies = [
        ('external', '0001_initial'),
        ('runs', '0019_search_extra_indexes_sqlite'),
    ]

    operations = [
        migrations.CreateModel(
            name='LatestMetric',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('key', models.CharField(max_length=250)),
                ('timestamp', models.BigIntegerField()),
                ('step', models.BigIntegerField()),
                ('value', models.FloatField()),
                ('is_nan', models.BooleanField(default=False)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('run', 'key'), name='one_latest_metric_per_key')],
            },
        ),
        migrations.CreateModel(
            name='LoggedMetric',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('key', models.CharField(max_length=250)),
                ('timestamp', models.BigIntegerField()),
                ('step', models.BigIntegerField()),
                ('value', models.FloatField()),
                ('is_nan', models.BooleanField(default=False)),
                ('run', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.run')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('run', 'key', 'timestamp', 'step', 'value', 'is_nan'), name='one_logged_metric_point')],
            },
        ),
        migrations.RunPython(copy_stored_metrics, migrations.RunPython.noop),
    ]
