"""Helpers for the tests of runs trained elsewhere: MLflow's protocol spoken through Django's test client with
an API token as the MLflow client sends it (`Authorization: Bearer`)."""
import json

import pytest

from webapp.accounts.models import ApiToken
from webapp.external.charting import chart_waiting
from webapp.runs.models import Run


class Mlflow:
    """MLflow's REST calls as the client makes them: POST with a JSON body, GET with query parameters."""

    def __init__(self, client, key):
        self.client, self.headers = client, {"HTTP_AUTHORIZATION": f"Bearer {key}"}

    def post(self, endpoint, body=None):
        return self.client.post(f"/mlflow/api/2.0/mlflow/{endpoint}", json.dumps(body or {}),
                                content_type="application/json", **self.headers)

    def get(self, endpoint, **params):
        return self.client.get(f"/mlflow/api/2.0/mlflow/{endpoint}", params, **self.headers)

    def ok(self, endpoint, body=None, **params):
        response = self.get(endpoint, **params) if body is None and params else self.post(endpoint, body)
        assert response.status_code == 200, response.content
        return response.json()

    def new_run(self, name="r1", experiment_id="0", tags=None):
        body = {"experiment_id": experiment_id, "run_name": name, "start_time": 1_795_000_000_000,
                "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()]}
        return self.ok("runs/create", body)["run"]["info"]["run_id"]

    def log(self, run_id, step, values, timestamp=1_795_000_000_000):
        self.ok("runs/log-batch", {"run_id": run_id, "metrics": [
            {"key": k, "value": v, "timestamp": timestamp + step * 1000, "step": step} for k, v in values.items()]})


@pytest.fixture
def mlflow(client, user):
    return Mlflow(client, ApiToken.issue(user))


@pytest.fixture
def no_enqueue(monkeypatch):
    """The tasks these requests queue (grouping rollouts): recorded, not sent; a real worker runs them in tests/e2e."""
    sent = []
    monkeypatch.setattr("webapp.tasks.app.send_task",
                        lambda name, args, queue, countdown=None, **retry: sent.append((name, args, countdown)))
    return sent


def charted(run_id) -> Run:
    """The run (by its MLflow run id) once a worker has charted the metrics it logged: the task its log requests
    ask for (webapp/external/charting.py), which a real worker runs in tests/e2e."""
    run = Run.objects.get(mlflow_run_id=run_id)
    chart_waiting(run.pk)
    return Run.objects.get(pk=run.pk)


def error_of(response) -> tuple[int, str, str]:
    """(status, MLflow error_code, message) of an error answer."""
    body = response.json()
    return response.status_code, body["error_code"], body["message"]
