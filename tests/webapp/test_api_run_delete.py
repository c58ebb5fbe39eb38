"""DELETE /api/runs/{id}: a member deletes an ended run with its rows; its files go through a worker
(tests/workers/test_delete_run_files.py)."""
import pytest

from tests.factories import TeamListener, event_log, make_prompt_set, make_team, signed_in, team_of
from webapp.accounts.models import Membership
from webapp.metrics.models import MetricSeries
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Group, Rollout, Run, RunEvent, RunTransition
from webapp.tasks import DELETE_RUN_FILES

pytestmark = pytest.mark.django_db


@pytest.fixture
def sent(monkeypatch):
    sent = []
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda name, args, queue, countdown=None, **retry: sent.append((name, args, queue)))
    return sent


def make_run(user, state=Run.SUCCEEDED):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user,
                             state=state, queue="cpu")
    ingest_events(run, event_log(steps=2))
    RunTransition.record(run, RunTransition.LAUNCHED, user)
    return run


def test_a_member_deletes_an_ended_run_with_all_its_rows_and_a_worker_is_sent_to_remove_its_files(
        api_client, user, sent, django_capture_on_commit_callbacks):
    run, other = make_run(user), make_run(user)
    assert Rollout.objects.filter(run=run).exists() and MetricSeries.objects.filter(run=run).exists()
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.delete(f"/api/runs/{run.pk}")
    assert response.status_code == 200 and response.json() == {"deleted": run.pk}
    assert not Run.objects.filter(pk=run.pk).exists()
    for model in (Rollout, Group, RunEvent, RunTransition, MetricSeries):
        assert not model.objects.filter(run_id=run.pk).exists(), model
        assert model.objects.filter(run_id=other.pk).exists(), model
    assert sent == [(DELETE_RUN_FILES, [run.pk], "cpu")]
    assert api_client.get(f"/api/runs/{run.pk}").status_code == 404


@pytest.mark.parametrize("state", [Run.QUEUED, Run.RUNNING])
def test_an_active_run_is_refused_with_409_until_cancelled(api_client, user, sent, state):
    run = make_run(user, state=state)
    response = api_client.delete(f"/api/runs/{run.pk}")
    assert response.status_code == 409 and response.json()["field"] == "state"
    assert "cancel it first" in response.json()["error"]
    assert Run.objects.filter(pk=run.pk).exists() and sent == []


def test_a_viewer_cannot_delete_a_run(django_user_model, user, sent):
    run = make_run(user)
    make_team(team_of(user).name, vic=Membership.VIEWER)
    assert signed_in(django_user_model, "vic").delete(f"/api/runs/{run.pk}").status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()


def test_the_teams_open_run_lists_are_told_the_run_was_deleted(api_client, user, sent,
                                                               django_capture_on_commit_callbacks):
    # a run list or alerts page open in another tab drops the run's rows (static/js/run_list.js, team_alerts.js):
    # before, they kept showing it until reloaded
    run = make_run(user)
    receive = TeamListener(run.team_id).receive
    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.delete(f"/api/runs/{run.pk}").status_code == 200
    assert receive() == [{"type": "deleted", "id": run.pk}]


def test_a_refused_delete_tells_no_one(api_client, user, sent, django_capture_on_commit_callbacks):
    running, ended = make_run(user, state=Run.RUNNING), make_run(user)
    receive = TeamListener(running.team_id).receive
    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.delete(f"/api/runs/{running.pk}").status_code == 409
        assert api_client.delete(f"/api/runs/{ended.pk}").status_code == 200
    assert receive() == [{"type": "deleted", "id": ended.pk}]  # the first message the team got


def test_the_runs_text_index_rows_go_with_it(api_client, user, sent):
    # SQLite's FTS5 table has no foreign key to cascade from the rollouts (PostgreSQL's has): its rows stayed
    from webapp.explorer.text_search import catch_up_fully
    from webapp.explorer.models import RolloutText

    run, other = make_run(user), make_run(user)
    assert catch_up_fully(run.pk) and catch_up_fully(other.pk)
    kept = RolloutText.objects.filter(run_id=other.pk).count()
    assert api_client.delete(f"/api/runs/{run.pk}").status_code == 200
    assert RolloutText.objects.filter(run_id=run.pk).count() == 0
    assert RolloutText.objects.filter(run_id=other.pk).count() == kept > 0
