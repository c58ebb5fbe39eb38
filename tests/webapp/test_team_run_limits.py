"""Per-team limits on shared workers, set by the deployment (EVOLAB_TEAM_MAX_ACTIVE_RUNS,
EVOLAB_TEAM_MAX_RUN_SIZE): a launch, clone or resume over a limit is refused naming the limit and its value,
and nothing is written."""
import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_broker_needed(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)


def launch(client, prompt_set, **extra):
    body = {"name": "r", "method": "ttrl", "prompt_set": prompt_set.pk, "max_steps": 2, **extra}
    return client.post("/api/runs", body, content_type="application/json")


def test_a_team_at_its_active_run_limit_cannot_queue_another(api_client, user, settings):
    settings.TEAM_MAX_ACTIVE_RUNS = 2
    prompt_set = make_prompt_set(user)
    assert launch(api_client, prompt_set).status_code == 201
    Run.objects.create(name="busy", method="ttrl", prompt_set=prompt_set, team=prompt_set.team, max_steps=2,
                       created_by=user, state=Run.RUNNING)
    Run.objects.create(name="done", method="ttrl", prompt_set=prompt_set, team=prompt_set.team, max_steps=2,
                       created_by=user, state=Run.SUCCEEDED)  # ended runs do not count
    refused = launch(api_client, prompt_set)
    assert refused.status_code == 400
    assert refused.json()["error"] == ("the team already has 2 queued or running runs, its limit "
                                       "(EVOLAB_TEAM_MAX_ACTIVE_RUNS = 2): wait for one to end or cancel one")
    assert Run.objects.filter(team=prompt_set.team).count() == 3
    failed = Run.objects.create(name="f", method="ttrl", prompt_set=prompt_set, team=prompt_set.team, max_steps=2,
                                created_by=user, state=Run.FAILED)
    resumed = api_client.post(f"/api/runs/{failed.pk}/resume")
    assert resumed.status_code == 400 and "EVOLAB_TEAM_MAX_ACTIVE_RUNS = 2" in resumed.json()["error"]
    failed.refresh_from_db()
    assert failed.state == Run.FAILED


def test_a_run_larger_than_the_team_limit_is_refused_with_its_size(api_client, user, settings):
    settings.TEAM_MAX_RUN_SIZE = 1_000_000
    prompt_set = make_prompt_set(user)
    small = {"n_votes": 4, "n_train": 2, "prompts_per_step": 2, "max_completion_length": 64}
    assert launch(api_client, prompt_set, max_steps=100, hyperparameters=small).status_code == 201  # 51,200
    refused = launch(api_client, prompt_set, max_steps=100, hyperparameters={**small, "max_completion_length": 4096})
    assert refused.status_code == 400 and refused.json()["field"] == "max_steps"
    assert refused.json()["error"] == (
        "the run would generate up to 3,276,800 tokens (prompts_per_step 2 × n_votes 4 × max_completion_length "
        "4096 × max_steps 100), over the team limit (EVOLAB_TEAM_MAX_RUN_SIZE = 1,000,000)")
    assert Run.objects.filter(team=prompt_set.team).count() == 1


def test_no_limit_is_set_by_default(settings):
    assert settings.TEAM_MAX_ACTIVE_RUNS == 0 and settings.TEAM_MAX_RUN_SIZE == 0
