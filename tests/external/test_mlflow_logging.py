"""Metrics, params and tags over MLflow's protocol go through the same ingestion as an Evolab-trained run's
(series, alert rules, live messages); a known trainer's names are kept and mapped onto DESIGN §5's; a bad
batch is refused whole, naming what is wrong, and a batch sent again stores nothing twice."""
import pytest

from tests.external.conftest import charted, error_of
from webapp.alerts.models import Alert
from webapp.external.models import ExternalRun
from webapp.metrics.models import MetricSeries
from webapp.runs.models import Run, RunEvent
from tests.factories import charts_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_id(mlflow):
    return mlflow.new_run()


def run_of(run_id):
    return Run.objects.get(mlflow_run_id=run_id)


def test_verl_names_are_kept_and_mapped_onto_evolabs(mlflow, run_id):
    mlflow.log(run_id, 1, {"actor/entropy": 0.8, "response_length/clip_ratio": 0.25, "critic/score/mean": 0.4,
                           "timing_s/step": 12.5, "val-core/math/acc/mean_at_16": 0.3})
    series = charts_of(charted(run_id))
    assert series["entropy"]["values"] == [0.8] and series["actor/entropy"]["values"] == [0.8]
    assert series["truncated_ratio"]["values"] == [0.25] and series["reward/mean"]["values"] == [0.4]
    # MLflow's keys cannot hold "@": verl's logger writes it "_at_", charted as verl named it
    assert series["time/step"]["values"] == [12.5] and series["val-core/math/acc/mean@16"]["values"] == [0.3]
    assert "val-core/math/acc/mean_at_16" not in series
    history = mlflow.ok("metrics/get-history", run_id=run_id, metric_key="val-core/math/acc/mean_at_16")["metrics"]
    assert [m["value"] for m in history] == [0.3]  # the client reads back the key it logged
    assert series["entropy"]["times"] == [1_795_000_001.0]
    assert run_of(run_id).trainer == "verl"


def test_trl_names_are_mapped_too(mlflow, run_id):
    mlflow.log(run_id, 2, {"entropy": 0.7, "completions/mean_length": 180.0, "reward": 0.6, "reward_std": 0.2,
                           "frac_reward_zero_std": 0.5, "completions/clipped_ratio": 0.1})
    series = charts_of(charted(run_id))
    assert series["response_length/mean"]["values"] == [180.0] and series["reward/std"]["values"] == [0.2]
    assert series["zero_variance_groups"]["values"] == [0.5] and series["truncated_ratio"]["values"] == [0.1]


def test_a_collapsing_external_run_opens_entropy_collapse(mlflow, run_id):
    for step in range(1, 13):
        mlflow.log(run_id, step, {"actor/entropy": 1.2 * 0.7 ** step, "response_length/mean": 300.0 - 5 * step})
    alert = Alert.objects.get(run=charted(run_id), rule="entropy_collapse")
    assert alert.state == "open" and alert.team_id == run_of(run_id).team_id


def test_a_value_that_is_not_a_number_is_refused_and_nothing_of_the_batch_is_kept(mlflow, run_id):
    response = mlflow.post("runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "loss", "value": 1.0, "step": 1, "timestamp": 1_795_000_000_000}, {"key": "kl", "value": "high", "step": 1, "timestamp": 1_795_000_000_000}],
        "params": [{"key": "lr", "value": "1e-6"}]})
    status, code, message = error_of(response)
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "'kl'" in message and "'high'" in message
    assert not MetricSeries.objects.filter(run=run_of(run_id)).exists()
    assert ExternalRun.objects.get(run=run_of(run_id)).params == {}


def test_nan_and_infinity_are_kept_as_missing_values(mlflow, run_id):
    mlflow.ok("runs/log-batch", {"run_id": run_id, "metrics": [{"key": "loss", "value": "NaN", "step": 1, "timestamp": 1_795_000_000_000},
                                                               {"key": "loss", "value": 2.0, "step": 2, "timestamp": 1_795_000_000_000}]})
    assert charts_of(charted(run_id))["loss"]["values"] == [None, 2.0]
    history = mlflow.ok("metrics/get-history", None, run_id=run_id, metric_key="loss")["metrics"]
    assert [(m["step"], m["value"]) for m in history] == [(1, "NaN"), (2, 2.0)]


def test_steps_may_go_backwards_and_the_history_keeps_every_value_as_mlflow_does(mlflow, run_id):
    """A trainer resumed from an earlier checkpoint logs step 5 after step 9; an asynchronous client's batches arrive
    out of order (9 then 3 in one batch). MLflow takes both and keeps every value; Evolab answered 400 and the
    trainer died with MlflowException. The chart shows each step's latest value, as an Evolab run's does."""
    for step in (1, 5, 9):
        mlflow.ok("runs/log-metric", {"run_id": run_id, "key": "loss", "value": float(step), "step": step,
                                      "timestamp": 1000 + step})
    mlflow.ok("runs/log-metric", {"run_id": run_id, "key": "loss", "value": 0.5, "step": 5, "timestamp": 2000})
    mlflow.ok("runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "kl", "value": 0.9, "step": 9, "timestamp": 3000}, {"key": "kl", "value": 0.3, "step": 3,
                                                                   "timestamp": 3001}]})
    history = mlflow.ok("metrics/get-history", run_id=run_id, metric_key="loss")["metrics"]
    assert [(m["step"], m["value"], m["timestamp"]) for m in history] == [
        (1, 1.0, 1001), (5, 5.0, 1005), (9, 9.0, 1009), (5, 0.5, 2000)]  # MLflow's order: timestamp, step, value
    assert charts_of(charted(run_id))["loss"]["values"] == [1.0, 0.5, 9.0]  # step 5 as it was logged last
    assert charts_of(run_of(run_id))["kl"]["steps"] == [3, 9]
    latest = {m["key"]: (m["step"], m["value"]) for m in mlflow.ok("runs/get", run_id=run_id)["run"]["data"]["metrics"]}
    assert latest == {"loss": (9, 9.0), "kl": (9, 0.9)}  # by step, then timestamp


def test_several_values_of_one_key_at_one_step_and_timestamps_are_kept_exactly(mlflow, run_id):
    mlflow.ok("runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "a", "value": 1.0, "step": 1, "timestamp": 1001}, {"key": "a", "value": 2.0, "step": 1, "timestamp": 1001},
        {"key": "b", "value": 3.0, "step": 1, "timestamp": 5003}]})
    history = mlflow.ok("metrics/get-history", run_id=run_id, metric_key="a")["metrics"]
    assert [(m["value"], m["timestamp"]) for m in history] == [(1.0, 1001), (2.0, 1001)]  # b's time is b's own
    assert mlflow.ok("metrics/get-history", run_id=run_id, metric_key="b")["metrics"][0]["timestamp"] == 5003


@pytest.mark.parametrize("step", [-7, 2**31, 2**63 - 1, -(2**63)])
def test_any_64_bit_step_is_kept_for_the_history(mlflow, run_id, step):
    mlflow.ok("runs/log-metric", {"run_id": run_id, "key": "x", "value": 1.5, "step": step, "timestamp": 7})
    assert [m["step"] for m in mlflow.ok("metrics/get-history", run_id=run_id, metric_key="x")["metrics"]] == [step]
    assert "x" not in charts_of(run_of(run_id))  # the charts hold steps from 0 to 2^31 - 1


def test_the_history_comes_a_page_at_a_time_when_asked(mlflow, run_id):
    mlflow.ok("runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "loss", "value": 1.0 / step, "step": step, "timestamp": step} for step in range(1, 6)]})
    first = mlflow.ok("metrics/get-history", run_id=run_id, metric_key="loss", max_results=2)
    second = mlflow.ok("metrics/get-history", run_id=run_id, metric_key="loss", max_results=2,
                       page_token=first["next_page_token"])
    last = mlflow.ok("metrics/get-history", run_id=run_id, metric_key="loss", max_results=2,
                     page_token=second["next_page_token"])
    assert [m["step"] for m in first["metrics"] + second["metrics"] + last["metrics"]] == [1, 2, 3, 4, 5]
    assert "next_page_token" not in last


def test_a_batch_sent_again_stores_nothing_twice(mlflow, run_id):
    batch = {"run_id": run_id, "metrics": [{"key": "loss", "value": 1.0, "step": 1, "timestamp": 1},
                                           {"key": "kl", "value": 0.1, "step": 1, "timestamp": 1}],
             "params": [{"key": "lr", "value": "1e-6"}], "tags": [{"key": "team", "value": "rl"}]}
    mlflow.ok("runs/log-batch", batch)
    events = RunEvent.objects.filter(run=charted(run_id)).count()
    mlflow.ok("runs/log-batch", batch)  # the client retried after its answer was lost
    assert RunEvent.objects.filter(run=charted(run_id)).count() == events
    assert charts_of(charted(run_id))["loss"]["values"] == [1.0]


def test_a_param_is_written_once(mlflow, run_id):
    mlflow.ok("runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "1e-6"})
    mlflow.ok("runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "1e-6"})
    status, code, message = error_of(mlflow.post("runs/log-parameter", {"run_id": run_id, "key": "lr", "value": "2e-6"}))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "Changing param values is not allowed" in message


def test_params_of_known_trainers_tell_the_rules_the_length_limit_and_the_page_the_planned_steps(mlflow, run_id):
    mlflow.ok("runs/log-batch", {"run_id": run_id, "params": [
        {"key": "data/max_response_length", "value": "1024"}, {"key": "trainer/total_training_steps", "value": "300"},
        {"key": "actor_rollout_ref/rollout/n", "value": "16"}]})
    run = run_of(run_id)
    assert run.hyperparameters == {"max_completion_length": 1024, "n_votes": 16} and run.total_steps == 300


def test_tags_name_the_run_its_method_and_its_answer_rule(mlflow, run_id):
    mlflow.ok("runs/set-tag", {"run_id": run_id, "key": "mlflow.runName", "value": "ttrl-aime"})
    mlflow.ok("runs/set-tag", {"run_id": run_id, "key": "evolab.method", "value": "ttrl"})
    mlflow.ok("runs/set-tag", {"run_id": run_id, "key": "evolab.answer_rule", "value": "gsm8k"})
    run = run_of(run_id)
    assert run.name == "ttrl-aime" and run.method == "ttrl" and ExternalRun.objects.get(run=run).answer_rule == "gsm8k"
    status, _, message = error_of(mlflow.post("runs/set-tag", {"run_id": run_id, "key": "evolab.answer_rule",
                                                               "value": "last_word"}))
    assert status == 400 and "last_word" in message and "boxed" in message
    assert error_of(mlflow.post("runs/set-tag", {"run_id": run_id, "key": "evolab.run_id", "value": "1"}))[0] == 400
    mlflow.ok("runs/delete-tag", {"run_id": run_id, "key": "evolab.answer_rule"})
    assert ExternalRun.objects.get(run=run).answer_rule == "boxed"


def test_mlflows_batch_limits_hold(mlflow, run_id):
    metrics = [{"key": f"m{i}", "value": 1.0, "step": 1} for i in range(1001)]
    status, _, message = error_of(mlflow.post("runs/log-batch", {"run_id": run_id, "metrics": metrics}))
    assert status == 400 and "1000" in message
    status, _, message = error_of(mlflow.post("runs/log-batch", {"run_id": run_id, "metrics": [
        {"key": "x" * 251, "value": 1.0, "step": 1, "timestamp": 1_795_000_000_000}]}))
    assert status == 400 and "250" in message


def test_history_is_read_a_page_at_a_time_when_asked(mlflow, run_id):
    for step in range(1, 6):
        mlflow.log(run_id, step, {"loss": float(step)})
    first = mlflow.ok("metrics/get-history", None, run_id=run_id, metric_key="loss", max_results=2)
    rest = mlflow.ok("metrics/get-history", None, run_id=run_id, metric_key="loss", max_results=10,
                     page_token=first["next_page_token"])
    assert [m["step"] for m in first["metrics"]] == [1, 2] and [m["step"] for m in rest["metrics"]] == [3, 4, 5]
    assert mlflow.ok("metrics/get-history", None, run_id=run_id, metric_key="nothing")["metrics"] == []
