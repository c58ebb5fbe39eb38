from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0017_run_transitions'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='notes',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AddField(
            model_name='run',
            name='archived_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
