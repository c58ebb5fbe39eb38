"""Hostile values in POST /api/runs: each is a 400 naming the field, never a 500, and no run is
written. On PostgreSQL an over-long name, a NUL or a seed past 32 bits reached the database and
failed there; Infinity and 1e400 (JSON numbers Python reads as inf) crashed int()."""
import json

import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker_needed(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)


@pytest.fixture
def prompt_set(user):
    return make_prompt_set(user)


def post(api_client, prompt_set, **fields):
    body = {"name": "r", "method": "ttrl", "prompt_set": prompt_set.pk, "max_steps": 2, **fields}
    return api_client.post("/api/runs", json.dumps(body, allow_nan=True), content_type="application/json")


@pytest.mark.parametrize("field, value", [
    ("max_steps", float("inf")), ("max_steps", 1e300), ("max_steps", True), ("max_steps", 2.5), ("max_steps", "²"),
    ("seed", float("inf")), ("seed", 2**40), ("seed", -1), ("seed", "1e400"),
    ("gpus", float("nan")), ("gpus", 10**30),
    ("name", "n" * 201), ("name", "a\x00b"), ("name", ["a list"]),
    ("model", "m" * 501), ("model", "m\x00"),
    ("tags", ["ok", "bad\x00tag"]),
])
def test_a_hostile_value_is_a_400_naming_its_field_and_writes_nothing(api_client, prompt_set, field, value):
    response = post(api_client, prompt_set, **{field: value})
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == field
    assert not Run.objects.exists()


def test_infinity_in_a_hyperparameter_is_a_400_naming_it(api_client, prompt_set):
    response = api_client.post("/api/runs", '{"name": "r", "method": "ttrl", "prompt_set": %d, "max_steps": 2, '
                               '"hyperparameters": {"learning_rate": Infinity, "temperature": 1e400}}' % prompt_set.pk,
                               content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] in ("learning_rate", "temperature")
    assert not Run.objects.exists()


def test_an_integral_float_is_taken_as_its_whole_number(api_client, prompt_set):
    response = post(api_client, prompt_set, max_steps=3.0, seed="7")
    assert response.status_code == 201, response.content
    assert (response.json()["max_steps"], Run.objects.get().seed) == (3, 7)


# "²" passes str.isdigit() but not int(); 5,000 digits pass both and overflow the database's bigint; a NUL
# and a lone surrogate cannot be sent to PostgreSQL at all. Each was a 500.
@pytest.mark.parametrize("team", ["²", "9" * 5000, "a\x00b", "\ud800", "t" * 10_000])
def test_a_hostile_team_is_a_4xx_naming_the_team_and_writes_nothing(api_client, prompt_set, team):
    response = post(api_client, prompt_set, team=team)
    assert response.status_code in (400, 404), response.content[:300]
    body = response.json()
    assert body["field"] == "team" and "no team" in body["error"]
    assert len(body["error"]) < 200  # the value is shortened in the message, not echoed whole
    assert not Run.objects.exists()


def test_a_whole_number_past_any_range_in_a_hyperparameter_is_a_400_naming_it(api_client, prompt_set):
    response = api_client.post("/api/runs", '{"name": "r", "method": "ttrl", "prompt_set": %d, "max_steps": 2, '
                               '"hyperparameters": {"n_votes": 1%s}}' % (prompt_set.pk, "0" * 400),
                               content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == "n_votes"
    assert not Run.objects.exists()


@pytest.mark.parametrize("path", ["/api/runs", "/api/runs/{run}/clone"])
def test_json_nested_100000_deep_is_a_400_that_says_so(api_client, prompt_set, path):
    run = post(api_client, prompt_set).json()["id"]
    body = '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}"
    response = api_client.post(path.format(run=run), body, content_type="application/json")
    assert response.status_code == 400, response.content[:300]
    assert "nested" in response.json()["error"]
    assert Run.objects.count() == 1


@pytest.mark.parametrize("hyperparameters, field, said", [
    ({"temperature": 0}, "temperature", "(0, 2]"), ({"temperature": "0.0"}, "temperature", "(0, 2]"),
    ({"n_votes": 1, "n_train": 1}, "n_votes", "[2, 1024]"),
])
def test_a_value_the_trainer_would_refuse_is_refused_at_launch(api_client, prompt_set, hyperparameters, field, said):
    """The trainer refuses these when the run starts (exit code 2 on the worker): the launch refuses them first."""
    response = post(api_client, prompt_set, hyperparameters=hyperparameters)
    assert response.status_code == 400, response.content[:300]
    assert response.json()["field"] == field and said in response.json()["error"]
    assert not Run.objects.exists()
