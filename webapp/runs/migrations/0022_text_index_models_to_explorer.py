"""The rollout text index's models move to the explorer (migration explorer/0001), which reads and writes them:
only Django's record of them leaves this app; their tables (runs/0009) stay as they are."""
from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0021_metric_store_models_to_metrics"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[
            migrations.RemoveField(model_name="textindexmark", name="run"),
            migrations.DeleteModel(name="RolloutText"),
            migrations.DeleteModel(name="TextIndexMark"),
        ]),
    ]
