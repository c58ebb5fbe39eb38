"""MLflow's artifact service under /mlflow/api/2.0/mlflow-artifacts/artifacts (webapp/external/artifacts.py), as the
client calls it for a run's `mlflow-artifacts:/EXPERIMENT/RUN/artifacts` URI; verl's validation files become the
run's evaluation generations. The real client's calls are in tests/e2e/test_mlflow_client.py."""
import json

import pytest
from django.contrib.auth import get_user_model

from tests.external.conftest import error_of
from tests.factories import make_team
from webapp.accounts.models import ApiToken
from webapp.external.models import EvalGeneration, RunArtifact

pytestmark = pytest.mark.django_db
SERVICE = "/mlflow/api/2.0/mlflow-artifacts/artifacts"


def root_of(mlflow, run_id):
    return mlflow.ok("runs/get", run_id=run_id)["run"]["info"]["artifact_uri"].removeprefix("mlflow-artifacts:/")


def put(mlflow, path, content: bytes, headers=None):
    return mlflow.client.generic("PUT", f"{SERVICE}/{path}", content, "application/octet-stream",
                                 **(headers or mlflow.headers))


def listed(mlflow, path):
    response = mlflow.client.get(SERVICE, {"path": path}, **mlflow.headers)
    assert response.status_code == 200, response.content
    return response.json().get("files", [])


def verl_file(step, rows):
    # verl/utils/tracking.py ValidationGenerationsLogger.log_generations_to_mlflow: json.dump of these rows
    return json.dumps([{"input": i, "output": o, "score": s} for i, o, s in rows]).encode()


def test_a_file_put_is_listed_and_read_back_byte_for_byte(mlflow):
    run_id = mlflow.new_run()
    root = root_of(mlflow, run_id)
    content = bytes(range(256)) * 10
    assert put(mlflow, f"{root}/plots/loss.png", content).status_code == 200
    assert put(mlflow, f"{root}/config.json", b'{"lr": 1e-6}').status_code == 200

    assert listed(mlflow, root) == [{"path": "config.json", "is_dir": False, "file_size": 12},
                                    {"path": "plots", "is_dir": True}]
    assert listed(mlflow, f"{root}/plots") == [{"path": "loss.png", "is_dir": False, "file_size": 2560}]
    response = mlflow.client.get(f"{SERVICE}/{root}/plots/loss.png", **mlflow.headers)
    assert response.status_code == 200 and response.content == content
    assert response["Content-Type"] == "application/octet-stream" and "attachment" in response["Content-Disposition"]


def test_a_file_put_again_replaces_the_first(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    put(mlflow, f"{root}/notes.txt", b"first")
    put(mlflow, f"{root}/notes.txt", b"second")
    assert mlflow.client.get(f"{SERVICE}/{root}/notes.txt", **mlflow.headers).content == b"second"
    assert RunArtifact.objects.count() == 1


def test_the_tracking_apis_artifacts_list_names_paths_from_the_runs_root(mlflow):
    run_id = mlflow.new_run()
    root = root_of(mlflow, run_id)
    put(mlflow, f"{root}/a/b.txt", b"b")
    answer = mlflow.ok("artifacts/list", run_id=run_id, path="a")
    assert answer == {"root_uri": f"mlflow-artifacts:/{root}", "files": [{"path": "a/b.txt", "is_dir": False,
                                                                          "file_size": 1}]}


def test_a_missing_file_answers_resource_does_not_exist(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    assert error_of(mlflow.client.get(f"{SERVICE}/{root}/nothing.txt", **mlflow.headers))[:2] == (
        404, "RESOURCE_DOES_NOT_EXIST")
    assert listed(mlflow, f"{root}/nowhere") == []


@pytest.mark.parametrize("tail", ["../other/artifacts/x", "a/../../x", "a\\b", "x%23y"])
def test_a_path_leaving_the_runs_artifacts_is_refused(mlflow, tail):
    root = root_of(mlflow, mlflow.new_run())
    status, code, message = error_of(put(mlflow, f"{root}/{tail}", b"x"))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "Invalid path" in message
    assert not RunArtifact.objects.exists()


def test_a_path_outside_any_run_is_refused_naming_the_layout(mlflow):
    status, code, message = error_of(put(mlflow, "somewhere/else.txt", b"x"))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "EXPERIMENT_ID/RUN_ID/artifacts" in message


def test_another_teams_run_answers_as_a_missing_one(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    put(mlflow, f"{root}/secret.txt", b"s")
    make_team("other", bob="member")
    bob = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(get_user_model().objects.get(username='bob'))}"}
    assert error_of(mlflow.client.get(f"{SERVICE}/{root}/secret.txt", **bob))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")
    assert error_of(put(mlflow, f"{root}/secret.txt", b"overwritten", headers=bob))[:2] == (
        404, "RESOURCE_DOES_NOT_EXIST")
    assert error_of(mlflow.client.get(SERVICE, {"path": root}, **bob))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")
    experiment, run_id, _ = root.split("/")
    other_experiment = mlflow.ok("experiments/create", {"name": "elsewhere"})["experiment_id"]
    assert error_of(mlflow.client.get(f"{SERVICE}/{other_experiment}/{run_id}/artifacts/secret.txt",
                                      **mlflow.headers))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")


def test_a_viewer_reads_artifacts_but_cannot_write_them(mlflow, user):
    root = root_of(mlflow, mlflow.new_run())
    put(mlflow, f"{root}/a.txt", b"a")
    membership = user.memberships.get()
    membership.role = "viewer"
    membership.save()
    assert mlflow.client.get(f"{SERVICE}/{root}/a.txt", **mlflow.headers).content == b"a"
    assert error_of(put(mlflow, f"{root}/b.txt", b"b"))[:2] == (403, "PERMISSION_DENIED")
    response = mlflow.client.delete(f"{SERVICE}/{root}/a.txt", **mlflow.headers)
    assert error_of(response)[:2] == (403, "PERMISSION_DENIED") and RunArtifact.objects.count() == 1


def test_a_file_past_the_limit_is_refused_naming_its_size_and_nothing_is_kept(mlflow, settings):
    settings.EXTERNAL_MAX_ARTIFACT_BYTES = 1000
    root = root_of(mlflow, mlflow.new_run())
    status, code, message = error_of(put(mlflow, f"{root}/model.pt", b"x" * 1001))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert "'model.pt' is 1001 bytes" in message and "at most 1000" in message
    assert not RunArtifact.objects.exists()
    assert put(mlflow, f"{root}/small.pt", b"x" * 1000).status_code == 200


def test_deleting_a_directory_deletes_what_is_under_it(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    for name in ("d/a.txt", "d/e/b.txt", "keep.txt"):
        put(mlflow, f"{root}/{name}", b"x")
    assert mlflow.client.delete(f"{SERVICE}/{root}/d", **mlflow.headers).status_code == 200
    assert list(RunArtifact.objects.values_list("path", flat=True)) == ["keep.txt"]


def test_the_multipart_upload_service_is_not_kept_and_says_so(mlflow):
    response = mlflow.client.post("/mlflow/api/2.0/mlflow-artifacts/mpu/create/1/x/artifacts/big.bin", "{}",
                                  content_type="application/json", **mlflow.headers)
    assert error_of(response)[:2] == (501, "NOT_IMPLEMENTED")


def test_without_a_token_the_service_says_how_to_send_one(mlflow, client):
    root = root_of(mlflow, mlflow.new_run())
    status, code, message = error_of(client.get(f"{SERVICE}/{root}/a.txt"))
    assert (status, code) == (401, "UNAUTHENTICATED") and "MLFLOW_TRACKING_TOKEN" in message


# --- verl's validation generations ---------------------------------------------------------------------------


def test_verls_validation_file_becomes_the_runs_evaluation_generations_of_its_step(mlflow):
    run_id = mlflow.new_run(tags={"evolab.answer_rule": "boxed"})
    root = root_of(mlflow, run_id)
    rows = [("What is 2+3?", "so \\boxed{5}", 1.0), ("What is 4*4?", "it is \\boxed{15}", 0.0)]
    assert put(mlflow, f"{root}/val_step20.json", verl_file(20, rows)).status_code == 200

    kept = list(EvalGeneration.objects.values_list("step", "index", "prompt", "output", "answer", "score"))
    assert kept == [(20, 0, "What is 2+3?", "so \\boxed{5}", "5", 1.0),
                    (20, 1, "What is 4*4?", "it is \\boxed{15}", "15", 0.0)]
    # the file itself is kept too, as MLflow keeps it
    assert mlflow.client.get(f"{SERVICE}/{root}/val_step20.json", **mlflow.headers).content == verl_file(20, rows)


def test_later_verls_table_shape_is_read_with_its_extra_fields(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    body = {"table_name": "val/generations", "rows": [
        {"input": "q", "output": "a", "score": 0.5, "reward": 0.25, "max_length_steps": 3}]}
    put(mlflow, f"{root}/val_step7.json", json.dumps(body).encode())
    generation = EvalGeneration.objects.get()
    assert (generation.step, generation.score, generation.extra) == (7, 0.5, {"reward": 0.25, "max_length_steps": 3})


def test_a_validation_file_uploaded_again_replaces_its_steps_generations(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    put(mlflow, f"{root}/val_step5.json", verl_file(5, [("a", "x", 1), ("b", "y", 0), ("c", "z", 1)]))
    put(mlflow, f"{root}/val_step6.json", verl_file(6, [("a", "x2", 1)]))
    put(mlflow, f"{root}/val_step5.json", verl_file(5, [("a", "again", 0)]))
    assert list(EvalGeneration.objects.values_list("step", "output")) == [(5, "again"), (6, "x2")]


def test_a_file_of_that_name_in_another_shape_is_an_artifact_and_nothing_else(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    for content in (b"not json", b'{"accuracy": 0.5}', b'[{"prompt": "no input field"}]'):
        assert put(mlflow, f"{root}/val_step1.json", content).status_code == 200
    assert put(mlflow, f"{root}/sub/val_step2.json", verl_file(2, [("a", "b", 1)])).status_code == 200
    assert not EvalGeneration.objects.exists() and RunArtifact.objects.count() == 2


def test_model_output_is_kept_as_text_whatever_it_holds(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    rows = [("<script>alert(1)</script>", "nul \x00 here", float("nan"))]
    put(mlflow, f"{root}/val_step3.json", json.dumps([{"input": i, "output": o, "score": s, "note": s}
                                                       for i, o, s in rows]).encode())
    generation = EvalGeneration.objects.get()
    assert generation.prompt == "<script>alert(1)</script>" and generation.output == "nul \ufffd here"
    assert generation.score is None and generation.extra == {"note": "nan", "score": "nan"}


def test_deleting_a_validation_file_deletes_its_generations(mlflow):
    root = root_of(mlflow, mlflow.new_run())
    put(mlflow, f"{root}/val_step5.json", verl_file(5, [("a", "x", 1)]))
    mlflow.client.delete(f"{SERVICE}/{root}/val_step5.json", **mlflow.headers)
    assert not EvalGeneration.objects.exists() and not RunArtifact.objects.exists()


def test_a_search_of_logged_models_finds_none_as_evolab_keeps_none(mlflow):
    # the client searches them before it reads a run's artifacts through a runs:/ URI
    experiment = mlflow.ok("experiments/create", {"name": "e"})["experiment_id"]
    assert mlflow.ok("logged-models/search", {"experiment_ids": [experiment], "filter": "name = 'model'"}) == {}
    assert error_of(mlflow.post("logged-models/search", {"experiment_ids": ["999999"]}))[:2] == (
        404, "RESOURCE_DOES_NOT_EXIST")


def test_mlflows_get_artifact_link_downloads_a_file_and_checks_the_path(mlflow):
    run_id = mlflow.new_run()
    put(mlflow, f"{root_of(mlflow, run_id)}/notes/a.txt", b"hello")
    answer = mlflow.client.get("/mlflow/get-artifact", {"run_id": run_id, "path": "notes/a.txt"}, **mlflow.headers)
    assert answer.status_code == 200 and answer.content == b"hello"
    refused = mlflow.client.get("/mlflow/get-artifact", {"run_id": run_id, "path": "../path"}, **mlflow.headers)
    assert refused.status_code == 400 and refused.json() == {"error_code": "INVALID_PARAMETER_VALUE",
                                                             "message": "Invalid path"}
