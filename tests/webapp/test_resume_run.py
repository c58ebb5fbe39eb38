"""POST /api/runs/{id}/resume reads what the ingested log knows of the run's checkpoints, never the run
directory: that is on the workers' disk, which the web process may not see (several hosts)."""
import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run, RunEvent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker_needed(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)


def failed_run(user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "not-this-host"  # nothing there, as on a web host
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=4, created_by=user,
                              state=Run.FAILED)


def test_a_run_whose_log_has_a_checkpoint_resumes_with_no_run_directory_here(api_client, user, settings, tmp_path):
    run = failed_run(user, settings, tmp_path)
    RunEvent.objects.create(run=run, seq=3, type="checkpoint", time=1.0, step=2, payload={"step": 2})
    response = api_client.post(f"/api/runs/{run.pk}/resume")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "queued" and "checkpoint of step 2" in response.json()["message"]


def test_a_run_without_a_checkpoint_in_its_log_resumes_saying_where_it_will_start(api_client, user, settings,
                                                                                  tmp_path):
    """A trainer whose supervisor died may have checkpointed after the last event anyone ingested."""
    run = failed_run(user, settings, tmp_path)
    response = api_client.post(f"/api/runs/{run.pk}/resume")
    assert response.status_code == 200 and response.json()["state"] == "queued"
    assert "no checkpoint is recorded" in response.json()["message"]


def test_a_run_that_is_not_cancelled_or_failed_cannot_be_resumed(api_client, user, settings, tmp_path):
    run = failed_run(user, settings, tmp_path)
    Run.objects.filter(pk=run.pk).update(state=Run.RUNNING)
    response = api_client.post(f"/api/runs/{run.pk}/resume")
    assert response.status_code == 409 and "only a cancelled or failed run" in response.json()["error"]
