"""GET /api/runs/{id}/metrics (DESIGN §4.6): since_step, max_points, event times."""
import pytest

from tests.factories import event_log, make_prompt_set, make_team
from webapp.runs.models import Run
from webapp.runs.queries import downsample, metric_series_of_runs
from webapp.runs.ingestion import _live_message, ingest_events

pytestmark = pytest.mark.django_db

T0 = 1_700_000_000.0


def metrics_events(values_by_step, start_seq=0, t0=T0):
    """One metrics event per step, 10 s apart: [{seq, time, type, step, values}]."""
    return [
        {"seq": start_seq + n, "time": t0 + 10 * n, "type": "metrics", "step": step, "values": values}
        for n, (step, values) in enumerate(values_by_step)
    ]


@pytest.fixture
def run(user):
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=100, created_by=user)


def get(client, run, query=""):
    return client.get(f"/api/runs/{run.pk}/metrics{query}")


def test_every_point_carries_the_time_of_its_event(api_client, run):
    ingest_events(run, metrics_events([(s, {"entropy": 1.0 / s, "loss": 0.1 * s}) for s in (1, 2, 3)]))
    body = get(api_client, run).json()
    assert body["metrics"]["entropy"] == {"steps": [1, 2, 3], "values": [1.0, 0.5, 1.0 / 3], "times": [T0, T0 + 10, T0 + 20]}
    assert body["metrics"]["loss"]["times"] == [T0, T0 + 10, T0 + 20]


def test_eval_points_are_prefixed_and_timed(api_client, run):
    ingest_events(run, [{"seq": 0, "time": T0 + 5, "type": "eval", "step": 10, "prompt_set": "x", "values": {"pass@1": 0.25}}])
    assert get(api_client, run).json()["metrics"]["eval/pass@1"] == {"steps": [10], "values": [0.25], "times": [T0 + 5]}


def test_since_step_returns_only_later_points(api_client, run):
    ingest_events(run, metrics_events([(s, {"entropy": float(s)}) for s in range(1, 6)]))
    series = get(api_client, run, "?since_step=3").json()["metrics"]["entropy"]
    assert series["steps"] == [4, 5] and series["values"] == [4.0, 5.0] and series["times"] == [T0 + 30, T0 + 40]
    assert get(api_client, run, "?since_step=5").json()["metrics"] == {}
    assert get(api_client, run, "?since_step=-1").json()["metrics"]["entropy"]["steps"] == [1, 2, 3, 4, 5]


def test_names_pick_series(api_client, run):
    ingest_events(run, metrics_events([(1, {"entropy": 1.0, "loss": 2.0, "kl": 0.1})]))
    assert set(get(api_client, run, "?names=entropy,kl").json()["metrics"]) == {"entropy", "kl"}


def test_max_points_keeps_a_one_step_spike_and_the_cap(api_client, run):
    values = [(s, {"loss": 1.0 + 0.001 * s, "entropy": 2.0 - 0.001 * s}) for s in range(1, 201)]
    values[136] = (137, {"loss": 100.0, "entropy": -5.0})  # one wild step each way
    ingest_events(run, metrics_events(values))
    body = get(api_client, run, "?max_points=10").json()["metrics"]
    for name in ("loss", "entropy"):
        series = body[name]
        assert 2 <= len(series["steps"]) <= 10
        assert series["steps"] == sorted(series["steps"]) and len(set(series["steps"])) == len(series["steps"])
        assert len(series["values"]) == len(series["times"]) == len(series["steps"])
    assert 100.0 in body["loss"]["values"] and -5.0 in body["entropy"]["values"]
    spike = body["loss"]["steps"].index(137)
    assert body["loss"]["times"][spike] == T0 + 10 * 136
    # Each bucket keeps its extremes: the first and last points' neighbourhoods are there.
    assert body["loss"]["values"][0] == pytest.approx(1.001) and body["loss"]["values"][-1] == pytest.approx(1.2)


def test_max_points_larger_than_the_series_returns_it_whole(api_client, run):
    ingest_events(run, metrics_events([(s, {"loss": float(s)}) for s in range(1, 6)]))
    assert get(api_client, run, "?max_points=1000").json()["metrics"]["loss"]["steps"] == [1, 2, 3, 4, 5]
    odd = get(api_client, run, "?max_points=3").json()["metrics"]["loss"]
    assert len(odd["steps"]) <= 3 and odd["values"] == [1.0, 5.0]


def test_downsample_ignores_missing_values_and_keeps_all_missing_buckets():
    series = {"steps": list(range(8)), "values": [None, None, 1.0, 9.0, None, None, None, None], "times": [0.0] * 8}
    thinned = downsample(series, 4)
    assert thinned["steps"] == [2, 3, 4] and thinned["values"] == [1.0, 9.0, None]


@pytest.mark.parametrize(
    "query, field",
    [("?since_step=abc", "since_step"), ("?since_step=1.5", "since_step"), ("?max_points=x", "max_points"),
     ("?max_points=1", "max_points"), ("?max_points=-4", "max_points")],
)
def test_bad_parameters_are_a_400_naming_the_field(api_client, run, query, field):
    response = get(api_client, run, query)
    assert response.status_code == 400
    assert response.json()["field"] == field and field in response.json()["error"]


def test_a_run_of_another_team_is_a_404(api_client, django_user_model):
    team = make_team("elsewhere", bob="admin")
    bob = django_user_model.objects.get(username="bob")
    theirs = Run.objects.create(name="theirs", method="ttrl", prompt_set=make_prompt_set(bob, team=team), max_steps=1,
                                created_by=bob)
    ingest_events(theirs, metrics_events([(1, {"entropy": 1.0})]))
    response = get(api_client, theirs)
    assert response.status_code == 404 and response.json() == {"error": f"no run with id {theirs.pk}"}


def test_metric_series_reads_a_whole_ingested_log_in_two_queries(run, django_assert_num_queries):
    ingest_events(run, event_log(steps=3))
    with django_assert_num_queries(2):  # the series, then closed chunks and open points: whatever the run's length
        series = metric_series_of_runs([run.pk])[run.pk]
    assert series["entropy"]["steps"] == [1, 2, 3] and all(t is not None for t in series["entropy"]["times"])


def test_live_metrics_messages_carry_the_event_time():
    metrics = _live_message({"seq": 3, "time": T0, "type": "metrics", "step": 2, "values": {"entropy": 0.5}})
    evaluation = _live_message({"seq": 4, "time": T0 + 1, "type": "eval", "step": 2, "values": {"pass@1": 0.5}})
    assert metrics["time"] == T0 and metrics["values"] == {"entropy": 0.5}
    assert evaluation["time"] == T0 + 1 and evaluation["values"] == {"eval/pass@1": 0.5}
