"""No value a trainer reports answers 500 (docs/security.md, "Numbers and text the database cannot store"). The
MLflow client retries a 500 for minutes, stalling the trainer: every string field of the /mlflow endpoints and of
POST /api/runs/{id}/rollouts is sent a lone surrogate (as the JSON escape), and every field a huge integer, 1e400,
NaN and ±Infinity. Each answer is a success (a text stored as the database can hold it) or a 4xx naming the field."""
import json

import pytest

from tests.external.conftest import error_of
from webapp.external.models import Experiment, ExternalRun, PendingRollout
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

HUGE = 10 ** 370  # an integer JSON reads whole and float() cannot take
OVERFLOW = "__1e400__"  # sent as the number 1e400, which JSON reads as infinity
HOSTILE = ["\ud800", HUGE, OVERFLOW, float("nan"), float("inf"), float("-inf")]


def as_json(body) -> str:
    """The body as a client's JSON: a lone surrogate as its escape (\\ud800), NaN and Infinity as Python writes
    them, and the number 1e400 written out."""
    return json.dumps(body).replace(f'"{OVERFLOW}"', "1e400")


def put(body, path, value):
    """A copy of `body` with `value` at `path` (keys and list indexes)."""
    body = json.loads(json.dumps(body))
    place = body
    for step in path[:-1]:
        place = place[step]
    place[path[-1]] = value
    return body


T = {"key": "k", "value": "v"}
MLFLOW_FIELDS = [  # (endpoint, a valid body, the fields to spoil): RUN and EXP stand for a run's and an experiment's ids
    ("experiments/create", {"name": "e2", "tags": [T]}, [("name",), ("tags", 0, "key"), ("tags", 0, "value")]),
    ("experiments/update", {"experiment_id": "EXP", "new_name": "e3"}, [("experiment_id",), ("new_name",)]),
    ("experiments/set-experiment-tag", {"experiment_id": "EXP", **T}, [("experiment_id",), ("key",), ("value",)]),
    ("experiments/delete-experiment-tag", {"experiment_id": "EXP", "key": "k"}, [("key",)]),
    ("experiments/delete", {"experiment_id": "EXP"}, [("experiment_id",)]),
    ("experiments/restore", {"experiment_id": "EXP"}, [("experiment_id",)]),
    ("experiments/search", {"filter": "name = 'e'", "max_results": 5, "view_type": "ALL", "page_token": "MA=="},
     [("filter",), ("max_results",), ("view_type",), ("page_token",)]),
    ("runs/create", {"experiment_id": "EXP", "run_name": "r2", "user_id": "u", "start_time": 1, "tags": [T]},
     [("experiment_id",), ("run_name",), ("user_id",), ("start_time",), ("tags", 0, "key"), ("tags", 0, "value")]),
    ("runs/update", {"run_id": "RUN", "status": "RUNNING", "end_time": 1, "run_name": "r3"},
     [("run_id",), ("status",), ("end_time",), ("run_name",)]),
    ("runs/delete", {"run_id": "RUN"}, [("run_id",)]),
    ("runs/restore", {"run_id": "RUN"}, [("run_id",)]),
    ("runs/search", {"experiment_ids": ["EXP"], "filter": "params.p LIKE 'a%'", "run_view_type": "ALL",
                     "max_results": 5, "order_by": ["params.p"], "page_token": "MA=="},
     [("experiment_ids", 0), ("filter",), ("run_view_type",), ("max_results",), ("order_by", 0), ("page_token",)]),
    ("runs/log-batch", {"run_id": "RUN", "metrics": [{"key": "m", "value": 1.0, "timestamp": 1, "step": 1}],
                        "params": [{"key": "p", "value": "v"}], "tags": [T]},
     [("run_id",), ("metrics", 0, "key"), ("metrics", 0, "value"), ("metrics", 0, "timestamp"), ("metrics", 0, "step"),
      ("params", 0, "key"), ("params", 0, "value"), ("tags", 0, "key"), ("tags", 0, "value")]),
    ("runs/log-metric", {"run_id": "RUN", "key": "m", "value": 1.0, "timestamp": 1, "step": 1},
     [("key",), ("value",), ("timestamp",), ("step",)]),
    ("runs/log-parameter", {"run_id": "RUN", "key": "p2", "value": "v"}, [("key",), ("value",)]),
    ("runs/set-tag", {"run_id": "RUN", **T}, [("run_id",), ("key",), ("value",)]),
    ("runs/delete-tag", {"run_id": "RUN", "key": "k"}, [("run_id",), ("key",)]),
]


@pytest.fixture
def ids(mlflow):
    experiment = mlflow.ok("experiments/create", {"name": "e", "tags": [T]})["experiment_id"]
    run_id = mlflow.new_run("r", experiment_id=experiment, tags={"k": "v"})
    return {"EXP": experiment, "RUN": run_id}


def named(field: tuple) -> str:
    """The word an error about `field` must hold: its name (metrics[0].value's is 'value')."""
    return next(str(step) for step in reversed(field) if isinstance(step, str))


@pytest.mark.parametrize("endpoint, body, field", [(e, b, f) for e, b, fields in MLFLOW_FIELDS for f in fields],
                         ids=lambda value: ".".join(map(str, value)) if isinstance(value, tuple) else
                         value if isinstance(value, str) else "")
def test_every_mlflow_field_takes_any_value_without_a_500(mlflow, ids, endpoint, body, field):
    body = json.loads(json.dumps(body).replace('"EXP"', json.dumps(ids["EXP"])).replace('"RUN"', json.dumps(ids["RUN"])))
    for value in HOSTILE:
        response = mlflow.client.post(f"/mlflow/api/2.0/mlflow/{endpoint}", as_json(put(body, field, value)),
                                      content_type="application/json", **mlflow.headers)
        assert response.status_code in (200, 400, 404), (value, response.content[:300])
        if response.status_code == 400 and error_of(response)[1] == "INVALID_PARAMETER_VALUE":
            assert named(field) in error_of(response)[2], (value, response.content[:300])


@pytest.mark.parametrize("endpoint, params", [
    ("experiments/get", {"experiment_id": "1"}),
    ("experiments/get-by-name", {"experiment_name": "e"}),
    ("runs/get", {"run_id": "RUN"}),
    ("metrics/get-history", {"run_id": "RUN", "metric_key": "m", "max_results": "5", "page_token": "MA=="}),
])
def test_every_query_parameter_takes_any_value_without_a_500(mlflow, ids, endpoint, params):
    params = {k: ids.get(v, v) for k, v in params.items()}
    # a query string is bytes: a surrogate's UTF-8 form and NUL are what a client can put there
    for name in params:
        for value in ("%ED%A0%80", "%00", "1" * 400, "1e400", "NaN", "-Infinity"):
            query = "&".join(f"{k}={value if k == name else v}" for k, v in params.items())
            response = mlflow.client.get(f"/mlflow/api/2.0/mlflow/{endpoint}?{query}", **mlflow.headers)
            assert response.status_code in (200, 400, 404), (name, value, response.content[:300])


# --- what each is answered ------------------------------------------------------------------------------


def test_a_metric_value_past_a_floats_range_is_refused_naming_it(mlflow, ids):
    response = mlflow.client.post("/mlflow/api/2.0/mlflow/runs/log-batch", as_json(
        {"run_id": ids["RUN"], "metrics": [{"key": "loss", "value": HUGE, "step": 1, "timestamp": 1_795_000_000_000}]}),
        content_type="application/json", **mlflow.headers)
    status, code, message = error_of(response)
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "metrics[0].value" in message and "'loss'" in message
    assert Run.objects.get(mlflow_run_id=ids["RUN"]).last_step is None


LARGEST = 1.7976931348623157e308


# MLflow's SQL store writes ±inf as ±the largest float and NaN as NaN (sanitize_metric_value)
@pytest.mark.parametrize("value, kept", [(OVERFLOW, LARGEST), (float("inf"), LARGEST), (float("-inf"), -LARGEST),
                                         (float("nan"), "NaN")])
def test_a_metric_of_infinity_or_nan_is_kept_as_mlflow_keeps_it(mlflow, ids, value, kept):
    mlflow.ok("runs/log-metric", {"run_id": ids["RUN"], "key": "loss", "value": 1.0, "timestamp": 1, "step": 1})
    response = mlflow.client.post("/mlflow/api/2.0/mlflow/runs/log-metric", as_json(
        {"run_id": ids["RUN"], "key": "loss", "value": value, "timestamp": 2, "step": 2}), content_type="application/json",
        **mlflow.headers)
    assert response.status_code == 200, response.content
    history = mlflow.ok("metrics/get-history", run_id=ids["RUN"], metric_key="loss")["metrics"]
    assert [(m["step"], m["value"]) for m in history] == [(1, 1.0), (2, kept)]


@pytest.mark.parametrize("endpoint, body, field", [
    ("experiments/create", {"name": "bad\ud800"}, "name"),
    ("experiments/update", {"experiment_id": "EXP", "new_name": "bad\ud800"}, "new_name"),
    ("runs/create", {"experiment_id": "EXP", "run_name": "bad\ud800"}, "run_name"),
    ("runs/update", {"run_id": "RUN", "run_name": "bad\ud800"}, "run_name"),
    ("runs/log-metric", {"run_id": "RUN", "key": "bad\ud800", "value": 1.0, "timestamp": 1, "step": 1}, "metrics[0].key"),
    ("runs/log-parameter", {"run_id": "RUN", "key": "bad\ud800", "value": "v"}, "params[0].key"),
    ("runs/set-tag", {"run_id": "RUN", "key": "bad\ud800", "value": "v"}, "tags[0].key"),
    ("experiments/set-experiment-tag", {"experiment_id": "EXP", "key": "bad\ud800", "value": "v"}, "tags[0].key"),
])
def test_a_name_or_key_with_a_lone_surrogate_is_refused_naming_the_field(mlflow, ids, endpoint, body, field):
    body = json.loads(json.dumps(body).replace('"EXP"', json.dumps(ids["EXP"])).replace('"RUN"', json.dumps(ids["RUN"])))
    status, code, message = error_of(mlflow.post(endpoint, body))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and field in message and "surrogate" in message
    assert not Experiment.objects.filter(name__startswith="bad").exists()
    assert not Run.objects.filter(name__startswith="bad").exists()


def test_a_param_or_tag_value_with_a_lone_surrogate_is_stored_with_the_replacement_character(mlflow, ids):
    mlflow.ok("runs/log-batch", {"run_id": ids["RUN"], "params": [{"key": "path", "value": "/data/\udcff.parquet"}],
                                 "tags": [{"key": "note", "value": "x\ud800y"}]})
    mlflow.ok("experiments/set-experiment-tag", {"experiment_id": ids["EXP"], "key": "note", "value": "\ud800"})
    # a retry sends the same text: the param is the same, not a change MLflow would refuse
    mlflow.ok("runs/log-parameter", {"run_id": ids["RUN"], "key": "path", "value": "/data/\udcff.parquet"})
    external = ExternalRun.objects.get(run__mlflow_run_id=ids["RUN"])
    assert external.params["path"] == "/data/\ufffd.parquet" and external.tags["note"] == "x\ufffdy"
    assert Experiment.objects.get(pk=ids["EXP"]).tags["note"] == "\ufffd"


# --- rollouts -------------------------------------------------------------------------------------------

ROLLOUT = {"step": 1, "prompt": "p", "prompt_id": "p1", "index": 0, "completion": "c", "reward": 1.0,
           "rewards": {"acc": 1.0}, "advantage": 0.5, "answer": "4", "label": "4", "length": 3, "extras": {"x": 1.0}}
ROLLOUT_FIELDS = [("step",), ("prompt",), ("prompt_id",), ("index",), ("completion",), ("reward",), ("rewards", "acc"),
                  ("advantage",), ("answer",), ("label",), ("length",), ("extras", "x"), ("extras", "x", 0)]


@pytest.mark.parametrize("field", ROLLOUT_FIELDS, ids=lambda field: ".".join(map(str, field)))
def test_every_rollout_field_takes_any_value_without_a_500(api_client, mlflow, no_enqueue, field):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run())
    for value in HOSTILE:
        line = put(ROLLOUT, field[:2], [value]) if field[-1] == 0 else put(ROLLOUT, field, value)
        response = api_client.post(f"/api/runs/{run.pk}/rollouts", as_json(line) + "\n",
                                   content_type="application/x-ndjson")
        assert response.status_code in (200, 400), (value, response.content[:300])
        if response.status_code == 400:
            body = response.json()
            assert body.get("field") == field[0] and field[0] in body["error"], (value, body)


def test_a_rollout_key_with_a_lone_surrogate_is_stored_with_the_replacement_character(api_client, mlflow, no_enqueue):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run())
    line = {**ROLLOUT, "rewards": {"acc\ud800": 1.0}, "extras": {"note\ud800": "x\ud800"}}
    assert api_client.post(f"/api/runs/{run.pk}/rollouts", as_json(line), content_type="application/x-ndjson"
                           ).status_code == 200
    stored = PendingRollout.objects.get(run=run)
    assert stored.rewards == {"acc\ufffd": 1.0} and stored.extras == {"note\ufffd": "x\ufffd"}


@pytest.mark.parametrize("line, field, words", [
    ({**ROLLOUT, "reward": HUGE}, "reward", "'reward' must be a number"),
    ({**ROLLOUT, "rewards": {"acc": HUGE}}, "rewards", "'rewards.acc' must be a number"),
    ({**ROLLOUT, "advantage": OVERFLOW}, "advantage", "'advantage' must be a number"),
    ({**ROLLOUT, "extras": {"x": OVERFLOW}}, "extras", "'extras.x' is not a finite number"),
    ({**ROLLOUT, "extras": {"x": {"y": [1, HUGE]}}}, "extras", "'extras.x.y[1]' is not a finite number"),
])
def test_a_number_past_a_floats_range_in_a_rollout_is_refused_naming_it(api_client, mlflow, no_enqueue, line, field,
                                                                        words):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run())
    response = api_client.post(f"/api/runs/{run.pk}/rollouts", as_json(line), content_type="application/x-ndjson")
    assert response.status_code == 400 and response.json()["field"] == field and words in response.json()["error"]
    assert not PendingRollout.objects.filter(run=run).exists()
