"""runs/search and experiments/search read filters and orders as MLflow's server does (mlflow/utils/search_utils.py,
its SQL store's ordering): bare attribute keys, MLflow's aliases, IS NULL, datasets, `!=` on a missing value, NaN
in an order, experiments' times and the Default experiment (issue 37, item 4)."""
import os

import pytest

from tests.external.conftest import error_of

pytestmark = pytest.mark.django_db


def names(mlflow, filter_text="", order_by=None, experiment_id="0"):
    body = {"experiment_ids": [experiment_id], "filter": filter_text}
    if order_by:
        body["order_by"] = order_by
    return [r["info"]["run_name"] for r in mlflow.ok("runs/search", body).get("runs", [])]


@pytest.fixture
def three_runs(mlflow):
    ids = {}
    for name in ("grpo-a", "grpo-b", "ttrl-c"):
        ids[name] = mlflow.new_run(name)
    mlflow.ok("runs/log-batch", {"run_id": ids["grpo-a"], "metrics": [{"key": "loss", "value": 0.1, "timestamp": 1,
                                                                       "step": 0}],
                                 "params": [{"key": "lr", "value": "1e-6"}]})
    mlflow.ok("runs/log-batch", {"run_id": ids["grpo-b"], "metrics": [{"key": "loss", "value": "NaN", "timestamp": 1,
                                                                       "step": 0}],
                                 "tags": [{"key": "team", "value": "x"}]})
    return ids


def test_a_bare_key_is_an_attribute_and_run_name_like_is_read(mlflow, three_runs):
    assert sorted(names(mlflow, "run_name LIKE 'grpo%'")) == ["grpo-a", "grpo-b"]
    assert sorted(names(mlflow, "attributes.run_name ILIKE 'GRPO-A'")) == ["grpo-a"]
    assert sorted(names(mlflow, "status = 'RUNNING' AND run_name != 'ttrl-c'")) == ["grpo-a", "grpo-b"]


def test_created_stands_for_start_time_and_is_compared_as_a_number(mlflow, three_runs):
    assert len(names(mlflow, "attributes.created > 0")) == 3
    assert names(mlflow, "created < 0") == []
    assert len(names(mlflow, "attributes.`Run name` LIKE '%-%'")) == 3


def test_is_null_and_is_not_null_test_params_and_tags(mlflow, three_runs):
    assert sorted(names(mlflow, "params.lr IS NULL")) == ["grpo-b", "ttrl-c"]
    assert names(mlflow, "params.lr IS NOT NULL") == ["grpo-a"]
    assert names(mlflow, "tags.team IS NOT NULL") == ["grpo-b"]
    status, code, message = error_of(mlflow.post("runs/search", {"experiment_ids": ["0"],
                                                                 "filter": "metrics.loss IS NULL"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "only supported for tags and params" in message


def test_a_datasets_clause_matches_no_run_as_none_logs_datasets(mlflow, three_runs):
    assert names(mlflow, "datasets.name = 'gsm8k'") == []
    assert names(mlflow, "dataset.digest != 'abc'") == []
    assert "Invalid dataset key" in error_of(mlflow.post("runs/search", {"experiment_ids": ["0"],
                                                                         "filter": "datasets.size = 'x'"}))[2]


def test_not_equal_leaves_out_a_run_without_the_value(mlflow, three_runs):
    # MLflow: a run without `loss` matches no comparison of it, `!=` included
    assert sorted(names(mlflow, "metrics.loss != 0.2")) == ["grpo-a", "grpo-b"]  # NaN != 0.2, as in Python
    assert "ttrl-c" not in names(mlflow, "params.lr != 'x'") and "ttrl-c" not in names(mlflow, "tags.team != 'y'")


def test_not_in_takes_a_list(mlflow, three_runs):
    assert names(mlflow, "run_name NOT IN ('grpo-a', 'grpo-b')") == ["ttrl-c"]


def test_an_order_puts_numbers_first_then_nan_then_missing_whichever_the_direction(mlflow, three_runs):
    # MLflow's SQL store: CASE is_nan THEN 1, value IS NULL THEN 2, ELSE 0 ascending, then the value
    assert names(mlflow, order_by=["metrics.loss ASC"]) == ["grpo-a", "grpo-b", "ttrl-c"]
    assert names(mlflow, order_by=["metrics.loss DESC"]) == ["grpo-a", "grpo-b", "ttrl-c"]
    assert names(mlflow, order_by=["params.lr DESC"])[0] == "grpo-a"


def test_the_artifact_uri_is_an_attribute(mlflow, three_runs):
    uri = mlflow.ok("runs/get", run_id=three_runs["grpo-a"])["run"]["info"]["artifact_uri"]
    assert names(mlflow, f"attributes.artifact_uri = '{uri}'") == ["grpo-a"]


# --- experiments ---------------------------------------------------------------------------------------------


def experiment_names(mlflow, **body):
    return [e["name"] for e in mlflow.ok("experiments/search", body).get("experiments", [])]


def test_a_fresh_team_lists_its_default_experiment(mlflow):
    assert experiment_names(mlflow) == ["Default"]


def test_experiments_are_searched_and_ordered_as_mlflows_own_test_expects(mlflow):
    # tests/tracking/test_rest_tracking.py::test_search_experiments
    ids = [mlflow.ok("experiments/create", {"name": name, "tags": [{"key": "key", "value": v}] if v else []})[
        "experiment_id"] for name, v in (("a", "value"), ("ab", "vaLue"), ("Abc", None))]
    assert experiment_names(mlflow, filter="attribute.name = 'a'") == ["a"]
    assert experiment_names(mlflow, filter="attribute.name != 'a'") == ["Abc", "ab", "Default"]
    assert experiment_names(mlflow, filter="name LIKE 'a%'") == ["ab", "a"]
    assert experiment_names(mlflow, filter="tag.key = 'value'") == ["a"]
    assert experiment_names(mlflow, filter="tag.key != 'value'") == ["ab"]
    assert experiment_names(mlflow, filter="tag.key ILIKE '%alu%'") == ["ab", "a"]
    assert experiment_names(mlflow, order_by=["name DESC"]) == ["ab", "a", "Default", "Abc"]
    page = mlflow.ok("experiments/search", {"max_results": 2})
    assert [e["name"] for e in page["experiments"]] == ["Abc", "ab"]
    assert experiment_names(mlflow, page_token=page["next_page_token"]) == ["a", "Default"]
    mlflow.ok("experiments/delete", {"experiment_id": ids[1]})
    assert experiment_names(mlflow, view_type="DELETED_ONLY") == ["ab"]
    assert experiment_names(mlflow, view_type="ALL") == ["Abc", "ab", "a", "Default"]


def test_experiments_filter_on_their_creation_time(mlflow):
    mlflow.ok("experiments/create", {"name": "new"})
    created = {e["name"]: int(e["creation_time"]) for e in mlflow.ok("experiments/search", {})["experiments"]}
    assert experiment_names(mlflow, filter=f"creation_time >= {created['new']}") == ["new"]
    assert experiment_names(mlflow, filter=f"attributes.creation_time < {created['new']}") == ["Default"]
    assert experiment_names(mlflow, filter="last_update_time > 0", order_by=["creation_time ASC"]) == ["Default", "new"]


def test_an_unknown_experiment_order_is_refused_naming_the_keys(mlflow):
    status, _, message = error_of(mlflow.post("experiments/search", {"order_by": ["color DESC"]}))
    assert status == 400 and "Valid keys" in message


def test_an_artifact_location_is_kept_and_must_be_text(mlflow):
    experiment_id = mlflow.ok("experiments/create", {"name": "located", "artifact_location": "s3://bucket/e"})[
        "experiment_id"]
    assert mlflow.ok("experiments/get", experiment_id=experiment_id)["experiment"]["artifact_location"] == \
        "s3://bucket/e"
    run_id = mlflow.new_run("r", experiment_id)
    assert mlflow.ok("runs/get", run_id=run_id)["run"]["info"]["artifact_uri"] == f"s3://bucket/e/{run_id}/artifacts"
    # a relative local path is made absolute against the server's working directory, as MLflow's store does
    relative = mlflow.ok("experiments/create", {"name": "here", "artifact_location": "my_location"})["experiment_id"]
    assert mlflow.ok("experiments/get", experiment_id=relative)["experiment"]["artifact_location"] == \
        os.path.abspath("my_location")
    _, _, message = error_of(mlflow.post("experiments/create", {"name": "x", "artifact_location": 9.0}))
    assert "Invalid value 9.0 for parameter 'artifact_location'" in message


def test_a_tag_or_param_value_that_is_not_text_is_refused_and_nothing_kept(mlflow):
    run_id = mlflow.new_run()
    for field in ("tags", "params"):
        status, _, message = error_of(mlflow.post("runs/log-batch", {"run_id": run_id, field: [
            {"key": "k", "value": 3}]}))
        assert status == 400 and f"Invalid value 3 for parameter '{field}[0].value' supplied" in message
    run = mlflow.ok("runs/get", run_id=run_id)["run"]["data"]
    assert "k" not in {t["key"] for t in run.get("tags", [])} and not run.get("params")
