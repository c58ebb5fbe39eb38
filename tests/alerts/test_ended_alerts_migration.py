"""Alerts closed with their run before anyone acknowledged them, stored before such alerts were kept in view
(issue 36, item 6), become `ended`: the Figure 1 run's six alerts come back to the team's alerts page, where a
member can acknowledge them. One acknowledged before its run ended stays closed."""
import pytest

from tests.factories import make_prompt_set, make_team, migrate_to, migrate_to_latest

pytestmark = pytest.mark.django_db(transaction=True)


def test_unacknowledged_alerts_closed_with_their_run_become_ended_and_acknowledged_ones_stay_closed(
        django_user_model):
    from django.utils import timezone

    from webapp.runs.models import Run

    team = make_team("lab", ada="admin")
    ada = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=9,
                             created_by=ada, state=Run.SUCCEEDED)
    try:
        Alert = migrate_to([("alerts", "0002_alert_closed_with_its_run")]).get_model("alerts", "Alert")

        def alert(rule, **fields):
            return Alert.objects.create(team_id=run.team_id, run_id=run.pk, rule=rule, message="m", **fields).pk

        unseen = alert("entropy_collapse", state="closed")
        seen = alert("majority_lock_in", state="closed", acknowledged_at=timezone.now())
        resolved = alert("length_collapse", state="resolved")

        migrate_to([("alerts", "0003_alert_ended_with_its_run")])
        from webapp.alerts.models import Alert as NewAlert

        assert dict(NewAlert.objects.values_list("pk", "state")) == {unseen: "ended", seen: "closed",
                                                                     resolved: "resolved"}
    finally:
        migrate_to_latest()
