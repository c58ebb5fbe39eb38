"""The signals that see a collapse coming, derived at ingestion from each step's groups for every method
(rl.metrics.majority_changes, issue 36): how many revisited prompts changed their majority answer, and, where the
prompt set holds labels, how many went from a right majority to a wrong one (correct-answer extinction)."""
import pytest

from rl.metrics import majority_changes, step_health
from tests.factories import make_prompt_set, make_team
from webapp.metrics.models import MetricPoint
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run


def group(prompt_id, majority):
    return {"prompt_id": prompt_id, "majority_answer": majority}


def test_the_flip_rate_counts_revisited_prompts_whose_majority_changed_by_equivalence():
    previous = {"a": "5", "b": "3", "c": "0.5"}
    step = [group("a", "5"), group("b", "4"), group("c", "\\frac{1}{2}"), group("new", "9")]
    assert majority_changes(step, previous) == {"majority_flip_rate": 1 / 3}  # b flipped; c is the same number


def test_correct_to_wrong_counts_right_majorities_that_went_wrong_among_the_labelled():
    previous = {"a": "5", "b": "2", "c": "7", "d": "1"}
    labels = {"a": "5", "b": "3", "c": "7"}  # d has no label
    step = [group("a", "6"), group("b", "3"), group("c", "7"), group("d", "2")]
    changes = majority_changes(step, previous, labels)
    assert changes["correct_to_wrong"] == pytest.approx(1 / 3)  # a: right to wrong; b: wrong to right; c: stays
    assert changes["majority_flip_rate"] == pytest.approx(3 / 4)


def test_a_step_of_new_prompts_has_no_change_to_report():
    assert majority_changes([group("a", "1")], {}) == {}


def test_the_step_health_figures_of_worked_rollouts():
    # (group, valid, length, reward, trained): group 0 all rewarded alike, group 1 not
    rollouts = [(0, True, 10, 1.0, True), (0, True, 64, 1.0, True), (1, False, 64, 0.0, True), (1, True, 5, 1.0, True),
                (1, True, 5, 0.0, False)]
    assert step_health(rollouts, 64) == {"invalid_ratio": 0.2, "truncated_ratio": 0.4, "zero_variance_groups": 0.5}
    assert "truncated_ratio" not in step_health(rollouts, None)


@pytest.mark.django_db
def test_ingestion_stores_them_per_step_from_the_prompts_last_majority(django_user_model, monkeypatch,
                                                                      django_capture_on_commit_callbacks):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)
    make_team("lab", ada="admin")
    user = django_user_model.objects.get(username="ada")
    prompt_set = make_prompt_set(user, rows=[("p1", "2 + 3?", "5"), ("p2", "7 - 4?", "3"), ("p3", "1 + 1?", "2")])
    run = Run.objects.create(name="r", method="ttrl", prompt_set=prompt_set, max_steps=5, created_by=user)
    majorities = {1: {"p1": "5", "p2": "3"}, 2: {"p1": "6", "p3": "2"}, 3: {"p1": "6", "p2": "4", "p3": "2"}}
    events = []
    for step, chosen in majorities.items():
        for prompt_id, answer in chosen.items():
            events.append({"seq": len(events), "time": 1.8e9 + step, "type": "group", "step": step,
                           "prompt_id": prompt_id, "majority_answer": answer, "similarity": None,
                           "rollouts": [{"index": 0, "text": "", "answer": answer, "valid": True, "reward": 1.0,
                                         "used_for_training": True}]})
        events.append({"seq": len(events), "time": 1.8e9 + step, "type": "metrics", "step": step,
                       "values": {"entropy": 0.5}})
    with django_capture_on_commit_callbacks(execute=True):
        ingest_events(run, events[:3])  # step 1
        ingest_events(run, events[3:])  # steps 2 and 3 in one batch: step 3 reads step 2's majorities
    stored = {(name, step): value for name, step, value in MetricPoint.objects.filter(
        series__run=run, series__name__in=("majority_flip_rate", "correct_to_wrong")).values_list(
        "series__name", "step", "value")}
    assert stored == {("majority_flip_rate", 2): 1.0, ("correct_to_wrong", 2): 1.0,   # p1: 5 (right) -> 6
                      ("majority_flip_rate", 3): 1 / 3, ("correct_to_wrong", 3): 1 / 3}  # p2: 3 -> 4; p1, p3 kept
