"""MLflow's bulk histories (its UI's ajax-api: metrics/get-history-bulk and get-history-bulk-interval), as its own
tests (test_rest_tracking.py test_get_metric_history_bulk_*) expect them; another team's runs are never read."""
import pytest

from tests.external.conftest import error_of
from tests.factories import make_team
from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.django_db
BULK = "/mlflow/ajax-api/2.0/mlflow/metrics/get-history-bulk"

A_HISTORY = [{"key": "metricA", "timestamp": 1, "step": 2, "value": 10.0},
             {"key": "metricA", "timestamp": 1, "step": 3, "value": 11.0},
             {"key": "metricA", "timestamp": 1, "step": 3, "value": 12.0},
             {"key": "metricA", "timestamp": 2, "step": 3, "value": 12.0}]


def log_all(mlflow, run_id, history, plus=0.0):
    for metric in history:
        mlflow.ok("runs/log-metric", {"run_id": run_id, **metric, "value": metric["value"] + plus})


def test_it_returns_each_runs_history_in_mlflows_order_runs_by_id(mlflow):
    first, second, empty = (mlflow.new_run(f"r{i}") for i in range(3))
    log_all(mlflow, first, A_HISTORY)
    log_all(mlflow, second, A_HISTORY, plus=1.0)
    answer = mlflow.client.get(BULK, {"run_id": [first, second, empty], "metric_key": "metricA"}, **mlflow.headers)
    assert answer.status_code == 200
    assert answer.json()["metrics"] == sorted(
        [{**m, "run_id": first} for m in A_HISTORY] + [{**m, "run_id": second, "value": m["value"] + 1}
                                                        for m in A_HISTORY], key=lambda m: m["run_id"])
    limited = mlflow.client.get(BULK, {"run_id": [first], "metric_key": "metricA", "max_results": 2}, **mlflow.headers)
    assert limited.json()["metrics"] == [{**m, "run_id": first} for m in A_HISTORY[:2]]


@pytest.mark.parametrize("params, words", [
    ({"metric_key": "key"}, "must specify at least one run_id"),
    ({"run_id": [f"id_{i}" for i in range(101)], "metric_key": "key"}, "cannot specify more than 100 run_ids"),
    ({"run_id": ["123"]}, "must specify a metric_key"),
])
def test_it_refuses_what_mlflow_refuses_in_its_words(mlflow, params, words):
    status, code, message = error_of(mlflow.client.get(BULK, params, **mlflow.headers))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and words in message


def test_another_teams_run_is_left_out(mlflow, django_user_model):
    run_id = mlflow.new_run()
    log_all(mlflow, run_id, A_HISTORY)
    make_team("other", bob="member")
    bob = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(django_user_model.objects.get(username='bob'))}"}
    assert mlflow.client.get(BULK, {"run_id": [run_id], "metric_key": "metricA"}, **bob).json() == {"metrics": []}
    answer = mlflow.client.get(BULK + "-interval", {"run_ids": [run_id], "metric_key": "metricA"}, **bob)
    assert error_of(answer)[:2] == (404, "RESOURCE_DOES_NOT_EXIST")


def test_the_interval_samples_evenly_by_step_keeping_the_first_and_the_last(mlflow):
    run_id = mlflow.new_run()
    mlflow.ok("runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "loss", "value": float(step), "timestamp": 1000 + step, "step": step} for step in range(10)]})
    answer = mlflow.client.get(BULK + "-interval", {"run_ids": [run_id], "metric_key": "loss", "max_results": 4},
                               **mlflow.headers)
    assert [m["step"] for m in answer.json()["metrics"]] == [0, 3, 6, 9]
    windowed = mlflow.client.get(BULK + "-interval", {"run_ids": [run_id], "metric_key": "loss", "start_step": 2,
                                                      "end_step": 4}, **mlflow.headers)
    assert [m["step"] for m in windowed.json()["metrics"]] == [2, 3, 4]
    for params, words in (({"max_results": 2501}, "max_results must be between 1 and 2500"),
                          ({"start_step": 1}, "both must be specified"),
                          ({"start_step": 5, "end_step": 1}, "end_step must be greater than start_step")):
        refused = mlflow.client.get(BULK + "-interval", {"run_ids": [run_id], "metric_key": "loss", **params},
                                    **mlflow.headers)
        assert error_of(refused)[:2] == (400, "INVALID_PARAMETER_VALUE") and words in error_of(refused)[2]


def test_a_thousand_run_ids_are_refused_in_mlflows_words_not_djangos_page(mlflow):
    # Django refuses more than DATA_UPLOAD_MAX_NUMBER_FIELDS query fields with its own HTML 400
    status, code, message = error_of(mlflow.client.get(BULK, {"run_id": [f"id_{i}" for i in range(1000)],
                                                               "metric_key": "key"}, **mlflow.headers))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert "GetMetricHistoryBulk request cannot specify more than 100" in message
