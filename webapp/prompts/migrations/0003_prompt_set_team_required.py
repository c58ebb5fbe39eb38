import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("prompts", "0002_prompt_set_team"),
        ("accounts", "0003_default_team"),
    ]

    operations = [
        migrations.AlterField(
            model_name="promptset",
            name="team",
            field=models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="prompt_sets", to="accounts.team"),
        ),
    ]
