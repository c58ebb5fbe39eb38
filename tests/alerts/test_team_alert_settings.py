"""/teams/{id}/alert-settings/: a team's webhooks, their recent deliveries and its alert rules, for its admins."""
import pytest

from tests.factories import make_prompt_set, make_team, signed_in
from webapp.alerts.models import Alert, TeamAlertRules, Webhook
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(django_user_model):
    return make_team("lab", ada="admin", max="member")


def test_admins_see_webhooks_and_rules(team, django_user_model):
    page = signed_in(django_user_model, "ada").get(f"/teams/{team.pk}/alert-settings/").content.decode()
    assert 'id="webhooks"' in page and 'id="rules-form"' in page and "entropy_collapse" in page


def test_members_are_refused_and_outsiders_get_404(team, django_user_model):
    member = signed_in(django_user_model, "max")
    assert member.get(f"/teams/{team.pk}/alert-settings/").status_code == 403
    response = member.post(f"/teams/{team.pk}/alert-settings/", {"action": "add_webhook", "url": "https://x.example"})
    assert response.status_code == 403 and not Webhook.objects.exists()
    make_team("other", bob="admin")
    outsider = signed_in(django_user_model, "bob")
    assert outsider.get(f"/teams/{team.pk}/alert-settings/").status_code == 404
    assert outsider.post(f"/teams/{team.pk}/alert-settings/", {"action": "add_webhook", "url": "https://x.example"}
                         ).status_code == 404


def test_an_admin_removes_a_webhook(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    ada.post(f"/teams/{team.pk}/alert-settings/", {"action": "add_webhook", "url": "https://hooks.example.org/x"})
    response = ada.post(f"/teams/{team.pk}/alert-settings/", {"action": "delete_webhook", "webhook": Webhook.objects.get().pk})
    assert response.status_code == 302 and not Webhook.objects.exists()


def test_the_team_page_counts_the_open_alerts(team, django_user_model):
    ada = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=3,
                             created_by=ada, team=team)
    Alert.objects.create(team=team, run=run, rule="entropy_collapse", severity="warning", step=1, message="m", values={})
    assert "Alerts (1 open)" in signed_in(django_user_model, "max").get(f"/teams/{team.pk}/").content.decode()


def test_an_admin_adds_a_webhook_and_a_bad_url_is_named(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    ada.post(f"/teams/{team.pk}/alert-settings/", {"action": "add_webhook", "url": "https://hooks.example.org/x"})
    assert Webhook.objects.get().url == "https://hooks.example.org/x"
    bad = ada.post(f"/teams/{team.pk}/alert-settings/", {"action": "add_webhook", "url": "not a url"})
    assert bad.status_code == 400 and "is not an http(s) URL" in bad.content.decode()


def test_saving_rules_keeps_only_values_that_differ_from_the_defaults(team, django_user_model):
    from webapp.alerts.rule_specs import RULES, defaults

    form = {"action": "save_rules"}
    for kind, values in defaults().items():
        for name, value in values.items():
            key = f"rule-{kind}-{name}"
            if RULES[kind].param(name).type == "bool":
                if value:
                    form[key] = "on"
            else:
                form[key] = str(value)
    form["rule-entropy_collapse-fraction"] = "0.3"
    del form["rule-stalled-enabled"]
    signed_in(django_user_model, "ada").post(f"/teams/{team.pk}/alert-settings/", form)
    assert TeamAlertRules.objects.get(team=team).overrides == {"entropy_collapse": {"fraction": 0.3},
                                                                "stalled": {"enabled": False}}
    bad = dict(form, **{"rule-entropy_collapse-fraction": "3"})
    response = signed_in(django_user_model, "ada").post(f"/teams/{team.pk}/alert-settings/", bad)
    assert response.status_code == 400 and "alert_rules.entropy_collapse.fraction" in response.content.decode()
