"""POST /api/runs/{id}/metrics (issue 39): a logger's points, many a request, charted before the answer, as `evolab
sync wandb|tensorboard|trackio` sends them; bad input refused whole, naming the point and the field; the sync's
totals kept for the imports page; get-history answers an imported key from the charts."""
import json
import math

import pytest

from tests.factories import make_prompt_set, make_team
from webapp.external.models import ExternalRun, LoggerImport
from webapp.external.imports import MAX_POINTS
from webapp.metrics import series
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

T0 = 1_795_000_000_000
SYNC = {"logger": "wandb", "folder": "/data/wandb/run-20261129_1-abc", "host": "gpu-07", "files": 1,
        "points": 6, "rollouts": 0, "skipped": {"histogram": 2, "image": 1}}


@pytest.fixture
def run(mlflow):
    return Run.objects.get(mlflow_run_id=mlflow.new_run(name="imported"))


def post(client, run, body, raw=False):
    return client.post(f"/api/runs/{run.pk}/metrics", body if raw else json.dumps(body), content_type="application/json")


def body_of(steps, keys=("actor/entropy", "response_length/mean"), sync=None):
    points = [[k, step, T0 + step * 1000, 0.5 + step / 10 + k] for step in steps for k in range(len(keys))]
    return {"keys": list(keys), "points": points, **({"sync": sync} if sync else {})}


def charted(run, name):
    found = series.read([run.pk], [name])[run.pk].get(name)
    return found.lists() if found else None


def test_it_charts_the_points_before_it_answers(api_client, run):
    response = post(api_client, run, body_of([1, 2, 3], sync=SYNC))
    assert response.status_code == 200, response.content
    assert response.json() == {"received": 6, "charted_steps": 3}
    entropy = charted(run, "actor/entropy")
    assert entropy["steps"] == [1, 2, 3] and entropy["values"] == pytest.approx([0.6, 0.7, 0.8])
    assert entropy["times"] == [(T0 + s * 1000) / 1000 for s in (1, 2, 3)]
    assert charted(run, "entropy")["values"] == entropy["values"]  # verl's name, charted under Evolab's too
    run.refresh_from_db()
    assert run.last_step == 3 and run.trainer == "verl"


def test_points_sent_twice_are_charted_once(api_client, run):
    post(api_client, run, body_of([1, 2]))
    events = run.events.count()
    again = post(api_client, run, body_of([1, 2]))
    assert again.json() == {"received": 4, "charted_steps": 0}
    assert run.events.count() == events and charted(run, "actor/entropy")["steps"] == [1, 2]


def test_nan_and_infinity_are_gaps_on_the_chart_and_nan_in_mlflows_history(api_client, run, mlflow):
    body = {"keys": ["actor/entropy"], "points": [[0, 1, T0, "NaN"], [0, 2, T0 + 1, "Infinity"], [0, 3, T0 + 2, 0.25]]}
    assert post(api_client, run, body).status_code == 200
    assert charted(run, "actor/entropy")["values"] == [None, None, 0.25]
    history = mlflow.ok("metrics/get-history", run_id=run.mlflow_run_id, metric_key="actor/entropy")["metrics"]
    assert [(m["step"], m["value"], m["timestamp"]) for m in history] == [(1, "NaN", T0), (2, "NaN", T0 + 1),
                                                                          (3, 0.25, T0 + 2)]


def test_get_history_reads_an_imported_key_from_the_charts_page_by_page(api_client, run, mlflow):
    post(api_client, run, body_of(range(1, 8), keys=("actor/entropy",)))
    first = mlflow.ok("metrics/get-history", run_id=run.mlflow_run_id, metric_key="actor/entropy", max_results=5)
    rest = mlflow.ok("metrics/get-history", run_id=run.mlflow_run_id, metric_key="actor/entropy", max_results=5,
                     page_token=first["next_page_token"])
    assert [m["step"] for m in first["metrics"]] == [1, 2, 3, 4, 5] and "next_page_token" not in rest
    assert [m["step"] for m in rest["metrics"]] == [6, 7] and rest["metrics"][0]["value"] == pytest.approx(1.1)
    latest = {m["key"]: m for m in mlflow.ok("runs/get", run_id=run.mlflow_run_id)["run"]["data"]["metrics"]}
    assert latest["actor/entropy"]["step"] == 7 and latest["actor/entropy"]["value"] == pytest.approx(1.2)


def test_the_syncs_totals_are_kept_for_the_imports_page(api_client, run):
    post(api_client, run, body_of([1], sync=SYNC))
    post(api_client, run, body_of([2], sync={**SYNC, "points": 4, "skipped": {"histogram": 3, "image": 1}}))
    kept = LoggerImport.objects.get(run=run)
    assert (kept.logger, kept.folder, kept.host, kept.points) == ("wandb", SYNC["folder"], "gpu-07", 4)
    assert kept.skipped == {"histogram": 3, "image": 1} and kept.started_at <= kept.updated_at


def test_a_request_with_only_totals_updates_them(api_client, run):
    assert post(api_client, run, {"keys": [], "points": [], "sync": SYNC}).json() == {"received": 0, "charted_steps": 0}
    assert LoggerImport.objects.get(run=run).skipped == SYNC["skipped"]


@pytest.mark.parametrize("change, field, words", [
    (lambda b: b["points"].__setitem__(1, [0, 1, T0]), "points[1]", "must be [key index, step, timestamp, value]"),
    (lambda b: b["points"][2].__setitem__(0, 7), "points[2].key", "key index 7 is not one of keys' 0..1"),
    (lambda b: b["points"][3].__setitem__(1, -1), "points[3].step", "step -1 is not a whole number from 0 to"),
    (lambda b: b["points"][3].__setitem__(1, 1.5), "points[3].step", "step 1.5"),
    (lambda b: b["points"][0].__setitem__(2, "soon"), "points[0].timestamp", 'timestamp "soon"'),
    (lambda b: b["points"][1].__setitem__(3, "high"), "points[1].value", 'value "high" is not a number'),
    (lambda b: b["points"][1].__setitem__(3, True), "points[1].value", "value true is not a number"),
    (lambda b: b["keys"].__setitem__(0, ""), "keys[0]", "a metric name is 1 to 250 characters"),
    (lambda b: b["keys"].__setitem__(1, "a\nb"), "keys[1]", "holds a control character"),
    (lambda b: b.__setitem__("sync", {**SYNC, "logger": "neptune"}), "sync.logger", "one of wandb, tensorboard, trackio"),
    (lambda b: b.__setitem__("sync", {**SYNC, "points": -1}), "sync.points", "a count"),
])
def test_bad_input_is_refused_whole_naming_the_point_and_field(api_client, run, change, field, words):
    body = body_of([1, 2])
    change(body)
    response = post(api_client, run, body)
    assert response.status_code == 400 and response.json()["field"] == field
    assert words in response.json()["error"]
    assert charted(run, "actor/entropy") is None and not LoggerImport.objects.filter(run=run).exists()


def test_a_body_that_is_not_json_is_refused(api_client, run):
    response = post(api_client, run, b"{nope", raw=True)
    assert response.status_code == 400 and response.json()["field"] == "body"


def test_more_points_than_a_request_takes_are_refused(api_client, run):
    body = {"keys": ["x"], "points": [[0, 1, T0, 0.0]] * (MAX_POINTS + 1)}
    response = post(api_client, run, body)
    assert response.status_code == 400 and f"at most {MAX_POINTS:,}" in response.json()["error"]


def test_a_run_evolab_trains_takes_no_points(api_client, user):
    trained = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)
    response = post(api_client, trained, body_of([1]))
    assert response.status_code == 409 and response.json()["field"] == "run"


def test_a_deleted_run_takes_no_points(api_client, run, mlflow):
    mlflow.ok("runs/delete", {"run_id": run.mlflow_run_id})
    response = post(api_client, run, body_of([1]))
    assert response.status_code == 404 and f"no run with id {run.pk}" in response.json()["error"]
    assert ExternalRun.objects.get(run=run).lifecycle_stage == "deleted" and charted(run, "actor/entropy") is None


def test_a_viewer_cannot_send_points_and_a_stranger_cannot_see_the_run(client, run, user):
    from django.contrib.auth import get_user_model
    from webapp.accounts.models import ApiToken, Membership

    team = run.team
    viewer = get_user_model().objects.create_user("vera")
    Membership.objects.create(team=team, user=viewer, role=Membership.VIEWER)
    stranger_team = make_team("elsewhere", sam="member")
    stranger = stranger_team.memberships.get().user
    for who, status in ((viewer, 403), (stranger, 404)):
        response = client.post(f"/api/runs/{run.pk}/metrics", json.dumps(body_of([1])), content_type="application/json",
                               HTTP_AUTHORIZATION=f"Bearer {ApiToken.issue(who)}")
        assert response.status_code == status, who
    assert charted(run, "actor/entropy") is None


def test_a_collapse_in_imported_points_raises_its_alert(api_client, run):
    # verl's entropy falling to a fifth of its start over 60 steps: Evolab's rules judge every imported step
    steps = range(1, 61)
    points = [[0, s, T0 + s, 1.0 - 0.8 * (s > 20) * min(1, (s - 20) / 10) + 0.01 * math.sin(s)] for s in steps]
    post(api_client, run, {"keys": ["actor/entropy"], "points": points})
    assert run.alerts.filter(rule="entropy_collapse").exists()


def test_an_error_halfway_leaves_nothing_of_the_request(api_client, run, mlflow, monkeypatch):
    def broken(run, rows):
        raise RuntimeError("the database went away")
    monkeypatch.setattr("webapp.external.charting._chart", broken)
    with pytest.raises(RuntimeError):
        post(api_client, run, body_of([1, 2], sync=SYNC))
    assert mlflow.ok("runs/get", run_id=run.mlflow_run_id)["run"]["data"].get("metrics", []) == []
    assert not LoggerImport.objects.filter(run=run).exists()
