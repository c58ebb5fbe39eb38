"""The explorer takes over its text index's models from the runs app (runs/0022): the tables runs/0009 made are
kept as they are (state only: on SQLite the text table is FTS5's), and the models' content types follow."""
import django.db.models.deletion
from django.db import migrations, models

from webapp.model_moves import content_types_moved

MODELS = ["rollouttext", "textindexmark"]


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("runs", "0022_text_index_models_to_explorer"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.CreateModel(
                name="TextIndexMark",
                fields=[
                    ("run", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True,
                                                 related_name="+", serialize=False, to="runs.run")),
                    ("through", models.BigIntegerField(default=0)),
                ],
                options={"db_table": "runs_textindexmark"},
            ),
            migrations.CreateModel(
                name="RolloutText",
                fields=[
                    ("rollout", models.OneToOneField(db_constraint=False, on_delete=django.db.models.deletion.DO_NOTHING,
                                                     primary_key=True, related_name="+", serialize=False,
                                                     to="runs.rollout")),
                    ("run", models.ForeignKey(db_constraint=False, db_index=False,
                                              on_delete=django.db.models.deletion.DO_NOTHING, related_name="+",
                                              to="runs.run")),
                    ("document", models.TextField()),
                ],
                options={"db_table": "runs_rollouttext"},
            ),
        ]),
        content_types_moved(MODELS, "runs", "explorer"),
    ]
