"""A long batch of steps (an archive imported by evolab sync, a restarted supervisor catching up) is charted at once
and judged by a worker after it (engine.judge_backlog): the alerts come out as if every step had been judged as it
was ingested, steps ingested meanwhile are judged by the backlog in order, and a lost task is sent again."""
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from tests.alerts.streams import collapsing, metric_events, recovering
from tests.factories import make_prompt_set, make_team
from webapp.alerts import engine
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Alert, RuleBacklog
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run
from webapp.tasks import JUDGE_RULE_BACKLOG

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    found = []
    monkeypatch.setattr("webapp.tasks.app.send_task",
                        lambda name, args, queue, countdown=None, **retry: found.append((name, args)))
    return found


@pytest.fixture
def make_run(django_user_model):
    team = make_team("lab", ada="admin")
    user = django_user_model.objects.get(username="ada")

    def make(name):
        return Run.objects.create(name=name, method="ttrl", prompt_set=make_prompt_set(user, team=team, name=name),
                                  max_steps=60, created_by=user)
    return make


def backlog_tasks(sent):
    return [args for name, args in sent if name == JUDGE_RULE_BACKLOG]


def alerts_of(run):
    return sorted((a.rule, a.state, a.step, a.last_step, a.updates, a.message)
                  for a in Alert.objects.filter(run=run).exclude(rule="stalled"))


def stream(steps=40):
    """Collapses, recovers, collapses again: alerts that open, resolve and open anew."""
    first, second = recovering(steps // 2), collapsing(steps - steps // 2)
    return metric_events({name: first[name] + second[name] for name in first})


def test_a_long_batch_is_judged_after_it_as_if_step_by_step(make_run, monkeypatch, sent,
                                                               django_capture_on_commit_callbacks):
    events = stream()
    inline = make_run("inline")
    with django_capture_on_commit_callbacks(execute=True):
        for event in events:
            ingest_events(inline, [event])
    assert alerts_of(inline), "the stream raises alerts"

    monkeypatch.setattr(engine, "BACKLOG_STEPS", 10)
    monkeypatch.setattr(engine, "BACKLOG_TURN_STEPS", 7)  # several turns
    later = make_run("later")
    with django_capture_on_commit_callbacks(execute=True):
        ingest_events(later, events)
    assert not Alert.objects.filter(run=later).exists()  # charted, not judged yet
    assert RuleBacklog.objects.get(run=later).first_step == 1 and backlog_tasks(sent) == [[later.pk]]
    assert engine.judge_backlog(later.pk) == len(events)
    assert not RuleBacklog.objects.filter(run=later).exists()
    assert alerts_of(later) == alerts_of(inline)
    assert engine.judge_backlog(later.pk) == 0  # delivered twice: nothing left


def test_steps_ingested_while_a_backlog_waits_are_judged_by_it_then_ingestion_judges_again(
        make_run, monkeypatch, sent, django_capture_on_commit_callbacks):
    events = stream()
    inline = make_run("inline")
    with django_capture_on_commit_callbacks(execute=True):
        for event in events:
            ingest_events(inline, [event])

    monkeypatch.setattr(engine, "BACKLOG_STEPS", 10)
    run = make_run("mixed")
    with django_capture_on_commit_callbacks(execute=True):
        ingest_events(run, events[:25])  # a backlog
        for event in events[25:32]:  # one at a time, while it waits: left to it
            ingest_events(run, [event])
    assert not Alert.objects.filter(run=run).exists() and backlog_tasks(sent) == [[run.pk]]
    engine.judge_backlog(run.pk)
    with django_capture_on_commit_callbacks(execute=True):
        for event in events[32:]:  # judged by ingestion again
            ingest_events(run, [event])
    assert not RuleBacklog.objects.filter(run=run).exists() and backlog_tasks(sent) == [[run.pk]]
    assert alerts_of(run) == alerts_of(inline)


def test_a_short_batch_is_judged_at_once(make_run, django_capture_on_commit_callbacks):
    run = make_run("short")
    with django_capture_on_commit_callbacks(execute=True):
        ingest_events(run, metric_events(collapsing(12)))
    assert Alert.objects.filter(run=run, rule="entropy_collapse").exists()
    assert not RuleBacklog.objects.filter(run=run).exists()


def test_a_backlog_whose_task_was_lost_is_sent_again(make_run, sent):
    waiting, fresh = make_run("waiting"), make_run("fresh")
    RuleBacklog.objects.create(run=waiting, first_step=1, requested_at=timezone.now() - timedelta(minutes=5))
    RuleBacklog.objects.create(run=fresh, first_step=1, requested_at=timezone.now())
    assert engine.resend_stale_backlogs() == [waiting.pk]
    assert sent == [(JUDGE_RULE_BACKLOG, [waiting.pk])]
    assert engine.resend_stale_backlogs() == []  # sent just now


def test_the_run_says_from_which_step_its_alerts_are_pending(make_run, monkeypatch,
                                                             django_capture_on_commit_callbacks):
    monkeypatch.setattr(engine, "BACKLOG_STEPS", 10)
    run = make_run("pending")
    client = Client(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(run.created_by)}")
    assert client.get(f"/api/runs/{run.pk}").json()["alerts_pending_from_step"] is None
    with django_capture_on_commit_callbacks(execute=True):
        ingest_events(run, stream())
    assert client.get(f"/api/runs/{run.pk}").json()["alerts_pending_from_step"] == 1
    engine.judge_backlog(run.pk)
    assert client.get(f"/api/runs/{run.pk}").json()["alerts_pending_from_step"] is None
