"""After a resume the trainer runs again the steps after its checkpoint: the re-run groups and
rollouts replace the earlier attempt's in the rollouts page, the derived health counts and the
search, and the earlier ones are kept, marked superseded (superseded=true finds them)."""
import pytest

from tests.factories import event_log, make_prompt_set
from webapp.runs.models import Group, Rollout, Run
from webapp.runs.queries import groups_at
from webapp.runs.search import search
from workers.ingest import ingest_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def resumed_run(user):
    """Steps 1-3, then a resume from the checkpoint of step 1: steps 2-4 again (later seqs)."""
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=4, created_by=user)
    first = [e for e in event_log(steps=3) if e["type"] != "status" or e["state"] == "running"]
    ingest_events(run, first)
    again = event_log(steps=3, start_seq=first[-1]["seq"] + 1, start_step=2)
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
