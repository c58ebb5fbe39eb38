"""The charts of a run that logs through MLflow's protocol are drawn by a worker (webapp/external/charting.py): the
request keeps the points as MLflow does and asks for one task; the task charts what waits, safe to run twice, and a
failure shows on the run (issue 37: a log call spent ~25 ms charting, judging and pushing while the trainer waited)."""
import pytest
from django.utils import timezone

from tests.external.conftest import charted
from webapp.alerts.models import Alert
from webapp.external import charting
from webapp.external.models import LoggedMetric, UnchartedMetric
from webapp.metrics.models import MetricSeries
from webapp.runs import ingestion
from webapp.runs.models import Run
from tests.factories import charts_of
from webapp.shared_cache import shared_cache
from workers import tasks

pytestmark = pytest.mark.django_db

CHART_TASK = "workers.tasks.chart_logged_metrics"


@pytest.fixture
def run_id(mlflow):
    run_id = mlflow.new_run()
    shared_cache().delete(charting._mark(Run.objects.get(mlflow_run_id=run_id)))
    return run_id


def chart_tasks(sent) -> list:
    return [args for name, args, _ in sent if name == CHART_TASK]


def test_a_log_request_keeps_the_points_and_leaves_the_charting_to_a_worker(mlflow, run_id):
    mlflow.log(run_id, 1, {"actor/entropy": 0.8, "actor/pg_loss": 0.1})
    run = Run.objects.get(mlflow_run_id=run_id)
    assert LoggedMetric.objects.filter(run=run).count() == 2 and UnchartedMetric.objects.filter(run=run).count() == 2
    assert not MetricSeries.objects.filter(run=run).exists() and run.last_step is None
    assert mlflow.ok("metrics/get-history", run_id=run_id, metric_key="actor/entropy")["metrics"][0]["value"] == 0.8

    assert charts_of(charted(run_id))["entropy"]["values"] == [0.8]
    assert not UnchartedMetric.objects.filter(run=run).exists()


def test_requests_ask_for_one_task_while_one_is_coming_and_again_once_it_has_started(
        mlflow, run_id, no_enqueue, django_capture_on_commit_callbacks):
    run = Run.objects.get(mlflow_run_id=run_id)
    with django_capture_on_commit_callbacks(execute=True):
        mlflow.log(run_id, 1, {"loss": 1.0})
        mlflow.log(run_id, 2, {"loss": 0.9})
    assert chart_tasks(no_enqueue) == [[run.pk]]
    with django_capture_on_commit_callbacks(execute=True):
        tasks.chart_logged_metrics(run.pk)  # as the worker runs it: the mark is cleared before it reads
        mlflow.log(run_id, 3, {"loss": 0.8})
    assert chart_tasks(no_enqueue) == [[run.pk], [run.pk]]
    assert charts_of(charted(run_id))["loss"]["steps"] == [1, 2, 3]


def test_a_point_logged_again_exactly_asks_for_nothing(mlflow, run_id, no_enqueue, django_capture_on_commit_callbacks):
    mlflow.log(run_id, 1, {"loss": 1.0})
    charted(run_id)
    with django_capture_on_commit_callbacks(execute=True):
        mlflow.log(run_id, 1, {"loss": 1.0})  # the client retried after its answer was lost
    assert chart_tasks(no_enqueue) == [] and not UnchartedMetric.objects.exists()


def test_a_task_delivered_twice_charts_each_point_once(mlflow, run_id):
    for step in (1, 2):
        mlflow.log(run_id, step, {"loss": 1.0 / step})
    run = Run.objects.get(mlflow_run_id=run_id)
    assert charting.chart_waiting(run.pk) == {"points": 2, "steps": 2}
    assert charting.chart_waiting(run.pk) == {"points": 0, "steps": 0}
    assert charts_of(Run.objects.get(pk=run.pk))["loss"]["values"] == [1.0, 0.5]


def test_a_late_batch_with_an_earlier_point_of_a_charted_step_does_not_replace_its_later_value(mlflow, run_id):
    """An asynchronous client's batches arrive in any order: the chart keeps each step's latest value by
    timestamp, as MLflow's history orders them, whichever arrived last."""
    mlflow.ok("runs/log-metric", {"run_id": run_id, "key": "loss", "value": 0.5, "step": 5, "timestamp": 2000})
    charted(run_id)
    mlflow.ok("runs/log-metric", {"run_id": run_id, "key": "loss", "value": 5.0, "step": 5, "timestamp": 1000})
    mlflow.ok("runs/log-metric", {"run_id": run_id, "key": "loss", "value": 6.0, "step": 6, "timestamp": 1001})
    series = charts_of(charted(run_id))["loss"]
    assert (series["steps"], series["values"]) == ([5, 6], [0.5, 6.0])


def test_a_backlog_is_charted_in_turns_each_committed(mlflow, run_id, monkeypatch):
    monkeypatch.setattr(charting, "BATCH_POINTS", 7)
    for step in range(1, 11):
        mlflow.log(run_id, step, {"a": float(step), "b": -float(step)})
    run = Run.objects.get(mlflow_run_id=run_id)
    assert charting.chart_waiting(run.pk)["points"] == 20
    series = charts_of(Run.objects.get(pk=run.pk))
    assert series["a"]["steps"] == list(range(1, 11)) and series["b"]["values"] == [-float(s) for s in range(1, 11)]


def test_charting_that_fails_shows_on_the_run_keeps_its_points_and_a_retry_charts_them(
        mlflow, run_id, monkeypatch, django_capture_on_commit_callbacks):
    mlflow.log(run_id, 3, {"loss": 1.0})
    run = Run.objects.get(mlflow_run_id=run_id)

    def broken(run, events):
        raise ValueError("the database refused a row")

    monkeypatch.setattr(ingestion, "append_events", broken)
    with pytest.raises(ValueError), django_capture_on_commit_callbacks(execute=True):
        tasks.chart_logged_metrics(run.pk)
    failed = Alert.objects.get(run=run, rule="processing_failed")
    assert failed.state == "open" and failed.message == (
        "charting of logged metrics failed at step 3: ValueError: the database refused a row")
    assert UnchartedMetric.objects.filter(run=run).count() == 1  # rolled back: nothing lost

    monkeypatch.undo()
    with django_capture_on_commit_callbacks(execute=True):
        tasks.chart_logged_metrics(run.pk)
    assert Alert.objects.get(pk=failed.pk).state == "resolved"
    assert charts_of(Run.objects.get(pk=run.pk))["loss"]["values"] == [1.0]


def test_the_periodic_resend_asks_again_for_runs_with_waiting_points_unless_their_task_is_retrying(
        mlflow, run_id, no_enqueue, monkeypatch):
    mlflow.log(run_id, 1, {"loss": 1.0})
    quiet = mlflow.new_run("quiet")
    mlflow.log(quiet, 1, {"loss": 1.0})
    charted(quiet)
    run = Run.objects.get(mlflow_run_id=run_id)
    assert charting.resend_stale() == [run.pk] and chart_tasks(no_enqueue) == [[run.pk]]

    monkeypatch.setattr(ingestion, "append_events", lambda run, events: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        tasks.chart_logged_metrics(run.pk)
    assert charting.resend_stale() == []  # its own retries are under way
    assert charting.resend_stale(now=timezone.now() + timezone.timedelta(hours=2)) == [run.pk]
