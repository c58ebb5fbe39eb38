"""/runs/{id}/evaluation/: a run's evaluation generations (verl's validation files, webapp/external/artifacts.py), a
step at a time, model output escaped, a chat-markup prompt shown as its turns."""
import json

import pytest

from tests.external.test_mlflow_artifacts import put, root_of, verl_file
from tests.factories import make_team
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run_with_generations(mlflow):
    run_id = mlflow.new_run()
    root = root_of(mlflow, run_id)
    put(mlflow, f"{root}/val_step10.json", verl_file(10, [("What is 2+3?", "\\boxed{5}", 1.0)]))
    put(mlflow, f"{root}/val_step20.json", json.dumps([
        {"input": "<|im_start|>user\nWhat is 4*4?<|im_end|>\n<|im_start|>assistant\n",
         "output": "<script>alert(1)</script> \\boxed{16}", "score": 0.0}]).encode())
    return Run.objects.get(mlflow_run_id=run_id)


def test_it_shows_the_latest_step_with_its_steps_to_choose_from(client, user, run_with_generations):
    client.force_login(user)
    page = client.get(f"/runs/{run_with_generations.pk}/evaluation/").content.decode()
    assert '<strong id="current-step">20</strong>' in page and 'href="?step=10"' in page
    assert "mean score 0" in page


def test_model_output_is_escaped_and_a_chat_prompt_is_shown_as_its_turns(client, user, run_with_generations):
    client.force_login(user)
    page = client.get(f"/runs/{run_with_generations.pk}/evaluation/").content.decode()
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert '<span class="chat-role">user</span><pre>What is 4*4?</pre>' in page and "&lt;|im_start|&gt;" not in page


def test_another_step_is_chosen_by_its_number(client, user, run_with_generations):
    client.force_login(user)
    page = client.get(f"/runs/{run_with_generations.pk}/evaluation/", {"step": "10"}).content.decode()
    assert '<strong id="current-step">10</strong>' in page and "What is 2+3?" in page
    assert client.get(f"/runs/{run_with_generations.pk}/evaluation/", {"step": "11"}).status_code == 404


def test_a_run_without_generations_says_how_verl_sends_them(client, user, mlflow):
    client.force_login(user)
    run = Run.objects.get(mlflow_run_id=mlflow.new_run())
    page = client.get(f"/runs/{run.pk}/evaluation/").content.decode()
    assert 'id="no-generations"' in page and "trainer.log_val_generations" in page


def test_another_teams_run_is_not_found(client, run_with_generations, django_user_model):
    make_team("other", bob="member")
    client.force_login(django_user_model.objects.get(username="bob"))
    assert client.get(f"/runs/{run_with_generations.pk}/evaluation/").status_code == 404


def test_the_run_page_of_a_run_trained_elsewhere_links_to_it(client, user, run_with_generations):
    client.force_login(user)
    page = client.get(f"/runs/{run_with_generations.pk}/").content.decode()
    assert f'href="/runs/{run_with_generations.pk}/evaluation/"' in page
