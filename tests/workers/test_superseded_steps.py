"""After a resume the trainer runs again the steps after its checkpoint: the re-run groups and
rollouts replace the earlier attempt's in the rollouts page, the derived health counts and the
search, and the earlier ones are kept, marked superseded (superseded=true finds them)."""
import pytest

from tests.factories import event_log, make_prompt_set
from webapp.runs.models import Group, Rollout, Run
from webapp.runs.queries import groups_at
from webapp.explorer.search import search
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def resumed_run(user):
    """Steps 1-3, then a resume from the checkpoint of step 1: steps 2-4 again (later seqs)."""
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=4, created_by=user)
    first = [e for e in event_log(steps=3) if e["type"] != "status" or e["state"] == "running"]
    ingest_events(run, first)
    # a resumed trainer says it is running again first (rl/driver.py), then logs steps 2-4
    resumed = {"seq": first[-1]["seq"] + 1, "time": 1_700_000_100.0, "type": "status", "state": "running",
               "message": "resumed from checkpoints/checkpoint-1 at step 1"}
    again = [resumed] + event_log(steps=3, start_seq=resumed["seq"] + 1, start_step=2)
    ingest_events(run, again)
    return run


def test_the_earlier_attempts_groups_of_re_run_steps_are_marked_and_kept(resumed_run):
    marked = Group.objects.filter(run=resumed_run, superseded=True)
    assert sorted(marked.values_list("step", flat=True)) == [2, 2, 3, 3]
    assert Group.objects.filter(run=resumed_run, superseded=False).count() == 8  # steps 1-4, two prompts
    assert not Rollout.objects.filter(group__superseded=False, superseded=True).exists()
    assert Rollout.objects.filter(superseded=True).count() == 4 * 4


def test_the_rollouts_page_shows_a_re_run_step_once(resumed_run):
    step, groups = groups_at(resumed_run, 2)
    assert step == 2 and [g.prompt_id for g in groups] == ["p1", "p2"]
    assert all(not g.superseded for g in groups)


def test_the_search_leaves_superseded_rollouts_out_unless_asked(resumed_run):
    found = search(resumed_run.pk, {"step_min": "2", "step_max": "2", "limit": "100"}).results
    assert len(found) == 2 * 4 and not any(r["superseded"] for r in found)
    earlier = search(resumed_run.pk, {"superseded": "true", "limit": "100"}).results
    assert sorted({r["step"] for r in earlier}) == [2, 3] and all(r["superseded"] for r in earlier)


def test_a_run_that_never_resumed_has_nothing_superseded(user):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=3, created_by=user)
    log = event_log(steps=3)
    ingest_events(run, log[:len(log) // 2])
    ingest_events(run, log[len(log) // 2:])
    assert not Group.objects.filter(superseded=True).exists() and not Rollout.objects.filter(superseded=True).exists()


def test_a_step_whose_groups_arrive_in_two_polls_has_nothing_superseded(user):
    # the supervisor reads complete lines: a poll can fall between two groups of one step
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=3, created_by=user)
    log = event_log(steps=3)
    split = next(i for i, e in enumerate(log) if e["type"] == "group" and e["step"] == 2 and e["prompt_id"] == "p2")
    ingest_events(run, log[:split])
    ingest_events(run, log[split:])
    assert not Group.objects.filter(superseded=True).exists() and not Rollout.objects.filter(superseded=True).exists()
    assert [g.prompt_id for g in groups_at(run, 2)[1]] == ["p1", "p2"]


def test_a_step_cut_short_by_a_crash_is_superseded_by_its_re_run(user):
    # the trainer died inside step 2 (one group logged), resumed from the checkpoint of step 1
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)
    log = event_log(steps=2)
    cut = next(i for i, e in enumerate(log) if e["type"] == "group" and e["step"] == 2 and e["prompt_id"] == "p2")
    ingest_events(run, log[:cut])
    resumed = {"seq": cut, "time": 1_700_000_100.0, "type": "status", "state": "running", "message": "resumed"}
    ingest_events(run, [resumed] + event_log(steps=1, start_seq=cut + 1, start_step=2))
    assert list(Group.objects.filter(superseded=True).values_list("step", "prompt_id")) == [(2, "p1")]
    assert [g.prompt_id for g in groups_at(run, 2)[1]] == ["p1", "p2"]
