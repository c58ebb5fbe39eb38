"""pass_at_k_divergence lost its `lookback` (it compares with the run's start now, issue 36): overrides stored with
it, a team's or a run's, lose it by migration alerts/0004, so they do not fail validation on every ingestion."""
import pytest

from tests.factories import make_prompt_set, make_team, migrate_to, migrate_to_latest
from webapp.alerts.rule_specs import resolve_thresholds

pytestmark = pytest.mark.django_db(transaction=True)


def test_stored_overrides_lose_lookback_and_keep_the_rest(django_user_model):
    from webapp.runs.models import Run

    team = make_team("lab", ada="admin")
    ada = django_user_model.objects.get(username="ada")
    rules = {"pass_at_k_divergence": {"lookback": 4, "min_drop": 0.1}, "stalled": {"minutes": 30}}
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=9,
                             created_by=ada, hyperparameters={"n_votes": 8, "alert_rules": rules})
    other = Run.objects.create(name="o", method="ttrl", prompt_set=run.prompt_set, max_steps=9, created_by=ada,
                               hyperparameters={"n_votes": 8})
    try:
        TeamAlertRules = migrate_to([("alerts", "0003_alert_ended_with_its_run")]).get_model("alerts",
                                                                                            "TeamAlertRules")
        TeamAlertRules.objects.create(team_id=team.pk, overrides=rules)
        migrate_to([("alerts", "0004_pass_at_k_divergence_without_lookback")])
        from webapp.alerts.models import TeamAlertRules as Stored

        kept = {"pass_at_k_divergence": {"min_drop": 0.1}, "stalled": {"minutes": 30}}
        assert Stored.objects.get(team=team).overrides == kept
        assert Run.objects.get(pk=run.pk).hyperparameters == {"n_votes": 8, "alert_rules": kept}
        assert Run.objects.get(pk=other.pk).hyperparameters == {"n_votes": 8}
        assert resolve_thresholds(kept)["pass_at_k_divergence"]["min_drop"] == 0.1  # valid again
    finally:
        migrate_to_latest()
