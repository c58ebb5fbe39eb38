"""A run trained elsewhere's reported rollouts become groups on a worker (webapp/external/grouping.py): a step
once it is complete, answers read with the run's answer rule, majority, distinct answers and label accuracy
for the step, its prompts gathered into a prompt set of the run, each rollout grouped exactly once."""
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.external.conftest import charted
from webapp.external.grouping import group_ready_steps, resend_stale, step_time
from webapp.external.models import ExternalRun, PendingRollout
from webapp.external.rollouts import parse_lines, prompt_key, receive
from webapp.runs.models import Group, Rollout, Run
from tests.factories import charts_of

pytestmark = pytest.mark.django_db

LATER = timedelta(seconds=60)


@pytest.fixture
def run(mlflow, no_enqueue):
    return Run.objects.get(mlflow_run_id=mlflow.new_run())


def report(run, rollouts):
    import json

    return receive(run, parse_lines("".join(json.dumps(r) + "\n" for r in rollouts).encode()))


def step_of(step, answers, prompt="What is 2 + 2?", label=None, rewards=None):
    return [{"step": step, "prompt": prompt, "completion": f"I think \\boxed{{{a}}}" if a is not None else "no idea",
             "index": i, "reward": (rewards or [0.0] * len(answers))[i], **({"label": label} if label else {})}
            for i, a in enumerate(answers)]


def test_a_step_is_grouped_once_a_later_step_has_arrived(run, no_enqueue, django_capture_on_commit_callbacks):
    report(run, step_of(1, ["4", "4", "5", None]) + step_of(2, ["4", "4", "4", "4"]))
    with django_capture_on_commit_callbacks(execute=True):
        done = group_ready_steps(run.pk)
    assert done == {"steps": [1], "rollouts": 4, "waiting": 1}
    group = Group.objects.get(run=run, step=1)
    assert group.prompt_id == prompt_key("What is 2 + 2?") and group.majority_answer == "4" and group.size == 4
    rollouts = list(Rollout.objects.filter(group=group).order_by("index").values_list("answer", "valid", "in_majority"))
    assert rollouts == [("4", True, True), ("4", True, True), ("5", True, False), (None, False, False)]
    series = charts_of(Run.objects.get(pk=run.pk))
    assert series["majority_ratio"]["values"] == [0.5] and series["unique_answers"]["values"] == [2.0]
    assert series["invalid_ratio"]["values"] == [0.25]
    assert list(PendingRollout.objects.filter(run=run).values_list("step", flat=True).distinct()) == [2]
    # step 2 may still be filling: the task comes back after the quiet time
    assert ("workers.tasks.group_external_rollouts", [run.pk], 5.0) in no_enqueue


def test_the_last_step_is_grouped_after_a_quiet_time(run):
    report(run, step_of(1, ["4", "4"]))
    assert group_ready_steps(run.pk)["steps"] == []
    assert group_ready_steps(run.pk, now=timezone.now() + LATER)["steps"] == [1]
    assert ExternalRun.objects.get(run=run).grouping_requested_at is None


def test_the_steps_of_an_ended_run_are_grouped_at_once(run, mlflow):
    report(run, step_of(1, ["4", "4"]))
    mlflow.ok("runs/update", {"run_id": run.mlflow_run_id, "status": "FINISHED"})
    assert group_ready_steps(run.pk)["steps"] == [1]


def test_answers_are_read_with_the_runs_answer_rule(run, mlflow):
    mlflow.ok("runs/set-tag", {"run_id": run.mlflow_run_id, "key": "evolab.answer_rule", "value": "gsm8k"})
    report(run, [{"step": 1, "prompt": "q", "completion": "3 + 4 = 7\n#### 7", "index": 0},
                 {"step": 1, "prompt": "q", "completion": "so \\boxed{7}", "index": 1},
                 {"step": 1, "prompt": "q", "completion": "#### 1,000", "index": 2, "answer": "7"}])
    group_ready_steps(run.pk, now=timezone.now() + LATER)
    answers = list(Rollout.objects.filter(run=run).order_by("index").values_list("answer", flat=True))
    assert answers == ["7", None, "7"]  # an answer the trainer gives is kept as given


def test_held_out_labels_give_label_accuracy_and_never_change_a_reward(run):
    report(run, step_of(1, ["4", "4", "5"], label="4", rewards=[0.25, 0.5, 1.0])
           + step_of(1, ["9", "9", "8"], prompt="What is 2 + 3?", label="5", rewards=[0.25, 0.5, 1.0]))
    group_ready_steps(run.pk, now=timezone.now() + LATER)
    series = charts_of(Run.objects.get(pk=run.pk))
    assert series["label_accuracy"]["values"] == [0.5] and series["pass@1"]["values"] == [pytest.approx(1 / 3)]
    assert sorted(Rollout.objects.filter(run=run).values_list("reward", flat=True)) == [0.25, 0.25, 0.5, 0.5, 1.0, 1.0]


def test_the_runs_prompts_become_a_prompt_set_of_its_own(run, api_client):
    report(run, step_of(1, ["4"], label="4") + step_of(2, ["4"], label="4") + step_of(2, ["6"], prompt="3 + 3?"))
    group_ready_steps(run.pk, now=timezone.now() + LATER)
    run.refresh_from_db()
    prompt_set = run.prompt_set
    assert prompt_set.team_id == run.team_id and prompt_set.row_count == 2 and prompt_set.has_labels
    assert sorted(prompt_set.prompts.values_list("text", "label")) == [("3 + 3?", None), ("What is 2 + 2?", "4")]
    history = api_client.get(f"/api/runs/{run.pk}/prompts/{prompt_key('What is 2 + 2?')}/history").json()
    assert history["prompt"] == "What is 2 + 2?" and [r["majority_correct"] for r in history["history"]] == [True, True]


def test_rollouts_arriving_for_a_grouped_step_join_its_group(run):
    report(run, step_of(1, ["4", "4"]) + step_of(2, ["1"]))
    group_ready_steps(run.pk)
    report(run, [{"step": 1, "prompt": "What is 2 + 2?", "completion": "\\boxed{5}", "index": 2},
                 {"step": 1, "prompt": "What is 2 + 2?", "completion": "\\boxed{5}", "index": 3},
                 {"step": 1, "prompt": "What is 2 + 2?", "completion": "\\boxed{5}", "index": 4}])
    group_ready_steps(run.pk)
    current = Group.objects.get(run=run, step=1, superseded=False)
    assert current.size == 5 and current.majority_answer == "5"
    assert Group.objects.filter(run=run, step=1, superseded=True).count() == 1
    assert list(Rollout.objects.filter(group=current).order_by("index").values_list("index", flat=True)) == [0, 1, 2, 3, 4]


def test_grouping_again_groups_nothing_twice(run):
    report(run, step_of(1, ["4", "4"]) + step_of(2, ["1"]))
    group_ready_steps(run.pk)
    assert group_ready_steps(run.pk)["steps"] == []
    report(run, step_of(1, ["4", "4"]))  # the same rollouts sent again once grouped
    assert group_ready_steps(run.pk)["steps"] == [] and Group.objects.filter(run=run).count() == 1


def test_rollouts_nobody_is_grouping_are_sent_to_a_worker_again(run, no_enqueue):
    report(run, step_of(1, ["4"]))
    no_enqueue.clear()
    assert resend_stale() == []  # just reported: its task is on its way
    PendingRollout.objects.filter(run=run).update(received_at=timezone.now() - timedelta(minutes=5))
    assert resend_stale() == [run.pk]
    assert no_enqueue == [("workers.tasks.group_external_rollouts", [run.pk], None)]


def test_a_step_the_reporter_says_is_complete_is_grouped_at_once(run, api_client):
    import json

    body = "".join(json.dumps(r) + "\n" for r in step_of(1, ["4", "4"]))
    api_client.post(f"/api/runs/{run.pk}/rollouts", body, content_type="application/x-ndjson")
    assert group_ready_steps(run.pk)["steps"] == []  # the last step may still be filling
    # nothing more to send, only the word that step 1 is whole: an empty body is enough
    response = api_client.post(f"/api/runs/{run.pk}/rollouts?complete_through=1", "", content_type="application/x-ndjson")
    assert response.json() == {"run": run.pk, "received": 0, "stored": 0, "duplicates": 0}
    assert group_ready_steps(run.pk)["steps"] == [1]
    bad = api_client.post(f"/api/runs/{run.pk}/rollouts?complete_through=soon", "", content_type="application/x-ndjson")
    assert bad.status_code == 400 and bad.json()["field"] == "complete_through"


def test_figures_derived_from_the_rollouts_never_replace_the_trainers_own(run, mlflow):
    # TRL reports its clip ratio and its share of zero-variance groups; the rollouts are grouped after
    mlflow.ok("runs/log-batch", {"run_id": run.mlflow_run_id, "params": [{"key": "max_completion_length", "value": "8"}],
                                 "metrics": [{"key": "completions/clipped_ratio", "value": 0.125, "step": 1, "timestamp": 1_795_000_000_000},
                                             {"key": "frac_reward_zero_std", "value": 0.5, "step": 1, "timestamp": 1_795_000_000_000}]})
    charted(run.mlflow_run_id)
    # completions longer than 8 characters: lengths not given by the trainer are characters, not the limit's tokens
    report(run, step_of(1, ["4", "4"], rewards=[1.0, 1.0]))
    group_ready_steps(run.pk, now=timezone.now() + LATER)
    series = charts_of(Run.objects.get(pk=run.pk))
    assert series["truncated_ratio"]["values"] == [0.125] and series["zero_variance_groups"]["values"] == [0.5]
    assert series["invalid_ratio"]["values"] == [0.0]


def test_a_step_already_folded_into_a_chunk_keeps_the_time_its_trainer_logged(run, mlflow):
    # 600 logged steps: the first 500 close into chunks (webapp/metrics/series.py), and grouping a late report of
    # step 1 read only open points, found none and gave the step "now"
    started = 1_795_000_000_000
    mlflow.ok("runs/log-batch", {"run_id": run.mlflow_run_id, "metrics": [
        {"key": "loss", "value": 1.0, "timestamp": started + step * 1000, "step": step} for step in range(600)]})
    charted(run.mlflow_run_id)
    assert step_time(Run.objects.get(pk=run.pk), 1, now=123.0) == (started + 1000) / 1000
    assert step_time(Run.objects.get(pk=run.pk), 599, now=123.0) == (started + 599_000) / 1000
    assert step_time(Run.objects.get(pk=run.pk), 700, now=123.0) == 123.0  # nothing logged there
