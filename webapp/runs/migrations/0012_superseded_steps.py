"""Groups and rollouts of a step run again after a resume are marked superseded (issue 11): the
later attempt's replace them in the pages, counts and search. Runs stored before this get the mark
for every (step, prompt) logged more than once, all but the latest."""
from django.db import migrations, models

MARK_GROUPS = """
UPDATE runs_group SET superseded = TRUE WHERE EXISTS (
    SELECT 1 FROM runs_group later WHERE later.run_id = runs_group.run_id AND later.step = runs_group.step
    AND later.prompt_id = runs_group.prompt_id AND later.seq > runs_group.seq)
"""
MARK_ROLLOUTS = "UPDATE runs_rollout SET superseded = TRUE WHERE group_id IN (SELECT id FROM runs_group WHERE superseded)"


def mark_replayed_steps(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(MARK_GROUPS)
        cursor.execute(MARK_ROLLOUTS)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0011_run_lease'),
    ]

    operations = [
        migrations.AddField(
            model_name='group',
            name='superseded',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.AddField(
            model_name='rollout',
            name='superseded',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunPython(mark_replayed_steps, migrations.RunPython.noop),
    ]
