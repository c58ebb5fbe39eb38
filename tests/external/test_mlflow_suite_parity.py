"""What MLflow's own tests (tests/tracking/test_rest_tracking.py, run by benchmarks/mlflow_suite.py) expect of a
tracking server, kept here as Evolab's: MLflow's wording of a bad field, its batch limits, and its refusal to touch
a deleted run (issue 37)."""

import pytest

from tests.external.conftest import error_of
from webapp.external.models import ExternalRun

pytestmark = pytest.mark.django_db


def test_it_names_a_run_id_that_is_not_a_string_in_mlflows_words(mlflow):
    status, code, message = error_of(mlflow.post("runs/log-metric", {"run_id": 31, "key": "m", "value": 1,
                                                                      "timestamp": 5, "step": 1}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert "Invalid value 31 for parameter 'run_id' supplied" in message


def test_it_names_a_step_that_is_not_a_number_in_mlflows_words(mlflow):
    run_id = mlflow.new_run()
    _, _, message = error_of(mlflow.post("runs/log-metric", {"run_id": run_id, "key": "m", "value": 1,
                                                              "timestamp": 5, "step": "foo"}))
    assert 'Invalid value "foo" for parameter \'step\' supplied' in message


def test_it_names_an_experiment_name_that_is_not_a_string_in_mlflows_words(mlflow):
    status, _, message = error_of(mlflow.post("experiments/create", {"name": 123}))
    assert status == 400 and "Invalid value 123 for parameter 'name'" in message


def test_it_refuses_a_search_of_more_runs_than_mlflow_allows_in_its_words(mlflow):
    _, _, message = error_of(mlflow.post("runs/search", {"experiment_ids": ["0"], "max_results": 123456789}))
    assert "Invalid value 123456789 for parameter 'max_results' supplied" in message


def test_it_refuses_a_batch_of_1001_metrics_with_mlflows_message(mlflow):
    run_id = mlflow.new_run()
    metrics = [{"key": f"m{i}", "value": 1.0, "timestamp": 1, "step": 0} for i in range(1001)]
    status, code, message = error_of(mlflow.post("runs/log-batch", {"run_id": run_id, "metrics": metrics}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert message == ("A batch logging request can contain at most 1000 metrics. Got 1001 metrics. Please split up "
                       "metrics across multiple requests and try again.")
    assert mlflow.ok("runs/get", run_id=run_id)["run"]["data"]["metrics"] == []


def test_it_refuses_a_batch_of_101_params_with_mlflows_message(mlflow):
    run_id = mlflow.new_run()
    params = [{"key": f"p{i}", "value": "v"} for i in range(101)]
    _, _, message = error_of(mlflow.post("runs/log-batch", {"run_id": run_id, "params": params}))
    assert message.startswith("A batch logging request can contain at most 100 params. Got 101 params.")


def test_it_refuses_a_batch_over_a_megabyte_with_mlflows_message_and_stores_nothing(mlflow):
    run_id = mlflow.new_run()
    params = [{"key": f"p{i}", "value": "x" * 5000} for i in range(100)]
    tags = [{"key": f"t{i}", "value": "y" * 7000} for i in range(100)]
    body = {"run_id": run_id, "params": params, "tags": tags}
    status, code, message = error_of(mlflow.post("runs/log-batch", body))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert message.startswith("Batched logging API requests must be at most 1000000 bytes, got a request of size ")
    assert ExternalRun.objects.get(run__mlflow_run_id=run_id).params == {}


def test_logging_to_a_deleted_run_is_an_invalid_parameter_in_mlflows_words(mlflow):
    run_id = mlflow.new_run()
    mlflow.ok("runs/delete", {"run_id": run_id})
    status, code, message = error_of(mlflow.post("runs/set-tag", {"run_id": run_id, "key": "k", "value": "v"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert message == f"The run {run_id} must be in the 'active' state. Current state is deleted."


def test_deleting_a_tag_of_a_deleted_run_is_refused_without_naming_evolabs_id(mlflow):
    run_id = mlflow.new_run()
    mlflow.ok("runs/set-tag", {"run_id": run_id, "key": "k", "value": "v"})
    mlflow.ok("runs/delete", {"run_id": run_id})
    status, code, message = error_of(mlflow.post("runs/delete-tag", {"run_id": run_id, "key": "k"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert message == f"The run {run_id} must be in the 'active' state. Current state is deleted."
    assert ExternalRun.objects.get(run__mlflow_run_id=run_id).tags.get("k") == "v"


def test_deleting_a_missing_tag_names_the_mlflow_run_id(mlflow):
    run_id = mlflow.new_run()
    status, code, message = error_of(mlflow.post("runs/delete-tag", {"run_id": run_id, "key": "nope"}))
    assert (status, code) == (404, "RESOURCE_DOES_NOT_EXIST")
    assert message == f"No tag with name: nope in run with id {run_id}"
