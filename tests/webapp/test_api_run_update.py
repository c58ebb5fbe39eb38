"""PATCH /api/runs/{id}: a member renames, annotates, re-tags and archives a run; a viewer cannot."""
import pytest

from tests.factories import make_prompt_set, make_team, signed_in, team_of
from webapp.accounts.models import Membership
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(user):
    return Run.objects.create(name="first", method="ttrl", prompt_set=make_prompt_set(user), max_steps=5,
                              created_by=user, tags=["a"])


def patch(client, run, **body):
    return client.patch(f"/api/runs/{run.pk}", body, content_type="application/json")


def test_a_member_renames_annotates_and_retags_a_run(api_client, run):
    response = patch(api_client, run, name="  better name ", notes="lr too high?\nsee step 40 <b>", tags="x, y, x")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["name"], body["notes"], body["tags"]) == ("better name", "lr too high?\nsee step 40 <b>", ["x", "y"])
    run.refresh_from_db()
    assert (run.name, run.tags) == ("better name", ["x", "y"])


def test_only_the_fields_given_change(api_client, run):
    patch(api_client, run, notes="kept")
    body = patch(api_client, run, tags=[]).json()
    assert (body["name"], body["notes"], body["tags"]) == ("first", "kept", [])


def test_an_archived_run_leaves_the_run_list_and_comes_back_when_asked_for(api_client, client, user, run):
    active = Run.objects.create(name="active", method="ttrl", prompt_set=run.prompt_set, team=run.team, max_steps=2,
                                created_by=user)
    assert patch(api_client, run, archived=True).json()["archived"] is True
    client.force_login(user)
    assert f'data-run-id="{run.pk}"' not in client.get("/").content.decode()
    included = client.get("/?archived=1").content.decode()
    # "Include archived": the archived run, marked, with the active ones (to be ticked together and compared)
    assert f'data-run-id="{run.pk}"' in included and f'data-run-id="{active.pk}"' in included
    assert included.count('data-field="archived"') == 1
    assert api_client.get(f"/api/runs/{run.pk}").json()["archived"] is True  # kept: its page and API still answer
    assert patch(api_client, run, archived=False).json()["archived"] is False
    assert f'data-run-id="{run.pk}"' in client.get("/").content.decode()


@pytest.mark.parametrize("body, field", [
    ({"name": "  "}, "name"),
    ({"name": 3}, "name"),
    ({"notes": "x" * 20_001}, "notes"),
    ({"notes": "bell\x07"}, "notes"),
    ({"tags": {"a": 1}}, "tags"),
    ({"archived": "yes"}, "archived"),
    ({"method": "empo"}, "method"),
])
def test_it_refuses_a_bad_change_naming_the_field(api_client, run, body, field):
    response = patch(api_client, run, **body)
    assert response.status_code == 400 and response.json()["field"] == field, response.content
    run.refresh_from_db()
    assert run.name == "first" and run.notes == ""


def test_a_viewer_cannot_change_a_run(django_user_model, user, run):
    make_team(team_of(user).name, vic=Membership.VIEWER)
    response = patch(signed_in(django_user_model, "vic"), run, name="mine now")
    assert response.status_code == 403
    run.refresh_from_db()
    assert run.name == "first"


def test_another_teams_run_is_not_found(django_user_model, run):
    make_team("elsewhere", eve=Membership.MEMBER)
    assert patch(signed_in(django_user_model, "eve"), run, name="x").status_code == 404
