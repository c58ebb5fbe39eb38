"""GET /api/runs/{id}/live-state (issue 26): what the run page's live messages add to it (step links, the heatmap,
R-Zero's stages and question sets, resume markers, the collapse forecast), as the page's initial JSON has it, so a page
that missed messages (`behind`, or a socket that reconnects) reads them back without a reload."""
import json
import math

import pytest
from django.contrib.auth import get_user_model

from tests.factories import event_log, make_prompt_set, make_team
from webapp.alerts import engine, forecast
from webapp.alerts.rule_specs import resolve_thresholds
from webapp.alerts.rules import History, evaluate_step_rules
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

SIM = [[1.0, 0.5], [0.5, 1.0]]


def crafted_log():
    """Three steps of two prompts with similarity matrices, stopped and resumed after step 2 (a second trainer
    `running`), R-Zero stages and a question set of iteration 1."""
    events = event_log(steps=2, group_size=2)[:-2]  # no checkpoint and final status
    for e in events:
        if e["type"] == "group":
            e["similarity"] = SIM
    seq, time = len(events), events[-1]["time"] + 1
    later = event_log(steps=1, group_size=2, start_seq=seq + 3, start_step=3)[:-2]
    for e in later:
        if e["type"] == "group":
            e["similarity"] = SIM if e["prompt_id"] == "p2" else None
    questions = [{"id": "q1", "question": "1 + 1?", "text": "1 + 1?", "p_hat": 1.0, "pseudo_label": "2",
                  "answers": ["2"], "kept": True}]
    return events + [
        {"seq": seq, "time": time, "type": "status", "state": "running", "message": "resumed"},
        {"seq": seq + 1, "time": time + 1, "type": "stage", "iteration": 1, "phase": "challenger", "state": "finished"},
        {"seq": seq + 2, "time": time + 2, "type": "questions", "iteration": 1, "offset": 0, "total": 1,
         "questions": questions},
    ] + later


@pytest.fixture
def run(user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = Run.objects.create(name="r", method="evol_rl", prompt_set=make_prompt_set(user), max_steps=5,
                             created_by=user, state=Run.RUNNING)
    ingest_events(run, crafted_log())
    return run


def test_it_gives_the_step_links_heatmap_stages_question_sets_and_resumes(api_client, run):
    body = api_client.get(f"/api/runs/{run.pk}/live-state").json()
    assert body["run"] == run.pk
    assert body["steps"] == [1, 2, 3]
    # the latest step with a matrix; p1's group of step 3 has none, so only p2 is drawn
    assert body["heatmap"] == {"step": 3, "groups": [{"prompt_id": "p2", "majority_answer": "5", "similarity": SIM}]}
    # as the live `stage` message carries it: not the log's seq and time, which the page would list as details
    assert body["stages"] == [{"iteration": 1, "phase": "challenger", "state": "finished"}]
    assert body["iterations"] == [1]
    assert [r["step"] for r in body["resumes"]] == [2]  # placed at the step logged before the trainer started again


def test_it_says_what_the_run_page_was_rendered_with(api_client, client, user, run):
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    initial = json.loads(page.split('<script id="run-initial" type="application/json">')[1].split("</script>")[0])
    body = api_client.get(f"/api/runs/{run.pk}/live-state").json()
    parts = ("steps", "heatmap", "stages", "resumes", "iterations", "forecast")
    assert {name: initial[name] for name in parts} == {name: body[name] for name in parts}


def test_a_run_with_nothing_logged_yet_has_empty_parts(api_client, user):
    run = Run.objects.create(name="new", method="ttrl", prompt_set=make_prompt_set(user), max_steps=3, created_by=user)
    assert api_client.get(f"/api/runs/{run.pk}/live-state").json() == {
        "run": run.pk, "steps": [], "heatmap": {"step": None, "groups": []}, "stages": [], "resumes": [],
        "iterations": [], "forecast": None}


def forecast_finding():
    """The collapse forecast's worked example (tests/alerts/test_forecast.py): entropy 0.1·e^(−0.05 t) over ten steps,
    the policy moved; entropy_collapse's condition is due at step 16."""
    steps = list(range(1, 11))
    history = History(steps=steps, metrics={"entropy": [0.1 * math.exp(-0.05 * t) for t in steps], "kl": [0.01] * 10})
    return evaluate_step_rules(history, resolve_thresholds(), (forecast.KIND,))[forecast.KIND]


def test_the_collapse_forecast_is_there_while_its_alert_is_active(api_client, client, user):
    run = Run.objects.create(name="falling", method="ttrl", prompt_set=make_prompt_set(user), max_steps=40,
                             created_by=user, state=Run.RUNNING, last_step=10)
    client.force_login(user)
    assert api_client.get(f"/api/runs/{run.pk}/live-state").json()["forecast"] is None
    assert '<p id="collapse-forecast" class="notice-warning" role="status" hidden>' in client.get(
        f"/runs/{run.pk}/").content.decode()

    alert = engine.apply_finding(run, forecast.KIND, forecast_finding(), 10)
    said = {"text": "collapse expected around step 16 (16–16 at 80%)", "alert": alert.pk, "step": 16, "low": 16,
            "high": 16, "confidence": 0.8}
    assert api_client.get(f"/api/runs/{run.pk}/live-state").json()["forecast"] == said
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<p id="collapse-forecast" class="notice-warning" role="status" >' in page
    assert '<strong id="collapse-forecast-text">collapse expected around step 16 (16–16 at 80%)</strong>' in page

    engine.acknowledge(alert, user)  # someone is on it: still the forecast
    assert api_client.get(f"/api/runs/{run.pk}/live-state").json()["forecast"] == said
    engine.apply_finding(run, forecast.KIND, None, 15)  # resolved: the forecast receded, or the collapse came
    assert api_client.get(f"/api/runs/{run.pk}/live-state").json()["forecast"] is None

    engine.apply_finding(run, forecast.KIND, forecast_finding(), 16)
    engine.end_of_run(run)  # a forecast for a run that ended forecasts nothing
    assert api_client.get(f"/api/runs/{run.pk}/live-state").json()["forecast"] is None


def test_another_teams_run_is_a_404_like_one_that_does_not_exist(api_client):
    make_team("elsewhere", grace="admin")
    grace = get_user_model().objects.get(username="grace")
    theirs = Run.objects.create(name="theirs", method="ttrl", prompt_set=make_prompt_set(grace, name="g"), max_steps=3,
                                created_by=grace)
    response = api_client.get(f"/api/runs/{theirs.pk}/live-state")
    assert response.status_code == 404 and response.json() == {"error": f"no run with id {theirs.pk}"}
    assert api_client.get(f"/api/runs/{theirs.pk + 1000}/live-state").json() == {
        "error": f"no run with id {theirs.pk + 1000}"}


def test_it_needs_authentication_as_the_other_run_reads_do(client, run):
    answers = [client.get(f"/api/runs/{run.pk}/{read}") for read in ("live-state", "transitions", "alerts")]
    assert [a.status_code for a in answers] == [401, 401, 401]
    assert "error" in answers[0].json()
