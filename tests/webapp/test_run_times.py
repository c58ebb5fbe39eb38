"""A run's times (Run.clock_json): the start is when a worker first took it, through resumes, and elapsed counts
training time only, from the run's history; the page, the API and the live messages carry the same."""
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import make_prompt_set
from webapp.runs import lifecycle
from webapp.runs.models import Run, RunTransition

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_enqueue(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *args, **kwargs: None)


def backdate(run, *minutes_ago):
    """Move the run's history rows, oldest first, to these minutes before now."""
    now = timezone.now()
    rows = list(RunTransition.objects.filter(run=run).order_by("id"))
    assert len(rows) == len(minutes_ago)
    for row, minutes in zip(rows, minutes_ago):
        RunTransition.objects.filter(pk=row.pk).update(at=now - timedelta(minutes=minutes))


def test_a_run_stopped_and_resumed_counts_only_its_training_time_and_keeps_its_first_start(user, api_client):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=9, created_by=user)
    lifecycle.queued(run, user)
    lifecycle.claim(run.pk, "host:1:a")
    first_start = Run.objects.get(pk=run.pk).started_at
    lifecycle.hand_back(run, "host:1:a", "the worker is shutting down")  # the server was stopped
    lifecycle.claim(run.pk, "host:2:b")  # ... and started again, hours later
    lifecycle.finish(run, Run.SUCCEEDED, "done", 0, "", owner="host:2:b")
    # launched 300 min ago, trained 290-280 (10 min), stopped until 100, trained 100-95 (5 min)
    backdate(run, 300, 290, 280, 100, 95)
    body = api_client.get(f"/api/runs/{run.pk}").json()
    assert body["trained_seconds"] == pytest.approx(15 * 60, abs=1) and body["training_since"] is None
    assert body["started_at"] == first_start.isoformat()


def test_a_training_run_reports_the_stretch_under_way_to_add_to_what_it_trained(user):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=9, created_by=user)
    lifecycle.queued(run, user)
    lifecycle.claim(run.pk, "host:1:a")
    lifecycle.hand_back(run, "host:1:a", "stopping")
    lifecycle.claim(run.pk, "host:2:b")
    backdate(run, 60, 50, 40, 10)
    run.refresh_from_db()
    clock = run.clock_json()
    assert clock["trained_seconds"] == pytest.approx(600, abs=1)
    assert clock["training_since"] == RunTransition.objects.filter(run=run).order_by("-id").first().at.isoformat()


def test_a_run_stored_before_its_history_counts_from_start_to_finish(user):
    start = timezone.now() - timedelta(hours=2)
    run = Run.objects.create(name="old", method="ttrl", prompt_set=make_prompt_set(user), max_steps=9, created_by=user,
                             state=Run.SUCCEEDED, started_at=start, finished_at=start + timedelta(minutes=30))
    assert run.clock_json()["trained_seconds"] == pytest.approx(1800)
