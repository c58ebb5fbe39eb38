"""The rollout search (DESIGN §4.6, issue 10): each rollout carries its group's run and step, and a
(run, field, id) index serves each sortable field; webapp/explorer/search_indexes.py makes the two whose
NULL placement differs between the databases."""
import django.db.models.deletion
from django.db import migrations, models

from webapp.explorer import search_indexes


def copy_run_and_step(apps, schema_editor):
    rollout, group = apps.get_model("runs", "Rollout")._meta.db_table, apps.get_model("runs", "Group")._meta.db_table
    with schema_editor.connection.cursor() as cursor:
        if schema_editor.connection.vendor == "postgresql":
            cursor.execute(f"UPDATE {rollout} r SET run_id = g.run_id, step = g.step FROM {group} g WHERE g.id = r.group_id")
        else:
            cursor.execute(f"UPDATE {rollout} SET run_id = (SELECT g.run_id FROM {group} g WHERE g.id = {rollout}.group_id), "
                           f"step = (SELECT g.step FROM {group} g WHERE g.id = {rollout}.group_id)")


def create_indexes(apps, schema_editor):
    search_indexes.create(schema_editor.connection)


def drop_indexes(apps, schema_editor):
    search_indexes.drop(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0007_group_summary'),
    ]

    operations = [
        migrations.AddField(
            model_name='rollout',
            name='run',
            field=models.ForeignKey(db_index=False, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='rollouts', to='runs.run'),
        ),
        migrations.AddField(
            model_name='rollout',
            name='step',
            field=models.IntegerField(null=True),
        ),
        migrations.RunPython(copy_run_and_step, migrations.RunPython.noop),
        migrations.AddIndex(
            model_name='rollout',
            index=models.Index(fields=['run', 'step', 'id'], name='rollout_search_step'),
        ),
        migrations.AddIndex(
            model_name='rollout',
            index=models.Index(fields=['run', 'length', 'id'], name='rollout_search_length'),
        ),
        migrations.RunPython(create_indexes, drop_indexes),
    ]
