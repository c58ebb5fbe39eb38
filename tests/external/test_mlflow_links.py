"""The links the MLflow client prints ("View run at HOST/mlflow/#/experiments/E/runs/R", "View experiment at
HOST/mlflow/#/experiments/E") lead to the run and to the experiment's runs, through a sign-in too."""
import pytest

from tests.external.test_mlflow_artifacts import root_of
from tests.factories import make_team
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_the_link_page_asks_no_sign_in_so_the_path_it_goes_to_survives_one(client):
    # the fragment never reaches the server, and the sign-in form's POST loses it: the page must be reached first
    page = client.get("/mlflow/")
    assert page.status_code == 200 and b"experiments/" in page.content


def test_a_run_link_opened_signed_out_signs_in_and_comes_back_to_it(client, mlflow):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run())
    response = client.get(f"/mlflow/runs/{run.mlflow_run_id}/")
    assert response.status_code == 302 and f"next=/mlflow/runs/{run.mlflow_run_id}/" in response["Location"]
    signed_in = client.post(response["Location"], {"username": "ada", "password": "pw-for-tests-1"})
    assert signed_in["Location"] == f"/mlflow/runs/{run.mlflow_run_id}/"
    assert client.get(signed_in["Location"])["Location"] == f"/runs/{run.pk}/"


def test_an_experiment_link_opens_the_run_list_filtered_to_it(client, user, mlflow):
    first = Run.objects.get(mlflow_run_id=mlflow.new_run("in-gsm8k", mlflow.ok("experiments/create", {"name": "gsm8k"})["experiment_id"]))
    other = Run.objects.get(mlflow_run_id=mlflow.new_run("in-math", mlflow.ok("experiments/create", {"name": "math"})["experiment_id"]))
    experiment_id = root_of(mlflow, first.mlflow_run_id).split("/")[0]
    client.force_login(user)
    response = client.get(f"/mlflow/experiments/{experiment_id}/")
    assert response["Location"] == f"/?team={first.team_id}&experiment={experiment_id}"
    page = client.get(response["Location"]).content.decode()
    assert f'data-run-id="{first.pk}"' in page and f'data-run-id="{other.pk}"' not in page
    assert f'<option value="{experiment_id}" selected>gsm8k</option>' in page


def test_another_teams_experiment_is_not_found(client, mlflow, django_user_model):
    experiment_id = mlflow.ok("experiments/create", {"name": "private"})["experiment_id"]
    make_team("other", bob="member")
    client.force_login(django_user_model.objects.get(username="bob"))
    assert client.get(f"/mlflow/experiments/{experiment_id}/").status_code == 404
