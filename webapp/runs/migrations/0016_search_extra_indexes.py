"""The methods' search extras get a partial index each on PostgreSQL (webapp/explorer/search_indexes.py),
after every stored rollout of each method is given them; EVOL-RL's novelty index of 0009, which held every
rollout of every method, is replaced by its partial one."""
from django.db import migrations

from webapp.explorer import search_indexes


def index_search_extras(apps, schema_editor):
    connection = schema_editor.connection
    search_indexes.create_search_extra_indexes(connection)
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX IF EXISTS rollout_search_extra_novelty")


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0015_run_embedding_model'),
    ]

    operations = [
        migrations.RunPython(index_search_extras, migrations.RunPython.noop),
    ]
