"""What a client gets for a request Evolab will not take over MLflow's protocol: always MLflow's error JSON
with a 4xx (501 for logged models, datasets and traces, which Evolab does not keep), never a crash or an HTML page."""
import json

import pytest

from tests.external.conftest import error_of
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


def test_without_a_token_it_says_how_to_send_one(client):
    status, code, message = error_of(client.post("/mlflow/api/2.0/mlflow/runs/create", "{}", content_type="application/json"))
    assert (status, code) == (401, "UNAUTHENTICATED") and "MLFLOW_TRACKING_TOKEN" in message


def test_a_wrong_token_is_unauthenticated(client):
    response = client.get("/mlflow/api/2.0/mlflow/experiments/get", {"experiment_id": "0"},
                          HTTP_AUTHORIZATION="Bearer not-a-token")
    assert error_of(response)[:2] == (401, "UNAUTHENTICATED")


def test_a_signed_in_browser_session_is_not_enough(client, user):
    # token only: these views skip CSRF, so a cookie must not authenticate them
    client.force_login(user)
    assert error_of(client.get("/mlflow/api/2.0/mlflow/experiments/get", {"experiment_id": "0"}))[0] == 401


def test_an_invalid_token_is_unauthenticated_whatever_cookie_is_sent(client, user):
    # the token alone authenticates: a signed-in browser's cookie beside a wrong token must not stand in for it
    client.force_login(user)
    wrong = {"HTTP_AUTHORIZATION": "Bearer not-a-token"}
    assert error_of(client.get("/mlflow/api/2.0/mlflow/experiments/get", {"experiment_id": "0"}, **wrong))[:2] == (
        401, "UNAUTHENTICATED")
    response = client.post("/mlflow/api/2.0/mlflow/runs/create", '{"experiment_id": "0", "run_name": "r"}',
                           content_type="application/json", **wrong)
    assert error_of(response)[:2] == (401, "UNAUTHENTICATED") and not Run.objects.exists()


@pytest.mark.parametrize("body, words", [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, "nests too deeply"),
])
def test_a_malformed_body_is_malformed_request(mlflow, body, words):
    response = mlflow.client.post("/mlflow/api/2.0/mlflow/runs/create", body, content_type="application/json",
                                  **mlflow.headers)
    status, code, message = error_of(response)
    assert (status, code) == (400, "MALFORMED_REQUEST") and words in message


@pytest.mark.parametrize("endpoint, body", [
    ("runs/create", {"experiment_id": "0", "start_time": "yesterday"}),
    ("runs/create", {"experiment_id": "0", "run_name": 42}),
    ("runs/create", {"experiment_id": "0", "tags": [{"key": "", "value": "x"}]}),
    ("runs/create", {"experiment_id": "0", "run_name": "a\x00b"}),
    ("runs/log-batch", {"metrics": [{"key": "x", "value": 1}]}),
    ("runs/log-metric", {"run_id": "RID", "key": "x", "value": 1, "step": 2 ** 63}),
    ("runs/log-metric", {"run_id": "RID", "key": "x", "value": 1, "step": 10 ** 40}),
    ("runs/log-metric", {"run_id": "RID", "key": "x", "value": None, "step": 1}),
    ("runs/log-batch", {"run_id": "RID", "metrics": "x"}),
    ("runs/log-batch", {"run_id": "RID", "metrics": [5]}),
    ("runs/log-batch", {"run_id": "RID", "params": [{"key": "p", "value": "v" * 6001}]}),
    ("runs/search", {"experiment_ids": []}),
    ("runs/search", {"experiment_ids": ["0"], "order_by": "start_time"}),
    ("runs/search", {"experiment_ids": ["0"], "filter": "metrics.x >"}),
    ("runs/search", {"experiment_ids": ["0"], "max_results": 0}),
    ("runs/update", {"run_id": "RID", "status": "RUNNING", "end_time": "soon"}),
])
def test_a_field_it_cannot_take_is_invalid_parameter_value_naming_it(mlflow, endpoint, body):
    run_id = mlflow.new_run()
    body = json.loads(json.dumps(body).replace("RID", run_id))
    status, code, message = error_of(mlflow.post(endpoint, body))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE"), message
    assert Run.objects.get(mlflow_run_id=run_id).last_step is None


@pytest.mark.parametrize("path", [
    "/mlflow/api/2.0/mlflow-artifacts/mpu/create/1/abc/artifacts/model.pt",
    "/mlflow/api/2.0/mlflow/runs/log-model",
    "/mlflow/api/2.0/mlflow/runs/log-inputs",
    "/mlflow/api/2.0/mlflow/logged-models",
    "/mlflow/api/3.0/mlflow/traces",
])
def test_models_datasets_and_traces_are_not_kept_and_it_says_so(mlflow, path):
    response = mlflow.client.post(path, "{}", content_type="application/json", **mlflow.headers)
    status, code, message = error_of(response)
    assert (status, code) == (501, "NOT_IMPLEMENTED") and "logged models" in message


def test_an_unknown_endpoint_and_a_wrong_method_answer_in_mlflows_format(mlflow):
    assert error_of(mlflow.post("runs/fly"))[:2] == (404, "ENDPOINT_NOT_FOUND")
    assert error_of(mlflow.client.get("/mlflow/nothing/here", **mlflow.headers))[:2] == (404, "ENDPOINT_NOT_FOUND")
    response = mlflow.client.get("/mlflow/api/2.0/mlflow/runs/create", **mlflow.headers)
    assert response.status_code == 405 and "error_code" in response.json()
