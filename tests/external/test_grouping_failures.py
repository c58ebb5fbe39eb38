"""No silent failure in the grouping of a run trained elsewhere (issue 36, item 7), through the real endpoint
(POST /api/runs/{id}/rollouts, as the README's curl sends it) and the real grouping task (workers.tasks, called as
the worker calls it; Celery's retries are what its options say, checked below).

The report: a run whose metrics reach step 12 got rollouts of steps 4-7 with ?complete_through=7, and they were
never grouped: the degeneration rule raised TypeError ('<' between None and a float: invalid_ratio, derived from
the grouped rollouts, was missing over the latest steps) inside the grouping's ingestion, the task failed the same
way on every retry, and nothing showed in the UI."""
import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.external.conftest import charted
from webapp.alerts.models import Alert
from webapp.alerts.rules import _STEP_RULES
from webapp.external.grouping import resend_stale
from webapp.external.models import PendingRollout
from webapp.runs.models import Group
from workers import tasks

pytestmark = pytest.mark.django_db

GROUP_TASK = "workers.tasks.group_external_rollouts"


@pytest.fixture
def run(mlflow, no_enqueue):
    """An outside run whose trainer logged 12 steps through MLflow: entropy collapsing from step 6, its length and
    truncation (but invalid_ratio comes from the rollouts Evolab groups)."""
    run_id = mlflow.new_run("verl-grpo", tags={"evolab.trainer": "verl"})
    for step in range(1, 13):
        mlflow.log(run_id, step, {"actor/entropy": 1.2 if step < 6 else 0.2, "response_length/mean": 300.0 - step,
                                  "response_length/clip_ratio": 0.0})
    return charted(run_id)


def report(api_client, run, steps, complete_through):
    """The README's curl: JSON lines, two rollouts a prompt, two prompts a step, mostly boxed answers."""
    lines = [{"step": step, "prompt": prompt, "index": i, "completion": f"so \\boxed{{{answer}}}", "reward": 1.0,
              "label": "42"}
             for step in steps for prompt in ("What is 6 x 7?", "What is 40 + 2?")
             for i, answer in enumerate(("42", "48"))]
    body = "".join(json.dumps(line) + "\n" for line in lines)
    response = api_client.post(f"/api/runs/{run.pk}/rollouts?complete_through={complete_through}", body,
                               content_type="application/x-ndjson")
    assert response.status_code == 200, response.content
    return response


def group_as_the_worker_does(run, no_enqueue, django_capture_on_commit_callbacks):
    """The grouping task the report queued, run as the worker runs it."""
    assert (GROUP_TASK, [run.pk]) in [(name, args) for name, args, _ in no_enqueue]
    with django_capture_on_commit_callbacks(execute=True):
        return tasks.group_external_rollouts(run.pk)


def banner(client, user, run) -> str | None:
    """The run page's banner of failed processing: its text, or None when hidden."""
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    found = re.search(r'<p id="processing-failed"[^>]*?( hidden)?>(.*?)</p>', page, re.S)
    return None if found.group(1) else " ".join(re.sub(r"<[^>]+>", " ", found.group(2)).split())


def grouped_steps(run) -> list[int]:
    return sorted(set(Group.objects.filter(run=run).values_list("step", flat=True)))


def test_the_readme_report_of_steps_4_to_7_is_grouped_and_the_page_shows_no_failure(
        run, api_client, client, user, no_enqueue, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        report(api_client, run, range(4, 8), complete_through=7)
    done = group_as_the_worker_does(run, no_enqueue, django_capture_on_commit_callbacks)
    assert done["steps"] == [4, 5, 6, 7] and grouped_steps(run) == [4, 5, 6, 7]
    assert not PendingRollout.objects.filter(run=run).exists()
    assert not Alert.objects.filter(run=run, rule="processing_failed").exists()
    assert banner(client, user, run) is None
    assert Alert.objects.filter(run=run, rule="entropy_collapse", state="open").exists()  # the rules judged


def test_a_rule_that_raises_shows_on_the_run_and_stops_neither_grouping_nor_the_other_rules_until_it_is_fixed(
        run, api_client, client, user, no_enqueue, monkeypatch, django_capture_on_commit_callbacks):
    def broken(history, rule):
        raise TypeError("'<' not supported between instances of 'NoneType' and 'float' <script>x</script>")

    monkeypatch.setitem(_STEP_RULES, "degeneration", broken)
    with django_capture_on_commit_callbacks(execute=True):
        report(api_client, run, range(4, 8), complete_through=7)
    assert group_as_the_worker_does(run, no_enqueue, django_capture_on_commit_callbacks)["steps"] == [4, 5, 6, 7]
    assert grouped_steps(run) == [4, 5, 6, 7]  # grouping done
    assert Alert.objects.get(run=run, rule="entropy_collapse").state == "open"  # the other rules' alerts
    failed = Alert.objects.get(run=run, rule="processing_failed")
    assert failed.state == "open" and failed.message.startswith(
        "rule degeneration failed at step 12: TypeError: '<' not supported between instances of 'NoneType' and "
        "'float' <script>x</script>")
    shown = banner(client, user, run)
    assert shown.startswith("Evolab's work on this run failed: rule degeneration failed at step 12: TypeError")
    client.force_login(user)
    assert "&lt;script&gt;x&lt;/script&gt;" in client.get(f"/runs/{run.pk}/").content.decode()  # escaped text

    # its task judges it again with backoff: while it raises, the task fails (Celery retries it)
    assert ("workers.tasks.judge_failed_rules", [run.pk]) in [(name, args) for name, args, _ in no_enqueue]
    with pytest.raises(tasks.RulesStillFail), django_capture_on_commit_callbacks(execute=True):
        tasks.judge_failed_rules(run.pk)
    monkeypatch.undo()  # the fault removed, the task retried
    with django_capture_on_commit_callbacks(execute=True):
        tasks.judge_failed_rules(run.pk)
    assert Alert.objects.get(pk=failed.pk).state == "resolved"
    assert banner(client, user, run) is None


def test_grouping_that_fails_shows_on_the_run_with_its_step_and_a_retry_that_succeeds_clears_it(
        run, api_client, client, user, no_enqueue, monkeypatch, django_capture_on_commit_callbacks):
    from webapp.external import grouping

    vote = grouping.majority_vote
    calls = []

    def fails_on_step_6(answers):
        calls.append(1)
        if len(calls) in (5, 6):  # the first prompt of step 6 (two prompts a step), once per attempt
            raise RuntimeError("answers table unreachable")
        return vote(answers)

    monkeypatch.setattr(grouping, "majority_vote", fails_on_step_6)
    with django_capture_on_commit_callbacks(execute=True):
        report(api_client, run, range(4, 8), complete_through=7)
    with pytest.raises(RuntimeError):  # the worker's Celery retries it, with backoff
        group_as_the_worker_does(run, no_enqueue, django_capture_on_commit_callbacks)
    assert grouped_steps(run) == [4, 5]  # a step a transaction: the ones before stay grouped
    failed = Alert.objects.get(run=run, rule="processing_failed")
    assert failed.message == "grouping of reported rollouts failed at step 6: RuntimeError: answers table unreachable"
    assert banner(client, user, run).startswith("Evolab's work on this run failed: grouping of reported rollouts")
    with pytest.raises(RuntimeError):  # the first retry fails the same way
        tasks.group_external_rollouts(run.pk)
    assert Alert.objects.get(pk=failed.pk).message.endswith("(2 attempts)")

    with django_capture_on_commit_callbacks(execute=True):
        tasks.group_external_rollouts(run.pk)  # the next retry succeeds
    assert grouped_steps(run) == [4, 5, 6, 7]
    assert Alert.objects.get(pk=failed.pk).state == "resolved" and banner(client, user, run) is None


@pytest.mark.parametrize("task", ["group_external_rollouts", "embed_external_groups", "index_rollout_text",
                                  "judge_failed_rules"])
def test_each_task_on_a_run_is_retried_by_celery_with_exponential_backoff_and_a_cap(task, settings):
    retried = getattr(tasks, task)
    assert retried.autoretry_for == (Exception,)
    assert retried.retry_backoff == settings.TASK_RETRY_BASE_SECONDS and retried.retry_backoff_max == 600
    assert retried.max_retries == settings.TASK_MAX_RETRIES


def test_the_beat_leaves_a_run_whose_grouping_is_being_retried_to_its_retries(
        run, api_client, no_enqueue, monkeypatch, django_capture_on_commit_callbacks):
    from webapp.alerts import engine

    report(api_client, run, [4], complete_through=3)
    later = timezone.now() + timedelta(minutes=5)
    assert resend_stale(now=later) == [run.pk]  # waiting, nobody grouping it: sent again
    engine.record_failure(run, "grouping", 4, RuntimeError("boom"))
    assert resend_stale(now=later) == []  # its own retries are under way
    assert resend_stale(now=later + timedelta(hours=1)) == [run.pk]  # they gave up: the beat starts again
