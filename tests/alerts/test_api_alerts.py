"""GET /api/alerts, /api/runs/{id}/alerts, acknowledge/resolve, and the admins' webhooks and
alert-rules endpoints (DESIGN §4.5), with the role checks of §4.4."""
import pytest
from django.test import Client

from tests.factories import make_prompt_set, make_team
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Alert, TeamAlertRules, Webhook
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model, monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)
    team = make_team("lab", ada="admin", max="member", vic="viewer")
    make_team("other", bob="admin")
    ada = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=3, created_by=ada)
    open_alert = Alert.objects.create(team=team, run=run, rule="entropy_collapse", message="m", step=2, last_step=3)
    done = Alert.objects.create(team=team, run=run, rule="length_collapse", message="m", step=1, state="resolved")
    return {"team": team, "run": run, "open": open_alert, "resolved": done}


def api(django_user_model, username):
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {ApiToken.issue(django_user_model.objects.get(username=username))}"
    return client


def test_it_lists_alerts_filtered_by_state_run_and_team(world, django_user_model):
    vic = api(django_user_model, "vic")
    everything = vic.get("/api/alerts").json()["alerts"]
    assert {a["rule"] for a in everything} == {"entropy_collapse", "length_collapse"}
    assert [a["rule"] for a in vic.get("/api/alerts?state=open").json()["alerts"]] == ["entropy_collapse"]
    assert len(vic.get(f"/api/alerts?run={world['run'].pk}&team={world['team'].pk}").json()["alerts"]) == 2
    assert vic.get("/api/alerts?team=999").json()["alerts"] == []
    alert = vic.get(f"/api/runs/{world['run'].pk}/alerts").json()["alerts"][0]
    assert set(alert) >= {"id", "team", "run", "rule", "severity", "step", "message", "values", "state", "created_at"}


def test_it_explains_a_bad_filter(world, django_user_model):
    vic = api(django_user_model, "vic")
    assert vic.get("/api/alerts?state=shut").json()["field"] == "state"
    assert vic.get("/api/alerts?run=abc").status_code == 400


def test_members_acknowledge_and_viewers_cannot(world, django_user_model):
    pk = world["open"].pk
    assert api(django_user_model, "vic").post(f"/api/alerts/{pk}/acknowledge").status_code == 403
    response = api(django_user_model, "max").post(f"/api/alerts/{pk}/acknowledge")
    assert response.status_code == 200
    assert response.json()["state"] == "acknowledged" and response.json()["acknowledged_by"] == "max"
    assert api(django_user_model, "max").post(f"/api/alerts/{world['resolved'].pk}/acknowledge").status_code == 409


def test_a_member_resolves_by_hand(world, django_user_model):
    response = api(django_user_model, "max").post(f"/api/alerts/{world['open'].pk}/resolve")
    assert response.json()["state"] == "resolved"


def test_only_admins_manage_webhooks(world, django_user_model):
    url = f"/api/teams/{world['team'].pk}/webhooks"
    assert api(django_user_model, "max").get(url).status_code == 403
    assert api(django_user_model, "bob").get(url).status_code == 404
    ada = api(django_user_model, "ada")
    created = ada.post(url, {"url": "https://hooks.example.org/T1"}, content_type="application/json")
    assert created.status_code == 201
    listed = ada.get(url).json()
    assert [h["url"] for h in listed["webhooks"]] == ["https://hooks.example.org/T1"] and listed["deliveries"] == []
    bad = ada.post(url, {"url": "ftp://nope"}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "url"
    assert ada.delete(f"{url}/{created.json()['id']}").status_code == 200
    assert not Webhook.objects.exists()


def test_admins_read_and_replace_the_teams_alert_rules(world, django_user_model):
    url = f"/api/teams/{world['team'].pk}/alert-rules"
    assert api(django_user_model, "max").get(url).status_code == 403
    ada = api(django_user_model, "ada")
    body = ada.get(url).json()
    assert body["effective"]["entropy_collapse"]["fraction"] == 0.6 and body["overrides"] == {}
    assert {r["kind"] for r in body["rules"]} >= {"entropy_collapse", "stalled", "run_failed"}
    put = ada.put(url, {"entropy_collapse": {"fraction": "0.1"}, "stalled": {"enabled": False}},
                  content_type="application/json")
    assert put.status_code == 200
    assert put.json()["effective"]["entropy_collapse"]["fraction"] == 0.1
    assert TeamAlertRules.objects.get(team=world["team"]).overrides["stalled"] == {"enabled": False}
    bad = ada.put(url, {"entropy_collapse": {"fraction": 7}}, content_type="application/json")
    assert bad.status_code == 400 and bad.json()["field"] == "alert_rules.entropy_collapse.fraction"
    unknown = ada.put(url, {"no_such_rule": {}}, content_type="application/json")
    assert unknown.status_code == 400 and unknown.json()["field"] == "alert_rules.no_such_rule"


def test_a_run_carries_its_alert_rule_overrides_but_the_trainer_never_sees_them(world, django_user_model):
    max_ = api(django_user_model, "max")
    body = {"name": "x", "method": "ttrl", "prompt_set": world["run"].prompt_set_id,
            "hyperparameters": {"n_votes": 8, "n_train": 4, "alert_rules": {"majority_lock_in": {"consensus": 0.9}}}}
    created = max_.post("/api/runs", body, content_type="application/json")
    assert created.status_code == 201, created.content
    run = Run.objects.get(pk=created.json()["id"])
    assert run.hyperparameters["alert_rules"] == {"majority_lock_in": {"consensus": 0.9}}
    assert "alert_rules" not in run.trainer_config("prompts.jsonl")["hyperparameters"]
    body["hyperparameters"]["alert_rules"] = {"majority_lock_in": {"consensus": 2}}
    refused = max_.post("/api/runs", body, content_type="application/json")
    assert refused.status_code == 400 and refused.json()["field"] == "alert_rules.majority_lock_in.consensus"


def test_teams_endpoint_lists_your_teams_with_your_role(world, django_user_model):
    teams = api(django_user_model, "vic").get("/api/teams").json()["teams"]
    assert [(t["name"], t["role"]) for t in teams] == [("lab", "viewer")]
    members = api(django_user_model, "vic").get(f"/api/teams/{world['team'].pk}").json()["members"]
    assert {(m["user"], m["role"]) for m in members} == {("ada", "admin"), ("max", "member"), ("vic", "viewer")}
