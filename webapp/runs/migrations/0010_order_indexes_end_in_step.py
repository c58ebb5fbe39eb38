"""The reward and advantage order indexes end in step (webapp/explorer/search_indexes.py says why):
a step range is checked inside the index instead of by reading each rollout the walk passes."""
from django.db import migrations

from webapp.explorer import search_indexes


def end_in_step(apps, schema_editor):
    connection = schema_editor.connection
    search_indexes.drop_indexes_without_step(connection)
    # 0008/0009 on a new database already made these (they call today's functions); IF NOT EXISTS
    search_indexes.create(connection)
    search_indexes.create_extra_indexes(connection)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0009_rollout_text'),
    ]

    operations = [
        migrations.RunPython(end_in_step, migrations.RunPython.noop),
    ]
