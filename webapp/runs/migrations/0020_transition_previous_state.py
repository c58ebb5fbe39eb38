"""RunTransition.previous_state: the state before each change, filled for the rows already kept from each run's
previous row (issue 41)."""
from django.db import migrations, models

BATCH = 2000


def fill_previous_states(apps, schema_editor):
    RunTransition = apps.get_model("runs", "RunTransition")
    changed, last_run, last_state = [], None, ""
    for pk, run_id, state in RunTransition.objects.order_by("run_id", "id").values_list("id", "run_id", "state").iterator():
        if run_id != last_run:
            last_run, last_state = run_id, ""
        if last_state:
            changed.append(RunTransition(pk=pk, previous_state=last_state))
        last_state = state
        if len(changed) >= BATCH:
            RunTransition.objects.bulk_update(changed, ["previous_state"])
            changed = []
    RunTransition.objects.bulk_update(changed, ["previous_state"])


class Migration(migrations.Migration):
    dependencies = [("runs", "0019_search_extra_indexes_sqlite")]

    operations = [
        migrations.AddField("runtransition", "previous_state",
                            models.CharField(blank=True, default="", max_length=20)),
        migrations.RunPython(fill_previous_states, migrations.RunPython.noop),
    ]
