"""Alerts as ingestion opens them: one active alert per (run, rule), updated rather than
repeated, resolved when the condition clears, acknowledged by a member."""
import pytest
from django.core import mail

from tests.alerts.streams import collapsing, healthy, metric_events, recovering
from tests.factories import event_log, make_prompt_set, make_team
from webapp.alerts import engine
from webapp.alerts.models import Alert, TeamAlertRules, Webhook, WebhookDelivery
from webapp.runs import lifecycle
from webapp.metrics.models import MetricPoint
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    sent = []
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda name, args, queue, countdown=None, **retry: sent.append((name, args)))
    return sent


@pytest.fixture
def run(django_user_model):
    team = make_team("lab", ada="admin")
    user = django_user_model.objects.get(username="ada")
    user.email = "ada@example.org"
    user.save()
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user, team=team), max_steps=30,
                              created_by=user, hyperparameters={"max_completion_length": 512})


def ingest_each(run, events, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        for event in events:
            ingest_events(run, [event])


def test_a_collapsing_run_opens_entropy_and_lock_in_alerts_once(run, django_capture_on_commit_callbacks):
    ingest_each(run, metric_events(collapsing()), django_capture_on_commit_callbacks)
    alerts = {a.rule: a for a in Alert.objects.filter(run=run)}
    assert {"entropy_collapse", "majority_lock_in"} <= set(alerts)
    entropy = alerts["entropy_collapse"]
    assert entropy.state == "open" and entropy.team_id == run.team_id
    assert entropy.step < entropy.last_step == 12 and entropy.updates == 12 - entropy.step
    assert "entropy" in entropy.message and entropy.values["entropy"] < 0.2
    assert Alert.objects.filter(run=run, rule="entropy_collapse").count() == 1


def test_a_healthy_run_opens_no_alert(run, django_capture_on_commit_callbacks):
    ingest_each(run, metric_events(healthy()), django_capture_on_commit_callbacks)
    assert not Alert.objects.exists()


def test_an_alert_resolves_when_the_condition_clears_and_a_recurrence_opens_a_new_one(run, django_capture_on_commit_callbacks):
    ingest_each(run, metric_events(recovering()), django_capture_on_commit_callbacks)
    entropy = Alert.objects.get(run=run, rule="entropy_collapse")
    assert entropy.state == "resolved" and entropy.resolved_at is not None
    again = metric_events({"entropy": [0.01] * 4, "majority_ratio": [0.95] * 4, "response_length/mean": [300.0] * 4},
                          start_seq=100, start_step=25)
    ingest_each(run, again, django_capture_on_commit_callbacks)
    states = sorted(Alert.objects.filter(run=run, rule="entropy_collapse").values_list("state", flat=True))
    assert states == ["open", "resolved"]


def test_ingestion_derives_invalid_truncated_and_zero_variance_ratios_from_rollouts(run, django_capture_on_commit_callbacks):
    events = event_log(steps=1, group_size=4)
    for event in events:
        if event["type"] == "group":
            for r in event["rollouts"]:
                r.update(valid=False, answer=None, reward=0.0, length=512)
    ingest_each(run, events, django_capture_on_commit_callbacks)
    values = dict(MetricPoint.objects.filter(series__run=run, series__clock=False, step=1).values_list("series__name", "value"))
    assert values["invalid_ratio"] == 1.0 and values["truncated_ratio"] == 1.0 and values["zero_variance_groups"] == 1.0


def test_team_and_run_thresholds_override_the_defaults(run, django_capture_on_commit_callbacks):
    TeamAlertRules.objects.create(team=run.team, overrides={"majority_lock_in": {"enabled": False}})
    run.hyperparameters["alert_rules"] = {"entropy_collapse": {"fraction": 0.001, "critical_fraction": 0.0001}}
    run.save()
    ingest_each(run, metric_events(collapsing()), django_capture_on_commit_callbacks)
    rules = set(Alert.objects.filter(run=run).values_list("rule", flat=True))
    assert "majority_lock_in" not in rules and "entropy_collapse" not in rules


def test_acknowledging_keeps_the_alert_active_and_updating(run, django_user_model, django_capture_on_commit_callbacks):
    events = metric_events(collapsing(16))
    ingest_each(run, events[:10], django_capture_on_commit_callbacks)
    alert = Alert.objects.get(run=run, rule="entropy_collapse")
    engine.acknowledge(alert, django_user_model.objects.get(username="ada"))
    ingest_each(run, events[10:], django_capture_on_commit_callbacks)
    alert.refresh_from_db()
    assert alert.state == "acknowledged" and alert.acknowledged_by.username == "ada" and alert.last_step == 16


def test_opening_an_alert_queues_webhooks_and_email(run, no_queue, django_capture_on_commit_callbacks):
    Webhook.objects.create(team=run.team, url="http://127.0.0.1:9/hook")
    ingest_each(run, metric_events(collapsing()), django_capture_on_commit_callbacks)
    opened = WebhookDelivery.objects.filter(event="opened")
    assert opened.count() == Alert.objects.filter(run=run).count()
    payload = opened.first().payload
    assert payload["text"].startswith((":warning:", ":rotating_light:", ":information_source:"))
    assert payload["alert"]["run"] == run.pk
    names = [name for name, _ in no_queue]
    assert "workers.tasks.deliver_webhook" in names and "workers.tasks.send_alert_email" in names


def test_the_alert_email_goes_to_team_members(run, django_capture_on_commit_callbacks):
    from webapp.alerts.delivery import send_email

    ingest_each(run, metric_events(collapsing()), django_capture_on_commit_callbacks)
    alert = Alert.objects.filter(run=run).first()
    assert send_email(alert.pk, "opened") == 1
    assert mail.outbox[0].to == ["ada@example.org"] and alert.rule in mail.outbox[0].subject


def test_the_alert_email_is_plain_text_saying_what_was_seen(run, django_capture_on_commit_callbacks):
    # the webhook's Slack markup (":warning:", "<url|name>") and a Python dict of values read badly in a mail client
    from webapp.alerts.delivery import send_email

    ingest_each(run, metric_events(collapsing()), django_capture_on_commit_callbacks)
    alert = Alert.objects.filter(run=run).first()
    send_email(alert.pk, "opened")
    body = mail.outbox[0].body
    first = body.splitlines()[0]
    assert first == f"{alert.rule} opened on run #{run.pk} {run.name} at step {alert.step} ({alert.severity})"
    assert body.splitlines()[1] == alert.message
    assert ":warning:" not in body and "|" not in body and "{" not in body
    name, value = next(iter(alert.values.items()))
    assert f"{name} {value}" in body


def test_a_failed_run_opens_a_critical_run_failed_alert(run, django_capture_on_commit_callbacks):
    Run.objects.filter(pk=run.pk).update(state=Run.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.finish(run, Run.FAILED, "the trainer exited with code 1", 1, "Traceback ...")
    alert = Alert.objects.get(run=run, rule="run_failed")
    assert alert.severity == "critical" and "code 1" in alert.message


def test_a_silent_running_run_is_stalled_until_events_resume(run, django_capture_on_commit_callbacks):
    Run.objects.filter(pk=run.pk).update(state=Run.RUNNING)
    events = metric_events(healthy(2))
    ingest_each(run, events, django_capture_on_commit_callbacks)
    last = events[-1]["time"]
    assert lifecycle.check_stalled(now=last + 60) == 0
    assert lifecycle.check_stalled(now=last + 16 * 60) == 1
    assert lifecycle.check_stalled(now=last + 17 * 60) == 1
    assert Alert.objects.get(run=run, rule="stalled").state == "open"
    ingest_each(run, metric_events(healthy(1), start_seq=10, start_step=3), django_capture_on_commit_callbacks)
    assert Alert.objects.get(run=run, rule="stalled").state == "resolved"


def test_live_messages_reach_the_run_and_team_groups(run, monkeypatch, django_capture_on_commit_callbacks):
    sent = []
    monkeypatch.setattr("webapp.live._send_all", lambda batches: sent.extend(batches.items()))
    ingest_each(run, metric_events(collapsing()), django_capture_on_commit_callbacks)
    alert_groups = {group for group, messages in sent for m in messages if m["type"] == "alert"}
    assert alert_groups == {f"run-{run.pk}", f"team-{run.team_id}"}


def test_a_failed_run_ends_its_other_alerts_and_keeps_run_failed_open(run, django_capture_on_commit_callbacks):
    # what else a run's end does to its alerts: tests/alerts/test_alerts_of_ended_runs.py
    ingest_each(run, metric_events(collapsing()), django_capture_on_commit_callbacks)
    lifecycle.finish(Run.objects.get(pk=run.pk), Run.FAILED, "the trainer exited with code 1", 1, "")
    active = Alert.objects.filter(run=run, state__in=Alert.ACTIVE)
    assert list(active.values_list("rule", flat=True)) == ["run_failed"]
    assert Alert.objects.filter(run=run, rule="entropy_collapse", state=Alert.ENDED).exists()
