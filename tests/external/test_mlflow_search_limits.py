"""runs/search and experiments/search cost a bounded time whatever they are sent (docs/security.md, "Searches
that cannot stall the server"): LIKE is matched in time linear in the value, a LIKE pattern has a length limit,
and runs/search names at most MLflow's number of experiments, read in one query. The same searches against the
real server, with another team's reads timed meanwhile: tests/e2e/test_mlflow_search_stall.py."""
import time

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.external.conftest import error_of
from webapp.external.like import MAX_PATTERN_LENGTH
from webapp.external.mlflow_views import MAX_EXPERIMENT_IDS_PER_SEARCH

pytestmark = pytest.mark.django_db


def test_a_hostile_like_search_of_a_long_parameter_answers_at_once(mlflow):
    experiment = mlflow.ok("experiments/create", {"name": "sweep"})["experiment_id"]
    run_id = mlflow.new_run("r", experiment_id=experiment)
    mlflow.ok("runs/log-parameter", {"run_id": run_id, "key": "p", "value": "a" * 6000})  # MLflow's longest param
    mlflow.ok("runs/set-tag", {"run_id": run_id, "key": "t", "value": "a" * 7999 + "b"})
    started = time.monotonic()
    for clause, found in (("params.p LIKE '%a%a%a%a%b'", 0), ("params.p ILIKE '%A%A%A%A%A'", 1),
                          (f"tags.t LIKE '{'%a' * 200}%b'", 1), (f"tags.t LIKE '{'%a_' * 150}%'", 1),
                          (f"params.p NOT LIKE '{'%_' * 240}%b'", 1)):
        body = {"experiment_ids": [experiment], "filter": clause}
        assert len(mlflow.ok("runs/search", body)["runs"]) == found, clause
    assert time.monotonic() - started < 2  # the first alone took 53 s when matched by a regular expression


def test_a_hostile_like_search_of_experiment_names_answers_at_once(mlflow):
    mlflow.ok("experiments/create", {"name": "a" * 500})
    started = time.monotonic()
    found = mlflow.ok("experiments/search", {"filter": "name LIKE '%a%a%a%a%a%a%b'", "max_results": 10})
    assert found == {"experiments": []} and time.monotonic() - started < 1
    assert len(mlflow.ok("experiments/search", {"filter": "name ILIKE '%A%A%A%A%A%A%A'"})["experiments"]) == 1


@pytest.mark.parametrize("endpoint, body", [
    ("runs/search", {"experiment_ids": ["0"], "filter": "params.p LIKE '{}'"}),
    ("runs/search", {"experiment_ids": ["0"], "filter": "tags.t NOT ILIKE '{}'"}),
    ("experiments/search", {"filter": "name LIKE '{}'"}),
])
def test_it_refuses_a_like_pattern_longer_than_the_limit(mlflow, endpoint, body):
    at_limit = {**body, "filter": body["filter"].format("%a" * (MAX_PATTERN_LENGTH // 2))}
    assert mlflow.post(endpoint, at_limit).status_code == 200
    over = {**body, "filter": body["filter"].format("%a" * (MAX_PATTERN_LENGTH // 2) + "%")}
    status, code, message = error_of(mlflow.post(endpoint, over))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert f"{MAX_PATTERN_LENGTH + 1:,} characters" in message and f"at most {MAX_PATTERN_LENGTH}" in message


def test_it_refuses_more_experiment_ids_than_mlflows_limit_saying_so(mlflow):
    ids = [mlflow.ok("experiments/create", {"name": "sweep"})["experiment_id"]] * (MAX_EXPERIMENT_IDS_PER_SEARCH + 1)
    status, code, message = error_of(mlflow.post("runs/search", {"experiment_ids": ids}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    # MLflow's wording for its requests that take a list of ids (its tests match substrings)
    assert message == (f"SearchRuns request cannot specify more than {MAX_EXPERIMENT_IDS_PER_SEARCH} experiment_ids. "
                       f"Received {MAX_EXPERIMENT_IDS_PER_SEARCH + 1} experiment_ids.")
    assert mlflow.post("runs/search", {"experiment_ids": ids[:MAX_EXPERIMENT_IDS_PER_SEARCH]}).status_code == 200


def test_the_experiments_named_are_read_in_one_query_however_many(mlflow):
    ids = [mlflow.ok("experiments/create", {"name": f"e{i}"})["experiment_id"] for i in range(30)]
    mlflow.new_run("r", experiment_id=ids[-1])

    def queries(experiment_ids):
        with CaptureQueriesContext(connection) as captured:
            assert len(mlflow.ok("runs/search", {"experiment_ids": experiment_ids})["runs"]) == 1
        return len(captured)

    assert queries(ids) == queries(ids[-1:])


def test_a_missing_experiment_among_those_named_is_named(mlflow):
    mine = mlflow.ok("experiments/create", {"name": "sweep"})["experiment_id"]
    for missing in ("999999", "x", "99999999999999999999"):
        status, code, message = error_of(mlflow.post("runs/search", {"experiment_ids": [mine, missing]}))
        assert (status, code) == (404, "RESOURCE_DOES_NOT_EXIST") and f"id={missing}" in message
