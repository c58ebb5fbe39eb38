"""A rule that raises stops nothing else (issue 36, item 7): evaluate_steps judges each rule apart, so the other
rules' findings are applied and ingestion commits; the failure is logged with its traceback and becomes the run's
`processing_failed` alert naming the rule, the step and the error; a task judges the rule again with backoff, and
the alert resolves once the rule judges (there, or at a later step). Before, one rule's TypeError rolled back the
whole ingestion, and a run trained elsewhere stopped being grouped with nothing on its page."""
import logging

import pytest

from tests.alerts.streams import collapsing, metric_events
from tests.factories import make_prompt_set, make_team
from webapp.alerts import engine
from webapp.alerts.models import Alert
from webapp.alerts.rules import _STEP_RULES
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run
from webapp.runs.queries import metric_series_of_runs

pytestmark = pytest.mark.django_db

JUDGE_AGAIN = "workers.tasks.judge_failed_rules"


@pytest.fixture(autouse=True)
def sent(monkeypatch):
    queued = []
    monkeypatch.setattr("webapp.tasks.app.send_task",
                        lambda name, args, queue, countdown=None, **retry: queued.append((name, args, countdown)))
    return queued


@pytest.fixture
def run(django_user_model):
    team = make_team("lab", ada="admin")
    ada = django_user_model.objects.get(username="ada")
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=30,
                              created_by=ada, state=Run.RUNNING)


@pytest.fixture
def broken_lock_in(monkeypatch):
    """majority_lock_in raises (a bug of one rule), with model-like text in its error."""
    def broken(history, rule):
        raise TypeError("'<' not supported between <b>None</b> and 'float'")

    monkeypatch.setitem(_STEP_RULES, "majority_lock_in", broken)
    return monkeypatch


def ingest(run, events, django_capture_on_commit_callbacks, batch=1):
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(0, len(events), batch):
            ingest_events(run, events[i:i + batch])


def failed(run) -> Alert:
    return Alert.objects.get(run=run, rule="processing_failed")


def test_a_rule_that_raises_becomes_the_runs_processing_failed_alert_and_the_others_still_judge(
        run, broken_lock_in, sent, caplog, django_capture_on_commit_callbacks):
    caplog.set_level(logging.ERROR, logger="webapp.alerts.engine")
    ingest(run, metric_events(collapsing()), django_capture_on_commit_callbacks, batch=4)
    assert metric_series_of_runs([run.pk])[run.pk]["entropy"]["steps"] == list(range(1, 13))  # committed
    assert Alert.objects.get(run=run, rule="entropy_collapse").state == "open"  # the other rules judged
    assert not Alert.objects.filter(run=run, rule="majority_lock_in").exists()
    alert = failed(run)
    assert alert.state == "open" and alert.severity == "warning" and (alert.step, alert.last_step) == (4, 12)
    assert alert.message == ("rule majority_lock_in failed at step 12: TypeError: '<' not supported between "
                             "<b>None</b> and 'float' (3 attempts)")  # a failure in each of the 3 batches
    assert "Traceback" not in alert.message
    # its traceback is in the log, once a batch
    logged = [r for r in caplog.records if "alert rule majority_lock_in failed" in r.getMessage()]
    assert len(logged) == 3 and all(r.exc_info for r in logged)
    # judged again by a task, sent once (when the rule first failed), after the base delay
    assert [(name, args) for name, args, _ in sent if name == JUDGE_AGAIN] == [(JUDGE_AGAIN, [run.pk])]


def test_judged_again_while_it_raises_it_stays_failing_and_once_it_judges_the_alert_resolves(
        run, broken_lock_in, django_capture_on_commit_callbacks):
    ingest(run, metric_events(collapsing()), django_capture_on_commit_callbacks, batch=12)
    with django_capture_on_commit_callbacks(execute=True):
        assert engine.judge_failed_rules(run.pk) == ["majority_lock_in"]  # the task raises on this, to be retried
    assert failed(run).message.endswith("(2 attempts)")

    broken_lock_in.undo()  # the fault removed
    with django_capture_on_commit_callbacks(execute=True):
        assert engine.judge_failed_rules(run.pk) == []
    assert failed(run).state == "resolved"
    # judged at the run's last step, the rule opens what it found there
    lock_in = Alert.objects.get(run=run, rule="majority_lock_in")
    assert lock_in.state == "open" and lock_in.step == 12
    assert engine.judge_failed_rules(run.pk) == []  # delivered twice: nothing left to do


def test_a_rule_that_judges_a_later_step_is_taken_off_the_alert(run, monkeypatch, django_capture_on_commit_callbacks):
    healthy_rule = _STEP_RULES["majority_lock_in"]

    def fails_before_step_8(history, rule):
        if history.steps[-1] < 8:
            raise KeyError("majority_ratio")
        return healthy_rule(history, rule)

    monkeypatch.setitem(_STEP_RULES, "majority_lock_in", fails_before_step_8)
    events = metric_events(collapsing())
    ingest(run, events[:6], django_capture_on_commit_callbacks)
    assert failed(run).message.startswith("rule majority_lock_in failed at step 6: KeyError: 'majority_ratio'")
    ingest(run, events[6:], django_capture_on_commit_callbacks)
    assert failed(run).state == "resolved"


def test_two_failing_rules_are_one_alert_naming_both(run, broken_lock_in, django_capture_on_commit_callbacks):
    def also_broken(history, rule):
        raise ZeroDivisionError("float division by zero")

    broken_lock_in.setitem(_STEP_RULES, "length_collapse", also_broken)
    ingest(run, metric_events(collapsing()), django_capture_on_commit_callbacks, batch=12)
    alert = failed(run)
    assert alert.message == ("2 background tasks fail on this run: rule length_collapse at step 12: ZeroDivisionError: "
                             "float division by zero; rule majority_lock_in at step 12: TypeError: '<' not supported "
                             "between <b>None</b> and 'float'")
    assert sorted(alert.values["failures"]) == ["rule length_collapse", "rule majority_lock_in"]


def test_a_team_that_turned_the_rule_off_gets_no_alert_but_the_other_rules_still_judge(
        run, broken_lock_in, django_capture_on_commit_callbacks):
    from webapp.alerts.models import TeamAlertRules

    TeamAlertRules.objects.create(team=run.team, overrides={"processing_failed": {"enabled": False}})
    ingest(run, metric_events(collapsing()), django_capture_on_commit_callbacks, batch=12)
    assert not Alert.objects.filter(run=run, rule="processing_failed").exists()
    assert Alert.objects.filter(run=run, rule="entropy_collapse").exists()


def test_a_runs_end_leaves_its_processing_failed_alert_open(run, broken_lock_in, django_capture_on_commit_callbacks):
    from webapp.runs import lifecycle

    ingest(run, metric_events(collapsing()), django_capture_on_commit_callbacks, batch=12)
    lifecycle.finish(Run.objects.get(pk=run.pk), Run.SUCCEEDED, "", 0, "")
    assert failed(run).state == "open"  # work on the run goes on after it ends, and is still failing
    assert Alert.objects.get(run=run, rule="entropy_collapse").state == "ended"
