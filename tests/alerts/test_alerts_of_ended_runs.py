"""Nothing is lost when a run ends (issue 36, item 6). An alert still open when its run ends (succeeded, cancelled,
failed, ended by the lease sweeper) is `ended`: the rules no longer update it, but it stays in every default view
(the team's alerts page, the team page's count, the run list's alert column, GET /api/alerts, the run page) as
"run ended, not acknowledged" until a member acknowledges it, which closes it. One acknowledged before the run ended
was seen already: it closes with its run. Neither tells anyone: the condition did not clear.

Before: both closed with the run, left the default views and could no longer be acknowledged, so an overnight
collapse was found only under "all"."""
import re

import pytest
from django.test import Client

from tests.alerts.streams import collapsing, metric_events
from tests.factories import make_prompt_set, make_team
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Alert, Webhook, WebhookDelivery
from webapp.runs import lifecycle
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run, RunLease

pytestmark = pytest.mark.django_db

ENDED_LABEL = "run ended, not acknowledged"


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    sent = []
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda name, args, queue, countdown=None, **kw: sent.append(name))
    return sent


@pytest.fixture
def live(monkeypatch):
    """The live messages pushed to the pages' groups (webapp.live), as (group, message)."""
    pushed = []
    monkeypatch.setattr("webapp.live._send_all", lambda batches: pushed.extend(
        (group, m) for group, messages in batches.items() for m in messages))
    return pushed


@pytest.fixture
def team(django_user_model):
    return make_team("lab", ada="admin", max="member", vic="viewer")


@pytest.fixture
def run(team, django_user_model):
    ada = django_user_model.objects.get(username="ada")
    return Run.objects.create(name="overnight", method="ttrl", prompt_set=make_prompt_set(ada, team=team),
                              max_steps=30, created_by=ada, state=Run.RUNNING)


def collapse(run, django_capture_on_commit_callbacks) -> dict:
    """The run collapses (entropy_collapse and majority_lock_in open); someone acknowledges the lock-in."""
    with django_capture_on_commit_callbacks(execute=True):
        for event in metric_events(collapsing()):
            ingest_events(run, [event])
    alerts = {a.rule: a for a in Alert.objects.filter(run=run)}
    assert {"entropy_collapse", "majority_lock_in"} <= set(alerts)
    Alert.objects.filter(pk=alerts["majority_lock_in"].pk).update(state=Alert.ACKNOWLEDGED)
    return alerts


def api(django_user_model, username):
    client = Client()
    client.defaults["HTTP_AUTHORIZATION"] = f"Token {ApiToken.issue(django_user_model.objects.get(username=username))}"
    return client


def signed_in(django_user_model, username):
    client = Client()
    client.force_login(django_user_model.objects.get(username=username))
    return client


def end(run, state, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.finish(Run.objects.get(pk=run.pk), state, "the trainer exited with code 1" if state == Run.FAILED
                         else "", 1 if state == Run.FAILED else 0, "")


@pytest.mark.parametrize("state", [Run.SUCCEEDED, Run.CANCELLED, Run.FAILED])
def test_an_open_alert_of_a_run_that_ends_is_ended_and_an_acknowledged_one_closes_and_nobody_is_told(
        run, state, no_queue, live, django_capture_on_commit_callbacks):
    Webhook.objects.create(team=run.team, url="https://hooks.example.org/lab")
    alerts = collapse(run, django_capture_on_commit_callbacks)
    live.clear()
    before, deliveries = len(no_queue), WebhookDelivery.objects.count()
    end(run, state, django_capture_on_commit_callbacks)
    entropy, lock_in = (Alert.objects.get(pk=alerts[r].pk) for r in ("entropy_collapse", "majority_lock_in"))
    assert entropy.state == Alert.ENDED and entropy.acknowledged_by is None and entropy.resolved_at is not None
    assert lock_in.state == Alert.CLOSED
    # no webhook says a condition cleared, and no email goes out (a failed run's run_failed alert is news of its own)
    assert WebhookDelivery.objects.exclude(alert__rule="run_failed").count() == deliveries
    emails = [name for name in no_queue[before:] if name == "workers.tasks.send_alert_email"]
    assert len(emails) == (1 if state == Run.FAILED else 0)
    told = {m["id"]: m for group, m in live if m["type"] == "alert" and group == f"team-{run.team_id}"}
    assert told[entropy.pk]["state"] == "ended" and told[entropy.pk]["state_label"] == ENDED_LABEL
    assert told[entropy.pk]["current"] and told[entropy.pk]["needs_acknowledgement"]
    assert told[lock_in.pk]["state"] == "closed" and not told[lock_in.pk]["current"]


def test_a_run_the_lease_sweeper_ends_leaves_its_open_alerts_ended(run, django_capture_on_commit_callbacks):
    from datetime import timedelta

    from django.utils import timezone

    alerts = collapse(run, django_capture_on_commit_callbacks)
    Run.objects.filter(pk=run.pk).update(cancel_requested=True)
    RunLease.objects.create(run=run, owner="host-a:1:abc", heartbeat_at=timezone.now() - timedelta(hours=1))
    assert lifecycle.reap_run(run.pk) == "cancelled"
    assert Alert.objects.get(pk=alerts["entropy_collapse"].pk).state == Alert.ENDED


def test_an_ended_alert_stays_in_every_default_view(run, team, django_user_model, django_capture_on_commit_callbacks):
    alerts = collapse(run, django_capture_on_commit_callbacks)
    end(run, Run.SUCCEEDED, django_capture_on_commit_callbacks)
    entropy = alerts["entropy_collapse"]
    vic = signed_in(django_user_model, "vic")  # a viewer sees them too

    page = vic.get(f"/teams/{team.pk}/alerts/").content.decode()  # the team's alerts page, as it opens
    initial = re.search(r'<script id="alerts-initial" type="application/json">(.*?)</script>', page, re.S).group(1)
    assert f'"id": {entropy.pk}' in initial and ENDED_LABEL in initial
    assert "Alerts (1 not acknowledged)" in vic.get(f"/teams/{team.pk}/").content.decode()  # the team page
    row = re.search(rf'<tr data-run-id="{run.pk}".*?</tr>', vic.get("/?team=all").content.decode(), re.S).group(0)
    assert re.search(r'<span class="badge severity-\w+">1</span>', row)  # the run list: the ended one, not the closed
    listed = api(django_user_model, "vic").get("/api/alerts").json()["alerts"]  # no state asked for
    assert {a["id"]: a["state"] for a in listed}[entropy.pk] == "ended"
    current = api(django_user_model, "vic").get("/api/alerts?state=current").json()["alerts"]
    assert [a["id"] for a in current] == [entropy.pk]
    run_page = vic.get(f"/runs/{run.pk}/").content.decode()
    assert f'"id": {entropy.pk}' in run_page and ENDED_LABEL in run_page


def test_a_member_acknowledges_an_ended_alert_which_then_closes_and_leaves_the_default_views(
        run, team, django_user_model, live, django_capture_on_commit_callbacks):
    alerts = collapse(run, django_capture_on_commit_callbacks)
    end(run, Run.SUCCEEDED, django_capture_on_commit_callbacks)
    entropy = alerts["entropy_collapse"]
    assert api(django_user_model, "vic").post(f"/api/alerts/{entropy.pk}/acknowledge").status_code == 403
    live.clear()
    with django_capture_on_commit_callbacks(execute=True):
        response = api(django_user_model, "max").post(f"/api/alerts/{entropy.pk}/acknowledge")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["state"] == "closed" and body["acknowledged_by"] == "max" and not body["needs_acknowledgement"]
    assert [m["state"] for group, m in live if group == f"team-{run.team_id}"] == ["closed"]
    team_page = signed_in(django_user_model, "vic").get(f"/teams/{team.pk}/").content.decode()
    assert "Alerts (0 not acknowledged)" in team_page
    assert api(django_user_model, "vic").get("/api/alerts?state=current").json()["alerts"] == []
    # acknowledged once: again is a 409, as for any closed alert
    assert api(django_user_model, "max").post(f"/api/alerts/{entropy.pk}/acknowledge").status_code == 409


def test_ended_and_open_alerts_are_acknowledged_together(run, team, django_user_model,
                                                         django_capture_on_commit_callbacks):
    alerts = collapse(run, django_capture_on_commit_callbacks)
    end(run, Run.SUCCEEDED, django_capture_on_commit_callbacks)
    other = Run.objects.create(name="still going", method="ttrl", prompt_set=run.prompt_set, max_steps=9,
                               created_by=run.created_by, state=Run.RUNNING)
    still_open = Alert.objects.create(team=team, run=other, rule="entropy_collapse", message="m", step=3)
    ids = [alerts["entropy_collapse"].pk, still_open.pk]
    response = api(django_user_model, "max").post(f"/api/teams/{team.pk}/alerts/acknowledge", {"ids": ids},
                                                  content_type="application/json")
    assert response.status_code == 200, response.content
    assert {a["id"]: a["state"] for a in response.json()["alerts"]} == {ids[0]: "closed", ids[1]: "acknowledged"}
    assert {a.acknowledged_by.username for a in Alert.objects.filter(pk__in=ids)} == {"max"}


def test_a_closed_alert_refuses_acknowledgement_naming_its_state(run, django_user_model,
                                                                 django_capture_on_commit_callbacks):
    alerts = collapse(run, django_capture_on_commit_callbacks)
    end(run, Run.SUCCEEDED, django_capture_on_commit_callbacks)
    closed = alerts["majority_lock_in"]  # acknowledged before its run ended
    response = api(django_user_model, "max").post(f"/api/alerts/{closed.pk}/acknowledge")
    assert response.status_code == 409 and response.json()["field"] == "state"
    assert response.json()["error"] == "this alert is already closed"
