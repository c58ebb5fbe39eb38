"""pass_at_k_divergence compares its recent points with the run's start (like every rule now, issue 36), not with
pass@k's best point `lookback` points back: the parameter is gone, and stored overrides that set it (a team's, a
run's `alert_rules`) would fail validation on every ingestion. They lose it here."""
from django.db import migrations


def _without_lookback(rules):
    if isinstance(rules, dict) and isinstance(rules.get("pass_at_k_divergence"), dict) \
            and "lookback" in rules["pass_at_k_divergence"]:
        rules = {**rules, "pass_at_k_divergence": {k: v for k, v in rules["pass_at_k_divergence"].items()
                                                   if k != "lookback"}}
        return rules, True
    return rules, False


def drop_lookback(apps, schema_editor):
    for team_rules in apps.get_model("alerts", "TeamAlertRules").objects.all():
        team_rules.overrides, changed = _without_lookback(team_rules.overrides)
        if changed:
            team_rules.save(update_fields=["overrides"])
    Run = apps.get_model("runs", "Run")
    for run in Run.objects.filter(hyperparameters__has_key="alert_rules").only("id", "hyperparameters"):
        rules, changed = _without_lookback(run.hyperparameters.get("alert_rules"))
        if changed:
            run.hyperparameters = {**run.hyperparameters, "alert_rules": rules}
            run.save(update_fields=["hyperparameters"])


class Migration(migrations.Migration):

    dependencies = [
        ("alerts", "0003_alert_ended_with_its_run"),
        ("runs", "0019_search_extra_indexes_sqlite"),
    ]

    operations = [migrations.RunPython(drop_lookback, migrations.RunPython.noop)]
