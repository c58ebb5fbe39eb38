"""POST /api/teams/{id}/alerts/acknowledge {"ids": [...]}: a member acknowledges several of the team's active
alerts at once (the team alerts page's checkboxes), all or none."""
import pytest
from django.test import Client

from tests.factories import make_prompt_set, make_team
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Alert
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model, monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)
    team = make_team("lab", ada="admin", max="member", vic="viewer")
    other = make_team("other", bob="admin")
    ada = django_user_model.objects.get(username="ada")
    bob = django_user_model.objects.get(username="bob")
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=3,
                             created_by=ada)
    theirs = Run.objects.create(name="t", method="ttrl", prompt_set=make_prompt_set(bob, team=other), max_steps=3,
                                created_by=bob)

    def alert(rule, state="open", on=run):
        return Alert.objects.create(team=on.team, run=on, rule=rule, message="m", step=2, state=state)

    return {
        "team": team,
        "open": [alert("entropy_collapse"), alert("majority_lock_in"), alert("degeneration")],
        "acknowledged": alert("length_collapse", state="acknowledged"),
        "resolved": alert("invalid_answers", state="resolved"),
        "closed": alert("stalled", state="closed"),
        "theirs": alert("entropy_collapse", on=theirs),
    }


def client_of(django_user_model, username):
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {ApiToken.issue(django_user_model.objects.get(username=username))}"
    return client


def post(client, team, body):
    return client.post(f"/api/teams/{team.pk}/alerts/acknowledge", body, content_type="application/json")


def test_a_member_acknowledges_several_open_alerts_at_once(world, django_user_model):
    ids = [a.pk for a in world["open"][:2]]
    response = post(client_of(django_user_model, "max"), world["team"], {"ids": ids})
    assert response.status_code == 200, response.content
    answered = response.json()["alerts"]
    assert sorted(a["id"] for a in answered) == sorted(ids)
    assert all(a["state"] == "acknowledged" and a["acknowledged_by"] == "max" for a in answered)
    states = dict(Alert.objects.values_list("pk", "state"))
    assert [states[pk] for pk in ids] == ["acknowledged", "acknowledged"]
    assert states[world["open"][2].pk] == "open"  # not asked for


def test_an_alert_already_acknowledged_keeps_who_acknowledged_it(world, django_user_model):
    ada = client_of(django_user_model, "ada")
    response = post(ada, world["team"], {"ids": [world["open"][0].pk, world["acknowledged"].pk]})
    assert response.status_code == 200
    by = {a["id"]: a["acknowledged_by"] for a in response.json()["alerts"]}
    assert by == {world["open"][0].pk: "ada", world["acknowledged"].pk: None}


def test_a_resolved_or_closed_alert_refuses_the_whole_request_and_acknowledges_none(world, django_user_model):
    max_ = client_of(django_user_model, "max")
    for ended in ("resolved", "closed"):
        response = post(max_, world["team"], {"ids": [world["open"][0].pk, world[ended].pk]})
        assert response.status_code == 409
        assert response.json()["field"] == "ids"
        assert f"alert {world[ended].pk} is already {ended}" in response.json()["error"]
    assert Alert.objects.get(pk=world["open"][0].pk).state == "open"


def test_another_teams_alert_is_not_found_like_a_missing_one(world, django_user_model):
    max_ = client_of(django_user_model, "max")
    for pk in (world["theirs"].pk, 999999):
        response = post(max_, world["team"], {"ids": [world["open"][0].pk, pk]})
        assert response.status_code == 404 and response.json()["field"] == "ids"
        assert response.json()["error"] == f"no alert with id {pk} in team 'lab'"
    assert Alert.objects.get(pk=world["theirs"].pk).state == "open"
    assert Alert.objects.get(pk=world["open"][0].pk).state == "open"


def test_viewers_cannot_and_other_teams_members_see_no_such_team(world, django_user_model):
    ids = [world["open"][0].pk]
    assert post(client_of(django_user_model, "vic"), world["team"], {"ids": ids}).status_code == 403
    assert post(client_of(django_user_model, "bob"), world["team"], {"ids": ids}).status_code == 404
    assert Alert.objects.get(pk=ids[0]).state == "open"


@pytest.mark.parametrize("body, message", [
    ({}, "ids must be a list of alert ids"),
    ({"ids": "1,2"}, "ids must be a list of alert ids"),
    ({"ids": []}, "ids must name at least one alert"),
    ({"ids": [1, "x"]}, "ids must be whole numbers, not 'x'"),
    ({"ids": [True]}, "ids must be whole numbers, not True"),
    ({"ids": [10 ** 30]}, f"ids must be whole numbers, not {10 ** 30}"),
    ({"ids": list(range(1, 502))}, "at most 500 alerts at a time, not 501"),
])
def test_a_bad_list_of_ids_is_refused_naming_the_field(world, django_user_model, body, message):
    response = post(client_of(django_user_model, "max"), world["team"], body)
    assert response.status_code == 400
    assert response.json() == {"error": message, "field": "ids"}
