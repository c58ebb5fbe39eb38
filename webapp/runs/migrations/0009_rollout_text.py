"""Free-text search of rollout texts (issue 10): a table of each rollout's words, filled behind
ingestion (webapp/explorer/text_search.py), and per run the last rollout indexed. Stored rollouts are
indexed by `manage.py index_rollout_text`; until then a search reads their texts. And on PostgreSQL
an index for ordering by EVOL-RL's novelty (webapp/explorer/search_indexes.py)."""
import django.db.models.deletion
from django.db import migrations, models

from webapp.explorer import search_indexes, text_search


def create_table(apps, schema_editor):
    text_search.create(schema_editor.connection)


def drop_table(apps, schema_editor):
    text_search.drop(schema_editor.connection)


def create_extra_indexes(apps, schema_editor):
    search_indexes.create_extra_indexes(schema_editor.connection)


def drop_extra_indexes(apps, schema_editor):
    search_indexes.drop_extra_indexes(schema_editor.connection)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0008_rollout_search'),
    ]

    operations = [
        migrations.CreateModel(
            name='TextIndexMark',
            fields=[
                ('run', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='+', serialize=False, to='runs.run')),
                ('through', models.BigIntegerField(default=0)),
            ],
        ),
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='RolloutText',
                    fields=[
                        ('rollout', models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True, related_name='+', serialize=False, to='runs.rollout')),
                        ('run', models.ForeignKey(db_constraint=False, db_index=False, on_delete=django.db.models.deletion.DO_NOTHING, related_name='+', to='runs.run')),
                        ('document', models.TextField()),
                    ],
                ),
            ],
            database_operations=[migrations.RunPython(create_table, drop_table)],
        ),
        migrations.RunPython(create_extra_indexes, drop_extra_indexes),
    ]
