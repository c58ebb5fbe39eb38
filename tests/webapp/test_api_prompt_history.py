"""GET /api/runs/{id}/prompts/{prompt_id}/history (DESIGN §4.6): one prompt over the run, per step."""
import pytest

from tests.factories import event_log, make_prompt_set
from webapp.runs.models import Group, Run
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


def group_event(seq, step, prompt_id, answers, majority, rewards, similarity=None):
    rollouts = [{"index": i, "text": f"... \\boxed{{{a}}}", "answer": a, "valid": a is not None,
                 "in_majority": a == majority, "reward": r, "advantage": 0.0, "length": 10, "used_for_training": True,
                 "entropy": None, "extra": {}} for i, (a, r) in enumerate(zip(answers, rewards))]
    return {"seq": seq, "time": 1.7e9 + seq, "type": "group", "step": step, "prompt_id": prompt_id,
            "majority_answer": majority, "similarity": similarity, "rollouts": rollouts}


@pytest.fixture
def run(user):
    prompt_set = make_prompt_set(user, rows=[("p1", "What is 2 + 3?", "5"), ("p/2", "What is 7 - 4?", "3")])
    return Run.objects.create(name="r", method="ttrl", prompt_set=prompt_set, max_steps=10, created_by=user)


def history(client, run, prompt_id):
    return client.get(f"/api/runs/{run.pk}/prompts/{prompt_id}/history")


def test_each_step_of_a_prompt_is_summarised_from_its_rollouts(api_client, run):
    ingest_events(run, [
        group_event(0, 1, "p1", ["5", "4", None, "5"], "5", [1.0, 0.0, 0.0, 1.0], [[1, .2, 0, 0], [.2, 1, 0, 0], [0, 0, 1, .4], [0, 0, .4, 1]]),
        group_event(1, 1, "p/2", ["3", "3", "3", "3"], "3", [1.0] * 4),
        group_event(2, 2, "p1", ["4", "4", "4", "5"], "4", [1.0, 1.0, 1.0, 0.0]),
    ])
    body = history(api_client, run, "p1").json()
    assert body["run"] == run.pk and body["prompt_id"] == "p1" and body["prompt"] == "What is 2 + 3?"
    assert body["has_label"] is True
    first, second = body["history"]
    assert first == {"step": 1, "majority_answer": "5", "size": 4, "majority_ratio": 0.5, "unique_answers": 2,
                     "similarity_mean": pytest.approx(2 * (0.2 + 0.4) / 12), "reward_mean": 0.5, "majority_correct": True}
    assert second["step"] == 2 and second["majority_answer"] == "4" and second["majority_ratio"] == 0.75
    assert second["similarity_mean"] is None and second["majority_correct"] is False  # the label is 5
    assert history(api_client, run, "p/2").json()["history"][0]["unique_answers"] == 1  # a slash in the id


def test_a_step_logged_again_after_a_resume_shows_its_later_group(api_client, run):
    ingest_events(run, [group_event(0, 1, "p1", ["5", "5"], "5", [1.0, 1.0]),
                        group_event(1, 1, "p1", ["4", "5"], "4", [1.0, 0.0])])
    rows = history(api_client, run, "p1").json()["history"]
    assert [(r["step"], r["majority_answer"]) for r in rows] == [(1, "4")]


def test_without_labels_no_row_says_whether_the_majority_was_right(api_client, user):
    unlabelled = make_prompt_set(user, rows=[("p1", "What is 2 + 3?", None)], name="plain")
    run = Run.objects.create(name="r", method="ttrl", prompt_set=unlabelled, max_steps=10, created_by=user)
    ingest_events(run, [group_event(0, 1, "p1", ["5"], "5", [1.0])])
    body = history(api_client, run, "p1").json()
    assert body["has_label"] is False and "majority_correct" not in body["history"][0]


def test_a_prompt_without_rollouts_is_a_404_naming_it(api_client, run):
    ingest_events(run, event_log(steps=1))
    response = history(api_client, run, "nope")
    assert response.status_code == 404 and "'nope'" in response.json()["error"]


def test_ingestion_stores_the_summary_on_the_group(run):
    ingest_events(run, event_log(steps=1, prompts=("p1",), group_size=4))
    group = Group.objects.get(run=run, prompt_id="p1")
    # event_log: answers 6, 5, 6, 5 with the 5s in the majority, rewards 0, 1, 0, 1
    assert (group.size, group.majority_ratio, group.unique_answers, group.reward_mean) == (4, 0.5, 2, 0.5)


def test_the_history_page_carries_each_step_escaped_for_its_table_and_charts(client, user, run):
    client.force_login(user)
    ingest_events(run, [group_event(0, 3, "p1", ["<script>x</script>"], "<script>x</script>", [1.0])])
    page = client.get(f"/runs/{run.pk}/prompts/p1/")
    html = page.content.decode()
    assert page.status_code == 200 and "What is 2 + 3?" in html
    # the rows go out once, as JSON the page's script builds the table from (textContent only)
    assert '"majority_answer": "\\u003Cscript\\u003Ex\\u003C/script\\u003E"' in html and "<script>x</script>" not in html
    assert f'data-rollouts-url="/runs/{run.pk}/rollouts/" data-prompt-id="p1"' in html.replace("\n         ", " ")
    assert client.get(f"/runs/{run.pk}/prompts/nope/").status_code == 404
