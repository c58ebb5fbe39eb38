import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0003_run_team_eval_set_tags"),
        ("accounts", "0003_default_team"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="team",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="runs", to="accounts.team"),
        ),
    ]
