"""POST /api/runs: `model` and `embedding_model` are names, never paths on the worker (webapp/runs/model_names.py,
docs/security.md "Files and models"). The worker's half (names to folders) is tests/workers/test_model_resolution.py."""
import pytest

from tests.factories import make_prompt_set, make_team
from webapp.runs.model_names import ModelNameError
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def prompt_set(user):
    return make_prompt_set(user)


@pytest.fixture(autouse=True)
def no_enqueue(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *args, **kwargs: None)


def launch(client, prompt_set, **fields):
    return client.post("/api/runs", {"name": "r", "method": "ttrl", "prompt_set": prompt_set.pk, **fields},
                       content_type="application/json")


def test_it_refuses_a_path_on_the_worker_as_a_model(api_client, prompt_set):
    for path in ("/etc", "/srv/runs/7/checkpoints/checkpoint-4", "~/models/x", "../other-team/model", "models/../..",
                 "C:\\models\\x", "./x", "x/", "a//b"):
        response = launch(api_client, prompt_set, model=path)
        assert response.status_code == 400, path
        assert response.json() == {"error": str(ModelNameError(path, "model")), "field": "model"}
    assert not Run.objects.exists()


def test_a_run_of_another_team_answers_exactly_like_one_that_does_not_exist(api_client, prompt_set, user):
    other_team = make_team("elsewhere", bob="admin")
    theirs = Run.objects.create(name="theirs", method="ttrl", prompt_set=make_prompt_set(
        other_team.memberships.get().user, team=other_team), created_by=other_team.memberships.get().user, max_steps=1)
    missing = theirs.pk + 1000
    answers = [launch(api_client, prompt_set, model=f"run:{pk}").json()["error"] for pk in (theirs.pk, missing)]
    assert answers == [str(ModelNameError(f"run:{theirs.pk}", "model")), str(ModelNameError(f"run:{missing}", "model"))]
    assert answers[0].replace(str(theirs.pk), "N") == answers[1].replace(str(missing), "N")
    assert not Run.objects.filter(name="r").exists()


def test_it_takes_the_name_of_a_folder_under_the_model_roots_and_queues_it_for_a_gpu(api_client, prompt_set):
    response = launch(api_client, prompt_set, model="Qwen/Qwen3-4B-Base")
    assert response.status_code == 201, response.content
    assert response.json()["model"] == "Qwen/Qwen3-4B-Base" and response.json()["gpus"] == 1


def test_it_takes_a_checkpoint_of_a_run_of_the_users_team_and_trains_where_that_run_did(api_client, prompt_set, user):
    earlier = Run.objects.create(name="earlier", method="ttrl", prompt_set=prompt_set, created_by=user, gpus=0, max_steps=1)
    for name in (f"run:{earlier.pk}", f"run:{earlier.pk}/checkpoint-20"):
        # on the CPU queue the paper's settings are past its run-size limit (docs/security.md): a small run
        response = launch(api_client, prompt_set, model=name, preset="small_cpu")
        assert response.status_code == 201, response.content
        assert response.json()["model"] == name and response.json()["gpus"] == 0


def test_a_run_trained_elsewhere_has_no_checkpoint_here(api_client, prompt_set, user):
    external = Run.objects.create(name="verl", method="ttrl", prompt_set=prompt_set, created_by=user, source=Run.EXTERNAL, max_steps=1)
    response = launch(api_client, prompt_set, model=f"run:{external.pk}")
    assert response.status_code == 400 and response.json()["field"] == "model"


def test_the_embedding_model_is_a_name_too(api_client, prompt_set):
    response = launch(api_client, prompt_set, embedding_model="/models/qwen3-embedding-4b")
    assert response.status_code == 400
    assert response.json() == {"error": str(ModelNameError("/models/qwen3-embedding-4b", "embedding_model")),
                               "field": "embedding_model"}
    assert launch(api_client, prompt_set, embedding_model="qwen3-embedding-4b").json()["embedding_model"] == \
        "qwen3-embedding-4b"
    assert launch(api_client, prompt_set, embedding_model=" ").json()["embedding_model"] == ""
