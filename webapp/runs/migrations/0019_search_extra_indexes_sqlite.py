"""The methods' search extras get their partial expression indexes on SQLite too (the demo's database): an order
by COMPASS's confidence was refused there past EVOLAB_SEARCH_UNINDEXED_SORT_MAX rollouts. On PostgreSQL, 0016
made them already and this finds nothing to do."""
from django.db import migrations

from webapp.explorer import search_indexes


def index_search_extras(apps, schema_editor):
    search_indexes.create_search_extra_indexes(schema_editor.connection)


def drop_sqlite_indexes(apps, schema_editor):
    if schema_editor.connection.vendor == "sqlite":
        with schema_editor.connection.cursor() as cursor:
            for key in search_indexes.SEARCH_EXTRAS:
                cursor.execute(f"DROP INDEX IF EXISTS {search_indexes.extra_index_name(key)}")


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0018_run_notes_archived'),
    ]

    operations = [
        migrations.RunPython(index_search_extras, drop_sqlite_indexes),
    ]
