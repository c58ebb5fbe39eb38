"""The API answers in JSON whatever goes wrong (an unknown path, an id too long for the database, a
failure of its own), and numbers in request text that Python's isdigit() accepts but int() or the
database cannot take ('²', 20 digits, 1e400) are a 4xx naming the field, never a 500."""
import json

import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)


def test_an_unknown_api_path_is_a_json_404(api_client):
    response = api_client.get("/api/no-such-thing")
    assert response.status_code == 404 and "/api/no-such-thing" in response.json()["error"]


def test_an_id_longer_than_the_database_takes_is_a_json_404(api_client):
    response = api_client.get("/api/runs/99999999999999999999999")
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


def test_a_failure_inside_an_api_view_is_a_json_500(api_client, run, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("a bug")

    monkeypatch.setattr("webapp.explorer.api_views.search", broken)
    api_client.raise_request_exception = False
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search")
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert "a bug" not in response.content.decode()  # the traceback goes to the log, not the client


@pytest.mark.parametrize("value", ["²", "١٢", "99999999999999999999", "-1", "1.5"])
def test_a_search_step_that_is_not_a_whole_number_is_a_400_naming_it(api_client, run, value):
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search", {"step_min": value})
    assert response.status_code == 400, response.content
    assert response.json()["field"] == "step_min"


@pytest.mark.parametrize("value", ["²", "99999999999999999999"])
def test_the_alerts_run_filter_refuses_what_int_or_the_database_cannot_take(api_client, value):
    response = api_client.get("/api/alerts", {"run": value})
    assert response.status_code == 400 and "whole number" in response.json()["error"]


@pytest.mark.parametrize("prompt_set", ["1e400", "true", '"²"', "99999999999999999999", "-3"])
def test_a_run_with_an_impossible_prompt_set_id_is_a_400_naming_it(api_client, prompt_set):
    body = '{"name": "x", "method": "ttrl", "max_steps": 2, "prompt_set": %s}' % prompt_set
    response = api_client.post("/api/runs", body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert json.loads(response.content)["field"] == "prompt_set"


def test_the_rollouts_page_shows_the_latest_step_for_a_step_it_cannot_read(client, user, run):
    client.force_login(user)
    for value in ("²", "99999999999999999999"):
        assert client.get(f"/runs/{run.pk}/rollouts/", {"step": value}).status_code == 200


# A NUL cannot reach PostgreSQL in a query: a path segment holding one was a database error (500). No object's
# name or id holds a control character (uploads and ingestion refuse them), so such a path names nothing.
@pytest.mark.parametrize("path", ["/api/runs/{run}/groups/1/%00", "/api/runs/{run}/prompts/a%00b/history",
                                  "/api/runs/{run}/groups/1/%01x"])
def test_a_control_character_in_a_path_segment_is_a_json_404(api_client, run, path):
    response = api_client.get(path.format(run=run.pk))
    assert response.status_code == 404 and response["Content-Type"] == "application/json"


def test_a_control_character_in_a_page_path_is_the_sites_404(user, run):
    from django.test import Client

    browser = Client()
    browser.force_login(user)
    response = browser.get(f"/runs/{run.pk}/prompts/%00/")
    assert response.status_code == 404 and "text/html" in response["Content-Type"]


@pytest.mark.parametrize("query", ["step_min=%00", "q=a%00b", "order=%00"])
def test_a_nul_in_a_query_parameter_is_a_400_naming_it(api_client, run, query):
    response = api_client.get(f"/api/runs/{run.pk}/rollouts/search?{query}")
    assert response.status_code == 400
    assert response.json()["field"] == query.split("=")[0]
