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
    settings.TEAM_MAX_RUN_SIZE = {"cpu": 1_000_000, "gpu": 10**11}
    prompt_set = make_prompt_set(user)
    small = {"n_votes": 4, "n_train": 2, "prompts_per_step": 2, "max_completion_length": 64}
    assert launch(api_client, prompt_set, max_steps=100, hyperparameters=small).status_code == 201  # 51,200
    refused = launch(api_client, prompt_set, max_steps=100, hyperparameters={**small, "max_completion_length": 4096})
    assert refused.status_code == 400 and refused.json()["field"] == "max_steps"
    assert refused.json()["error"] == (
        "the run would generate up to 3,276,800 tokens (prompts_per_step 2 × n_votes 4 × max_completion_length "
        "4096 × max_steps 100), over the cpu queue's limit of 1,000,000 (raise it with "
        "EVOLAB_TEAM_MAX_RUN_SIZE=cpu=N)")
    assert Run.objects.filter(team=prompt_set.team).count() == 1


def test_by_default_a_run_absurd_for_its_queue_is_refused_and_the_papers_runs_are_not(api_client, user, settings):
    """The limit used to be off unless a deployment set it: one launch of 4,096 prompts × 1,024 votes × 131,072
    tokens × 100,000 steps held a shared worker for ever. Each queue has a default now."""
    prompt_set = make_prompt_set(user)
    paper = {"preset": "paper", "max_steps": 20}
    refused = launch(api_client, prompt_set, **paper)  # TTRL's 8 × 64 × 12,288 × 20 on a CPU worker: 126 M tokens
    assert refused.status_code == 400 and refused.json()["field"] == "max_steps"
    assert "over the cpu queue's limit of 100,000,000" in refused.json()["error"]
    assert launch(api_client, prompt_set, gpus=1, **paper).status_code == 201  # a GPU worker's business
    assert launch(api_client, prompt_set, gpus=1, preset="paper", max_steps=1000).status_code == 201
    absurd = launch(api_client, prompt_set, gpus=8, max_steps=100_000,
                    hyperparameters={"n_votes": 1024, "n_train": 1024, "prompts_per_step": 4096,
                                     "max_completion_length": 131072})
    assert absurd.status_code == 400 and "over the gpu queue's limit of 100,000,000,000" in absurd.json()["error"]
    assert launch(api_client, prompt_set).status_code == 201  # the small preset of the default policy


@pytest.mark.parametrize("text, limits", [
    (None, {"cpu": 10**8, "gpu": 10**11}), ("", {"cpu": 10**8, "gpu": 10**11}), ("0", {"cpu": 0, "gpu": 0}),
    ("5000000", {"cpu": 5_000_000, "gpu": 5_000_000}), ("cpu=2e9", None), ("cpu=2000000000", {"cpu": 2 * 10**9, "gpu": 10**11}),
    ("cpu=1, a100=7", {"cpu": 1, "gpu": 10**11, "a100": 7}),
])
def test_the_setting_takes_one_number_or_a_number_per_queue(text, limits):
    from webapp.settings import run_size_limits

    if limits is None:
        with pytest.raises(ValueError, match="EVOLAB_TEAM_MAX_RUN_SIZE"):
            run_size_limits(text)
    else:
        assert run_size_limits(text) == limits


def test_no_active_run_limit_is_set_by_default(settings):
    assert settings.TEAM_MAX_ACTIVE_RUNS == 0
