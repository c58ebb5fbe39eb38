"""GET /api/compare?runs=1,2,3&names=... (DESIGN §4.6)."""
import pytest

from tests.factories import make_prompt_set, make_team
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000.0


def make_run(user, name, values, prompt_set=None, method="ttrl", **fields):
    run = Run.objects.create(name=name, method=method, prompt_set=prompt_set or make_prompt_set(user, name=f"ps-{name}"),
                             max_steps=len(values), created_by=user, **fields)
    ingest_events(run, [{"seq": n, "time": T0 + n, "type": "metrics", "step": n + 1, "values": v} for n, v in enumerate(values)])
    return run


def test_two_runs_are_returned_with_their_series_for_overlay(api_client, user):
    a = make_run(user, "a", [{"entropy": 1.0, "loss": 3.0}, {"entropy": 0.8, "loss": 2.0}], hyperparameters={"n_votes": 8})
    b = make_run(user, "b", [{"entropy": 0.9}, {"entropy": 0.7}, {"entropy": 0.6}], method="evol_rl")
    response = api_client.get(f"/api/compare?runs={b.pk},{a.pk}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert [r["id"] for r in body["runs"]] == [b.pk, a.pk]
    first = body["runs"][1]
    assert first["name"] == "a" and first["method"] == "ttrl" and first["state"] == "queued"
    assert first["team"] == a.team_id and first["hyperparameters"] == {"n_votes": 8} and "team_name" in first
    assert body["metrics"][str(a.pk)]["entropy"] == {"steps": [1, 2], "values": [1.0, 0.8], "times": [T0, T0 + 1]}
    assert body["metrics"][str(b.pk)]["entropy"]["steps"] == [1, 2, 3]
    assert "loss" not in body["metrics"][str(b.pk)]


def test_names_since_step_and_max_points_apply_to_every_run(api_client, user):
    a = make_run(user, "a", [{"entropy": float(s), "loss": 1.0} for s in range(50)])
    b = make_run(user, "b", [{"entropy": float(-s)} for s in range(50)])
    body = api_client.get(f"/api/compare?runs={a.pk},{b.pk}&names=entropy&since_step=10&max_points=6").json()
    for run in (a, b):
        series = body["metrics"][str(run.pk)]
        assert list(series) == ["entropy"]
        assert len(series["entropy"]["steps"]) <= 6 and min(series["entropy"]["steps"]) > 10
    assert 49.0 in body["metrics"][str(a.pk)]["entropy"]["values"]


def test_a_run_of_another_team_makes_the_whole_request_a_404(api_client, user, django_user_model):
    mine = make_run(user, "mine", [{"entropy": 1.0}])
    team = make_team("elsewhere", bob="admin")
    bob = django_user_model.objects.get(username="bob")
    theirs = make_run(bob, "theirs", [{"entropy": 1.0}], prompt_set=make_prompt_set(bob, team=team, name="bob-set"))
    response = api_client.get(f"/api/compare?runs={mine.pk},{theirs.pk}")
    assert response.status_code == 404 and response.json() == {"error": f"no run with id {theirs.pk}"}
    missing = api_client.get(f"/api/compare?runs={mine.pk},999999")
    assert missing.status_code == 404 and missing.json() == {"error": "no run with id 999999"}


def test_more_than_ten_runs_is_a_400(api_client, user):
    runs = [make_run(user, f"r{i}", [{"entropy": 1.0}], prompt_set=None) for i in range(11)]
    response = api_client.get("/api/compare?runs=" + ",".join(str(r.pk) for r in runs))
    assert response.status_code == 400 and response.json()["field"] == "runs" and "10" in response.json()["error"]
    ten = api_client.get("/api/compare?runs=" + ",".join(str(r.pk) for r in runs[:10]))
    assert ten.status_code == 200 and len(ten.json()["runs"]) == 10


@pytest.mark.parametrize("query, field", [("", "runs"), ("?runs=1,x", "runs"), ("?runs=1&max_points=1", "max_points"),
                                          ("?runs=1&since_step=a", "since_step")])
def test_bad_parameters_are_a_400_naming_the_field(api_client, user, query, field):
    make_run(user, "a", [{"entropy": 1.0}])
    response = api_client.get("/api/compare" + query)
    assert response.status_code == 400 and response.json()["field"] == field


def test_it_needs_authentication(client):
    assert client.get("/api/compare?runs=1").status_code == 401
