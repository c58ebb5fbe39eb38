"""R-Zero's pages and API read the question sets the trainer's `questions` events put in the database;
the web process never reads a worker's disk (DESIGN §3)."""
import json

import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db

POOL = [
    {"id": "q1", "question": "Sam has <b>3</b> pens and buys 4 more?", "text": "<question>Sam has <b>3</b> pens "
     "and buys 4 more?</question>", "p_hat": 0.5, "pseudo_label": "7", "answers": ["7"] * 5 + ["6"] * 5, "kept": True},
    {"id": "q2", "question": "What is 1 + 1?", "text": "<question>What is 1 + 1?</question>", "p_hat": 1.0,
     "pseudo_label": "2", "answers": ["2"] * 10, "kept": False},
    {"id": "q3", "question": None, "text": "no tags", "p_hat": None, "pseudo_label": None, "answers": [], "kept": False},
]


def questions_event(seq, iteration=1, rows=POOL, offset=0, total=None):
    return {"seq": seq, "time": 1.0 + seq, "type": "questions", "iteration": iteration, "offset": offset,
            "total": len(rows) if total is None else total, "questions": rows}


@pytest.fixture
def rzero_run(user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = Run.objects.create(name="rz", method="r_zero", prompt_set=make_prompt_set(user), max_steps=1, created_by=user)
    ingest_events(run, [questions_event(0)])
    return run


def test_the_question_page_lists_the_pool_with_kept_flags_escaped(client, user, rzero_run):
    client.force_login(user)
    page = client.get(f"/runs/{rzero_run.pk}/questions/").content.decode()
    assert "1 of 3 questions kept" in page
    assert "kept when 3 to 7 of the solver's 10 answers agree" in page  # the paper's band: the run's defaults


def test_the_question_page_states_the_runs_own_filter_band(client, user, rzero_run):
    rzero_run.hyperparameters = {"keep_low": 1, "keep_high": 3, "solver_samples": 4}
    rzero_run.save()
    client.force_login(user)
    page = client.get(f"/runs/{rzero_run.pk}/questions/").content.decode()
    assert "kept when 1 to 3 of the solver's 4 answers agree" in page and "3..7" not in page
    assert "&lt;b&gt;3&lt;/b&gt;" in page and "<b>3</b>" not in page
    assert "format check failed:</em> no tags" in page  # an output without <question> tags shows what it wrote


def test_the_api_serves_an_iterations_questions(api_client, rzero_run):
    body = api_client.get(f"/api/runs/{rzero_run.pk}/rzero/1/questions").json()
    assert [q["id"] for q in body["questions"]] == ["q1", "q2", "q3"] and body["questions"][0]["p_hat"] == 0.5
    assert body["questions"] == POOL
    assert api_client.get(f"/api/runs/{rzero_run.pk}/rzero/2/questions").status_code == 404


def test_a_question_set_on_the_workers_disk_is_not_what_the_web_shows(client, api_client, user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    run = Run.objects.create(name="rz", method="r_zero", prompt_set=make_prompt_set(user), max_steps=1, created_by=user)
    folder = run.run_dir / "rzero" / "iteration-1"
    folder.mkdir(parents=True)
    (folder / "pool.jsonl").write_text("".join(json.dumps(r) + "\n" for r in POOL))  # a file no event announced
    assert api_client.get(f"/api/runs/{run.pk}/rzero/1/questions").status_code == 404
    client.force_login(user)
    assert "No question set yet" in client.get(f"/runs/{run.pk}/questions/").content.decode()
    assert "?iteration=1" not in client.get(f"/runs/{run.pk}/").content.decode()


def test_the_run_page_shows_stages_and_links_the_question_sets(client, user, rzero_run):
    ingest_events(rzero_run, [
        {"seq": 1, "time": 1.0, "type": "stage", "iteration": 1, "phase": "challenger", "state": "started"},
        {"seq": 2, "time": 2.0, "type": "stage", "iteration": 1, "phase": "challenger", "state": "finished"},
    ])
    client.force_login(user)
    page = client.get(f"/runs/{rzero_run.pk}/").content.decode()
    assert '"phase": "challenger"' in page and "?iteration=1" in page


def test_the_question_page_picks_the_latest_iteration_and_offers_the_others(client, user, rzero_run):
    ingest_events(rzero_run, [questions_event(1, iteration=2, rows=POOL[1:])])
    client.force_login(user)
    page = client.get(f"/runs/{rzero_run.pk}/questions/").content.decode()
    assert "iteration 2" in page and "0 of 2 questions kept" in page
    assert "1 of 3 questions kept" in client.get(f"/runs/{rzero_run.pk}/questions/?iteration=1").content.decode()


def test_an_r_zero_run_counts_its_steps_from_iterations_and_phases(user):
    run = Run(method="r_zero", max_steps=2, hyperparameters={"iterations": 3, "challenger_steps": 5, "solver_steps": 15})
    assert run.total_steps == 60
    assert Run(method="ttrl", max_steps=2, hyperparameters={}).total_steps == 2
