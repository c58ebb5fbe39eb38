"""MLflow experiments in teams (DESIGN §4.8): a user in one team names them as MLflow does, a user in several
teams says TEAM/NAME; another team's experiment answers like a missing one, in MLflow's error format."""
import pytest
from django.contrib.auth import get_user_model

from tests.external.conftest import Mlflow, error_of
from tests.factories import make_team
from webapp.accounts.models import ApiToken
from webapp.external.models import Experiment

pytestmark = pytest.mark.django_db


def test_it_creates_an_experiment_in_the_users_only_team(mlflow, user):
    experiment_id = mlflow.ok("experiments/create", {"name": "verl_grpo"})["experiment_id"]
    experiment = Experiment.objects.get(pk=experiment_id)
    assert experiment.name == "verl_grpo" and experiment.team.memberships.filter(user=user).exists()
    got = mlflow.ok("experiments/get-by-name", experiment_name="verl_grpo")["experiment"]
    assert got["experiment_id"] == experiment_id and got["name"] == "verl_grpo" and got["lifecycle_stage"] == "active"


def test_a_missing_experiment_is_resource_does_not_exist_as_the_client_expects(mlflow):
    # mlflow.set_experiment reads this answer as "create it"
    assert error_of(mlflow.get("experiments/get-by-name", experiment_name="nope"))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")
    assert error_of(mlflow.get("experiments/get", experiment_id="999"))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")


def test_a_second_experiment_of_the_same_name_is_resource_already_exists(mlflow):
    mlflow.ok("experiments/create", {"name": "x"})
    assert error_of(mlflow.post("experiments/create", {"name": "x"}))[:2] == (400, "RESOURCE_ALREADY_EXISTS")


def test_experiment_zero_is_the_teams_default_made_when_first_used(mlflow):
    got = mlflow.ok("experiments/get", experiment_id="0")["experiment"]
    assert got["name"] == "Default" and got["experiment_id"] != "0"
    assert mlflow.ok("experiments/get", experiment_id="0")["experiment"]["experiment_id"] == got["experiment_id"]


def test_a_user_in_several_teams_names_the_team(client, django_user_model):
    make_team("vision", kim="member")
    make_team("nlp", kim="member")
    kim = django_user_model.objects.get(username="kim")
    mlflow = Mlflow(client, ApiToken.issue(kim))
    status, code, message = error_of(mlflow.post("experiments/create", {"name": "grpo"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "'vision'" in message and "TEAM/grpo" in message
    experiment_id = mlflow.ok("experiments/create", {"name": "nlp/grpo"})["experiment_id"]
    assert Experiment.objects.get(pk=experiment_id).team.name == "nlp"
    assert mlflow.ok("experiments/get", experiment_id=experiment_id)["experiment"]["name"] == "nlp/grpo"
    assert error_of(mlflow.post("runs/create", {"experiment_id": "0"}))[1] == "INVALID_PARAMETER_VALUE"


def test_another_teams_experiment_answers_like_a_missing_one(mlflow, client):
    theirs = make_team("other", bob="admin")
    secret = Experiment.objects.create(team=theirs, name="secret")
    for response in (mlflow.get("experiments/get", experiment_id=str(secret.pk)),
                     mlflow.get("experiments/get-by-name", experiment_name="other/secret"),
                     mlflow.post("runs/create", {"experiment_id": str(secret.pk)})):
        status, code, _ = error_of(response)
        assert (status, code) in ((404, "RESOURCE_DOES_NOT_EXIST"), (400, "INVALID_PARAMETER_VALUE"))
    mine = {e["name"] for e in mlflow.ok("experiments/search", {"max_results": 100})["experiments"]}
    assert "secret" not in mine and "other/secret" not in mine


def test_a_viewer_reads_but_cannot_create(client):
    team = make_team("lab", vic="viewer")
    Experiment.objects.create(team=team, name="shared")
    vic = get_user_model().objects.get(username="vic")
    mlflow = Mlflow(client, ApiToken.issue(vic))
    assert mlflow.ok("experiments/get-by-name", experiment_name="shared")["experiment"]["name"] == "shared"
    assert error_of(mlflow.post("experiments/create", {"name": "mine"}))[:2] == (403, "PERMISSION_DENIED")


def test_search_filters_by_name_and_deleted_experiments_leave_the_active_list(mlflow):
    a = mlflow.ok("experiments/create", {"name": "grpo-math"})["experiment_id"]
    mlflow.ok("experiments/create", {"name": "ppo-code"})
    found = mlflow.ok("experiments/search", {"filter": "name LIKE 'grpo%'", "max_results": 10})["experiments"]
    assert [e["name"] for e in found] == ["grpo-math"]
    mlflow.ok("experiments/delete", {"experiment_id": a})
    active = {e["name"] for e in mlflow.ok("experiments/search", {"max_results": 10})["experiments"]}
    deleted = {e["name"] for e in mlflow.ok("experiments/search", {"max_results": 10, "view_type": "DELETED_ONLY"})["experiments"]}
    assert "grpo-math" not in active and deleted == {"grpo-math"}
    mlflow.ok("experiments/restore", {"experiment_id": a})
    mlflow.ok("experiments/update", {"experiment_id": a, "new_name": "grpo-math-v2"})
    assert mlflow.ok("experiments/get", experiment_id=a)["experiment"]["name"] == "grpo-math-v2"


def test_a_filter_it_cannot_read_is_named_in_the_error(mlflow):
    status, code, message = error_of(mlflow.post("experiments/search", {"filter": "name ~~ 'x'"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "~~" in message
