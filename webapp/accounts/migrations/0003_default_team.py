"""Existing data moves into one team, `default`: every existing user joins it (superusers
as admins, everyone else as members) and every prompt set and run belongs to it, so that
nobody loses sight of what they could see before teams existed."""
from django.conf import settings
from django.db import migrations


def forwards(apps, schema_editor):
    Team = apps.get_model("accounts", "Team")
    Membership = apps.get_model("accounts", "Membership")
    PromptSet = apps.get_model("prompts", "PromptSet")
    Run = apps.get_model("runs", "Run")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    if not (PromptSet.objects.filter(team__isnull=True).exists() or Run.objects.filter(team__isnull=True).exists()):
        return
    team, _ = Team.objects.get_or_create(name="default")
    for user in User.objects.all():
        Membership.objects.get_or_create(team=team, user=user, defaults={"role": "admin" if user.is_superuser else "member"})
    PromptSet.objects.filter(team__isnull=True).update(team=team)
    for run in Run.objects.filter(team__isnull=True).select_related("prompt_set"):
        run.team_id = run.prompt_set.team_id
        run.save(update_fields=["team"])


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_teams"),
        ("prompts", "0002_prompt_set_team"),
        ("runs", "0003_run_team_eval_set_tags"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
