"""POST /api/runs/{id}/rollouts (DESIGN §4.8): JSON lines, all kept or none, each (step, prompt, index) once,
a clear error naming the line and the field; only a run trained elsewhere takes them."""
import json

import pytest

from tests.factories import make_prompt_set, make_team
from webapp.external.models import ExternalRun, PendingRollout
from webapp.external.rollouts import prompt_key
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(mlflow):
    return Run.objects.get(mlflow_run_id=mlflow.new_run())


def lines(*rollouts) -> str:
    return "".join(json.dumps(r) + "\n" for r in rollouts)


def post(client, run, body):
    return client.post(f"/api/runs/{run.pk}/rollouts", body, content_type="application/x-ndjson")


def group_of(step=1, prompt="What is 2 + 2?", size=4, **extra):
    return [{"step": step, "prompt": prompt, "completion": f"so \\boxed{{{4 if i else 5}}}", "index": i,
             "reward": float(bool(i)), **extra} for i in range(size)]


def test_it_keeps_the_rollouts_and_asks_a_worker_to_group_them(api_client, run, no_enqueue, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post(api_client, run, lines(*group_of(), *group_of(step=2)))
    assert response.status_code == 200
    assert response.json() == {"run": run.pk, "received": 8, "stored": 8, "duplicates": 0}
    stored = PendingRollout.objects.get(run=run, step=1, index=0)
    assert stored.prompt_id == prompt_key("What is 2 + 2?") and stored.completion == "so \\boxed{5}" and stored.reward == 0.0
    assert [name for name, _, _ in no_enqueue] == ["workers.tasks.group_external_rollouts"]
    assert ExternalRun.objects.get(run=run).max_rollout_step == 2


def test_a_batch_sent_again_is_stored_once(api_client, run, no_enqueue):
    body = lines(*group_of())
    post(api_client, run, body)
    again = post(api_client, run, body)
    assert again.json() == {"run": run.pk, "received": 4, "stored": 0, "duplicates": 4}
    assert PendingRollout.objects.filter(run=run).count() == 4


def test_lines_without_an_index_are_numbered_in_their_prompts_order(api_client, run, no_enqueue):
    rows = [{"step": 3, "prompt": "p", "completion": c} for c in ("a", "b", "c")]
    post(api_client, run, lines(*rows, {"step": 3, "prompt": "q", "completion": "d"}))
    assert list(PendingRollout.objects.filter(run=run, prompt_id=prompt_key("p")).order_by("index")
                .values_list("index", "completion")) == [(0, "a"), (1, "b"), (2, "c")]


def test_the_rewards_of_each_function_make_the_total_when_none_is_given(api_client, run, no_enqueue):
    post(api_client, run, lines({"step": 1, "prompt": "p", "completion": "x", "index": 0,
                                 "rewards": {"accuracy": 1.0, "format": 0.5}, "advantage": 0.7, "label": 42,
                                 "length": 12, "extras": {"acc": True}}))
    stored = PendingRollout.objects.get(run=run)
    assert stored.reward == 1.5 and stored.rewards == {"accuracy": 1.0, "format": 0.5} and stored.advantage == 0.7
    assert stored.label == "42" and stored.length == 12 and stored.extras == {"acc": True}


@pytest.mark.parametrize("line, field, words", [
    ("not json at all", None, "not a JSON object"),
    ("[1, 2]", None, "JSON object"),
    ('{"step": 1, "prompt": "p"}', "completion", "'completion' is required"),
    ('{"prompt": "p", "completion": "c"}', "step", "'step' is required"),
    ('{"step": -1, "prompt": "p", "completion": "c"}', "step", "whole number"),
    ('{"step": 1.5, "prompt": "p", "completion": "c"}', "step", "whole number"),
    ('{"step": "1", "prompt": "p", "completion": "c"}', "step", "whole number"),
    ('{"step": 1, "completion": "c"}', "prompt", "'prompt' is required"),
    ('{"step": 1, "prompt": "p", "completion": 7}', "completion", "must be text"),
    ('{"step": 1, "prompt": "p", "completion": "c", "reward": "high"}', "reward", "must be a number"),
    ('{"step": 1, "prompt": "p", "completion": "c", "reward": NaN}', "reward", "'reward' must be a number, not NaN"),
    ('{"step": 1, "prompt": "p", "completion": "c", "extras": {"kl": [Infinity]}}', "extras",
     "'extras.kl[0]' is not a finite number (Infinity): send null"),
    ('{"step": 1, "prompt": "p", "completion": "c", "rewards": {"acc": "yes"}}', "rewards", "rewards.acc"),
    ('{"step": 1, "prompt": "p", "completion": "c", "rewards": [1]}', "rewards", "'rewards' must be an object"),
    ('{"step": 1, "prompt": "p", "completion": "c", "extras": 3}', "extras", "'extras' must be an object"),
    ('{"step": 1, "prompt": "p", "completion": "c", "completions": "x"}', "completions", "unknown field"),
    ('{"step": 1, "prompt": "p", "completion": "c", "index": -2}', "index", "whole number"),
    ('{"step": 1, "prompt_id": "\\u0007", "completion": "c"}', "prompt_id", "printable"),
])
def test_a_bad_line_is_refused_naming_it_and_nothing_of_the_request_is_kept(api_client, run, line, field, words, no_enqueue):
    good = json.dumps({"step": 1, "prompt": "p", "completion": "fine"})
    response = post(api_client, run, good + "\n" + line + "\n")
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["line"] == 2 and body["error"].startswith("line 2: ") and words in body["error"], body
    assert body.get("field") == field
    assert not PendingRollout.objects.filter(run=run).exists() and not no_enqueue


def test_an_empty_body_and_a_body_that_is_not_utf8_are_refused(api_client, run):
    assert "no rollouts" in post(api_client, run, "").json()["error"]
    assert "UTF-8" in post(api_client, run, b'{"step": 1}\n\xff\xfe').json()["error"]


def test_model_output_with_nul_and_lone_surrogates_is_kept_readable(api_client, run, no_enqueue):
    post(api_client, run, '{"step": 1, "prompt": "p", "completion": "a\\u0000b\\ud800c"}\n')
    assert PendingRollout.objects.get(run=run).completion == "a\ufffdb\ufffdc"


def test_a_run_trained_by_evolab_takes_no_reported_rollouts(api_client, user):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)
    response = post(api_client, run, lines(*group_of()))
    assert response.status_code == 409 and "trained by Evolab" in response.json()["error"]


def test_another_teams_run_is_not_found_and_a_viewer_may_not_report(client, api_client, run, django_user_model):
    from webapp.accounts.models import ApiToken, Membership

    make_team("other", bob="admin")
    bob = django_user_model.objects.get(username="bob")
    outsider = {"HTTP_AUTHORIZATION": f"Token {ApiToken.issue(bob)}"}
    assert client.post(f"/api/runs/{run.pk}/rollouts", lines(*group_of()), content_type="application/x-ndjson",
                       **outsider).status_code == 404
    Membership.objects.create(team_id=run.team_id, user=bob, role="viewer")
    response = client.post(f"/api/runs/{run.pk}/rollouts", lines(*group_of()), content_type="application/x-ndjson",
                           **outsider)
    assert response.status_code == 403 and not PendingRollout.objects.exists()
