"""/teams/{id}/alert-settings/: a team's webhooks, their recent deliveries and its alert rules, for its admins."""
import pytest

from tests.alerts.receiver import Receiver
from tests.factories import make_prompt_set, make_team, signed_in
from webapp.alerts.delivery import deliver
from webapp.alerts.models import Alert, TeamAlertRules, Webhook, WebhookDelivery
from webapp.accounts.models import Team
from webapp.tasks import DELIVER_WEBHOOK
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


def test_the_team_page_counts_the_alerts_nobody_acknowledged(team, django_user_model):
    ada = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=3,
                             created_by=ada, team=team)
    Alert.objects.create(team=team, run=run, rule="entropy_collapse", severity="warning", step=1, message="m", values={})
    team_page = signed_in(django_user_model, "max").get(f"/teams/{team.pk}/").content.decode()
    assert "Alerts (1 not acknowledged)" in team_page


def test_an_admin_adds_a_webhook_and_a_bad_url_is_named(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    ada.post(f"/teams/{team.pk}/alert-settings/", {"action": "add_webhook", "url": "https://hooks.example.org/x"})
    assert Webhook.objects.get().url == "https://hooks.example.org/x"
    bad = ada.post(f"/teams/{team.pk}/alert-settings/", {"action": "add_webhook", "url": "not a url"})
    assert bad.status_code == 400 and "is not an http(s) URL" in bad.content.decode()


def test_a_refused_url_stays_in_the_field_and_the_message_names_the_setting_that_allows_it(team, django_user_model,
                                                                                        settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = []
    ada = signed_in(django_user_model, "ada")
    refused = ada.post(f"/teams/{team.pk}/alert-settings/",
                       {"action": "add_webhook", "url": "http://127.0.0.1:9000/hook?a=<b>"})
    page = refused.content.decode()
    assert refused.status_code == 400 and not Webhook.objects.exists()
    assert "127.0.0.1 is not a public address" in page and "EVOLAB_WEBHOOK_ALLOWED_NETWORKS" in page
    assert 'value="http://127.0.0.1:9000/hook?a=&lt;b&gt;"' in page  # kept, escaped


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


def test_an_admin_sends_a_test_to_a_webhook_and_its_delivery_is_listed(team, django_user_model, monkeypatch,
                                                                         django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda name, args, **kw: sent.append((name, args)))
    ada = signed_in(django_user_model, "ada")
    with Receiver() as receiver:
        hook = Webhook.objects.create(team=team, url=receiver.url)
        with django_capture_on_commit_callbacks(execute=True):
            response = ada.post(f"/teams/{team.pk}/alert-settings/", {"action": "test_webhook", "webhook": hook.pk})
        assert response.status_code == 302
        delivery = WebhookDelivery.objects.get()
        assert (delivery.webhook, delivery.alert, delivery.event, delivery.status) == (hook, None, "test", "pending")
        assert sent == [(DELIVER_WEBHOOK, [delivery.pk])]  # the alerts worker sends it, retries included
        assert deliver(delivery.pk) is None
    body = receiver.received[0]["body"]
    assert body["event"] == "test" and body["alert"] is None
    assert body["text"] == ":information_source: Evolab test from team lab, sent by ada: this webhook works"
    page = ada.get(f"/teams/{team.pk}/alert-settings/").content.decode()
    assert "test sent to " + receiver.url in page
    row = page[page.index('<tr class="delivery-delivered">'):]
    assert "<td>test</td>" in row[:row.index("</tr>")]


def test_a_test_of_a_webhook_of_another_team_is_refused_naming_the_field(team, django_user_model, monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)
    make_team("other", bob="admin")
    theirs = Webhook.objects.create(team=Team.objects.get(name="other"), url="https://hooks.example.org/b")
    response = signed_in(django_user_model, "ada").post(f"/teams/{team.pk}/alert-settings/",
                                                        {"action": "test_webhook", "webhook": theirs.pk})
    assert response.status_code == 400 and not WebhookDelivery.objects.exists()
    assert f"no webhook with id {theirs.pk} in team" in response.content.decode()


def test_members_cannot_send_a_test(team, django_user_model):
    hook = Webhook.objects.create(team=team, url="https://hooks.example.org/x")
    response = signed_in(django_user_model, "max").post(f"/teams/{team.pk}/alert-settings/",
                                                         {"action": "test_webhook", "webhook": hook.pk})
    assert response.status_code == 403 and not WebhookDelivery.objects.exists()


def test_the_deliveries_table_is_read_again_by_admins_alone(team, django_user_model):
    hook = Webhook.objects.create(team=team, url="https://hooks.example.org/T0/<secret>")
    WebhookDelivery.objects.create(webhook=hook, event="test", status="delivered", attempts=1, response_code=200)
    table = signed_in(django_user_model, "ada").get(f"/teams/{team.pk}/alert-settings/?part=deliveries")
    html = table.content.decode()
    assert table.status_code == 200 and html.startswith('<tbody id="delivery-rows">') and "<h1" not in html
    assert "T0/&lt;secret&gt;" in html and "HTTP 200" in html
    assert signed_in(django_user_model, "max").get(f"/teams/{team.pk}/alert-settings/?part=deliveries"
                                                   ).status_code == 403
