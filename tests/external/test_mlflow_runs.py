"""An MLflow run is an Evolab run trained elsewhere (DESIGN §4.8): created running in the team, its state
following runs/update, shown by GET /api/runs/{id} with its source and MLflow run id, gone from every page
when deleted through the protocol (and back when restored)."""
import pytest

from tests.external.conftest import error_of
from tests.factories import make_team
from webapp.alerts.models import Alert
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_a_run_created_through_mlflow_is_an_external_run_running_in_the_team(mlflow, api_client, user):
    run_id = mlflow.new_run("qwen-run1", tags={"mlflow.user": "root", "mlflow.source.name": "main_ppo.py"})
    run = Run.objects.get(mlflow_run_id=run_id)
    assert run.source == "external" and run.state == "running" and run.name == "qwen-run1"
    assert run.prompt_set is None and run.created_by == user and run.started_at.timestamp() == 1_795_000_000
    shown = api_client.get(f"/api/runs/{run.pk}").json()
    assert shown["source"] == "external" and shown["mlflow_run_id"] == run_id and shown["state"] == "running"
    got = mlflow.ok("runs/get", run_id=run_id)["run"]
    assert got["info"]["status"] == "RUNNING" and got["info"]["run_name"] == "qwen-run1"
    tags = {t["key"]: t["value"] for t in got["data"]["tags"]}
    assert tags["evolab.run_id"] == str(run.pk) and tags["mlflow.source.name"] == "main_ppo.py"


def test_a_run_without_a_name_gets_one(mlflow):
    body = mlflow.ok("runs/create", {"experiment_id": "0"})["run"]["info"]
    assert body["run_name"].startswith("run-") and Run.objects.get(mlflow_run_id=body["run_id"]).name == body["run_name"]


@pytest.mark.parametrize("status, state", [("FINISHED", "succeeded"), ("FAILED", "failed"), ("KILLED", "cancelled")])
def test_the_run_ends_as_its_trainer_says(mlflow, status, state, django_capture_on_commit_callbacks):
    run_id = mlflow.new_run()
    with django_capture_on_commit_callbacks(execute=True):
        info = mlflow.ok("runs/update", {"run_id": run_id, "status": status, "end_time": 1_795_000_360_000})["run_info"]
    run = Run.objects.get(mlflow_run_id=run_id)
    assert info["status"] == status and info["end_time"] == 1_795_000_360_000
    assert run.state == state and run.finished_at.timestamp() == 1_795_000_360
    # a failed run raises run_failed as an Evolab-trained one does
    assert Alert.objects.filter(run=run, rule="run_failed").exists() == (state == "failed")


def test_a_run_reported_running_again_goes_on(mlflow):
    run_id = mlflow.new_run()
    mlflow.ok("runs/update", {"run_id": run_id, "status": "FINISHED"})
    mlflow.ok("runs/update", {"run_id": run_id, "status": "RUNNING", "run_name": "renamed"})
    run = Run.objects.get(mlflow_run_id=run_id)
    assert run.state == "running" and run.finished_at is None and run.name == "renamed"


def test_an_unknown_status_is_refused_by_name(mlflow):
    run_id = mlflow.new_run()
    status, code, message = error_of(mlflow.post("runs/update", {"run_id": run_id, "status": "DONE"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "'DONE'" in message and "FINISHED" in message


def test_an_external_run_cannot_be_cancelled_resumed_or_cloned_from_evolab(mlflow, api_client, client, user):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run())
    for action in ("cancel", "resume", "clone"):
        response = api_client.post(f"/api/runs/{run.pk}/{action}")
        assert response.status_code == 409 and "trained elsewhere" in response.json()["error"], action
    client.force_login(user)
    assert client.get(f"/runs/new/?clone={run.pk}").status_code == 404


def test_a_deleted_run_leaves_evolab_and_comes_back_when_restored(mlflow, api_client):
    run_id = mlflow.new_run()
    pk = Run.objects.get(mlflow_run_id=run_id).pk
    mlflow.ok("runs/delete", {"run_id": run_id})
    assert api_client.get(f"/api/runs/{pk}").status_code == 404
    assert pk not in [r["id"] for r in api_client.get("/api/runs").json()["runs"]]
    assert mlflow.ok("runs/get", run_id=run_id)["run"]["info"]["lifecycle_stage"] == "deleted"
    mlflow.ok("runs/restore", {"run_id": run_id})
    assert api_client.get(f"/api/runs/{pk}").status_code == 200


def test_another_teams_run_answers_like_a_missing_one(mlflow, client, django_user_model):
    from tests.external.conftest import Mlflow
    from webapp.accounts.models import ApiToken

    make_team("other", bob="admin")
    theirs = Mlflow(client, ApiToken.issue(django_user_model.objects.get(username="bob")))
    run_id = theirs.new_run("secret")
    for response in (mlflow.get("runs/get", run_id=run_id), mlflow.get("metrics/get-history", run_id=run_id, metric_key="x"),
                     mlflow.post("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "x", "value": 1, "step": 1, "timestamp": 1_795_000_000_000}]}),
                     mlflow.post("runs/update", {"run_id": run_id, "status": "KILLED"}),
                     mlflow.post("runs/delete", {"run_id": run_id})):
        assert error_of(response)[:2] == (404, "RESOURCE_DOES_NOT_EXIST")
    assert error_of(mlflow.get("runs/get", run_id="0" * 32))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")
    assert Run.objects.get(mlflow_run_id=run_id).state == "running"


def test_search_finds_runs_by_metric_param_tag_and_name_in_order(mlflow):
    experiment = mlflow.ok("experiments/create", {"name": "sweep"})["experiment_id"]
    for name, lr, entropy in (("a", "1e-6", 0.9), ("b", "3e-6", 0.2), ("c", "1e-6", 0.05)):
        run_id = mlflow.new_run(name, experiment_id=experiment, tags={"sweep": "lr"})
        mlflow.ok("runs/log-batch", {"run_id": run_id, "params": [{"key": "lr", "value": lr}],
                                     "metrics": [{"key": "actor/entropy", "value": entropy, "step": 1, "timestamp": 1_795_000_000_000}]})

    def names(filter_text, order=None):
        body = {"experiment_ids": [experiment], "filter": filter_text, "max_results": 10}
        if order:
            body["order_by"] = [order]
        return [r["info"]["run_name"] for r in mlflow.ok("runs/search", body)["runs"]]

    assert names("params.lr = '1e-6'", "metrics.`actor/entropy` ASC") == ["c", "a"]
    assert names("metrics.`actor/entropy` < 0.5 and tags.sweep = 'lr'", "attributes.run_name DESC") == ["c", "b"]
    assert names("metrics.entropy < 0.5") == []  # Evolab charts it as `entropy` too; MLflow knows the logged name
    assert names("attributes.run_name LIKE 'b%'") == ["b"]
    assert names("attributes.status = 'RUNNING'", "attributes.run_name") == ["a", "b", "c"]
    page = mlflow.ok("runs/search", {"experiment_ids": [experiment], "max_results": 2})
    rest = mlflow.ok("runs/search", {"experiment_ids": [experiment], "max_results": 2, "page_token": page["next_page_token"]})
    assert len(page["runs"]) == 2 and len(rest["runs"]) == 1 and "next_page_token" not in rest
    latest = {m["key"]: m["value"] for m in page["runs"][0]["data"]["metrics"]}
    assert set(latest) == {"actor/entropy"}  # what was logged, as MLflow returns it
    status, code, message = error_of(mlflow.post("runs/search", {"experiment_ids": [experiment],
                                                                 "filter": "metrics.x > 'high'"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "number" in message
