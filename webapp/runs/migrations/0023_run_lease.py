"""The lease moves off the run into a table of its own (RunLease, issue 41): a row per run a supervisor holds, with
its owner and last heartbeat, copied from the run's `supervisor` and `heartbeat_at` (a run held before heartbeats
existed gets its start time, or now). Reversible: the columns come back with the leases' values."""
import django.db.models.deletion
from django.db import migrations, models
from django.utils import timezone


def leases_from_runs(apps, schema_editor):
    Run, RunLease = apps.get_model("runs", "Run"), apps.get_model("runs", "RunLease")
    held = Run.objects.exclude(supervisor="").values_list("pk", "supervisor", "heartbeat_at", "started_at")
    RunLease.objects.bulk_create([RunLease(run_id=pk, owner=owner, heartbeat_at=beat or started or timezone.now())
                                  for pk, owner, beat, started in held.iterator()], batch_size=1000)


def runs_from_leases(apps, schema_editor):
    Run, RunLease = apps.get_model("runs", "Run"), apps.get_model("runs", "RunLease")
    for lease in RunLease.objects.iterator():
        Run.objects.filter(pk=lease.run_id).update(supervisor=lease.owner, heartbeat_at=lease.heartbeat_at)


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0022_text_index_models_to_explorer"),
    ]

    operations = [
        migrations.CreateModel(
            name="RunLease",
            fields=[
                ("run", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                             related_name="lease", serialize=False, to="runs.run")),
                ("owner", models.CharField(max_length=200)),
                ("heartbeat_at", models.DateTimeField()),
            ],
        ),
        migrations.RunPython(leases_from_runs, runs_from_leases),
        migrations.RemoveField(model_name="run", name="heartbeat_at"),
        migrations.RemoveField(model_name="run", name="supervisor"),
    ]
