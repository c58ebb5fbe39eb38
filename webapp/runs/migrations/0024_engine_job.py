"""The engine's job moves off the run into a table of its own (EngineJob, issue 41): a row for each run a worker has
taken, with its engine, job id, reason, log tail and attempts, copied from the run's engine_* fields. Reversible."""
import django.db.models.deletion
from django.db import migrations, models

FIELDS = {"engine": "engine", "job_id": "engine_job_id", "reason": "engine_reason", "log_tail": "engine_log_tail",
          "attempt": "engine_attempt"}


def jobs_from_runs(apps, schema_editor):
    Run, EngineJob = apps.get_model("runs", "Run"), apps.get_model("runs", "EngineJob")
    taken = Run.objects.exclude(engine="").values_list("pk", *FIELDS.values())
    EngineJob.objects.bulk_create([EngineJob(run_id=row[0], **dict(zip(FIELDS, row[1:]))) for row in taken.iterator()],
                                  batch_size=1000)


def runs_from_jobs(apps, schema_editor):
    Run, EngineJob = apps.get_model("runs", "Run"), apps.get_model("runs", "EngineJob")
    for job in EngineJob.objects.iterator():
        Run.objects.filter(pk=job.run_id).update(**{column: getattr(job, field) for field, column in FIELDS.items()})


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0023_run_lease"),
    ]

    operations = [
        migrations.CreateModel(
            name="EngineJob",
            fields=[
                ("run", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                             related_name="engine_job", serialize=False, to="runs.run")),
                ("engine", models.CharField(max_length=10)),
                ("job_id", models.CharField(blank=True, max_length=100)),
                ("reason", models.CharField(blank=True, max_length=500)),
                ("log_tail", models.TextField(blank=True)),
                ("attempt", models.PositiveSmallIntegerField(default=0)),
            ],
        ),
        migrations.RunPython(jobs_from_runs, runs_from_jobs),
        migrations.RemoveField(model_name="run", name="engine"),
        migrations.RemoveField(model_name="run", name="engine_attempt"),
        migrations.RemoveField(model_name="run", name="engine_job_id"),
        migrations.RemoveField(model_name="run", name="engine_log_tail"),
        migrations.RemoveField(model_name="run", name="engine_reason"),
    ]
