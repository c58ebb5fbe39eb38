import json

import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run
from workers.ingest import ingest_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def rzero_run(user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = Run.objects.create(name="rz", method="r_zero", prompt_set=make_prompt_set(user), max_steps=1, created_by=user)
    folder = run.run_dir / "rzero" / "iteration-1"
    folder.mkdir(parents=True)
    pool = [
        {"id": "q1", "question": "Sam has <b>3</b> pens and buys 4 more?", "p_hat": 0.5, "pseudo_label": "7", "answers": ["7"] * 5 + ["6"] * 5, "kept": True},
        {"id": "q2", "question": "What is 1 + 1?", "p_hat": 1.0, "pseudo_label": "2", "answers": ["2"] * 10, "kept": False},
    ]
    (folder / "pool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pool))
    return run


def test_the_question_page_lists_the_pool_with_kept_flags_escaped(client, user, rzero_run):
    client.force_login(user)
    page = client.get(f"/runs/{rzero_run.pk}/questions/").content.decode()
    assert "1 of 2 questions kept" in page
    assert "&lt;b&gt;3&lt;/b&gt;" in page and "<b>3</b>" not in page


def test_the_api_serves_an_iterations_questions(api_client, rzero_run):
    body = api_client.get(f"/api/runs/{rzero_run.pk}/rzero/1/questions").json()
    assert [q["id"] for q in body["questions"]] == ["q1", "q2"] and body["questions"][0]["p_hat"] == 0.5
    assert api_client.get(f"/api/runs/{rzero_run.pk}/rzero/2/questions").status_code == 404


def test_the_run_page_shows_stages_and_links_the_question_sets(client, user, rzero_run):
    ingest_events(rzero_run, [
        {"seq": 0, "time": 1.0, "type": "stage", "iteration": 1, "phase": "challenger", "state": "started"},
        {"seq": 1, "time": 2.0, "type": "stage", "iteration": 1, "phase": "challenger", "state": "finished"},
    ])
    client.force_login(user)
    page = client.get(f"/runs/{rzero_run.pk}/").content.decode()
    assert '"phase": "challenger"' in page and "?iteration=1" in page


def test_an_r_zero_run_counts_its_steps_from_iterations_and_phases(user):
    run = Run(method="r_zero", max_steps=2, hyperparameters={"iterations": 3, "challenger_steps": 5, "solver_steps": 15})
    assert run.total_steps == 60
    assert Run(method="ttrl", max_steps=2, hyperparameters={}).total_steps == 2
