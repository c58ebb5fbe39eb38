"""Where a queued run waits (webapp/runs/queue_place.py): its place in its worker queue, the runs in front, and about
how long until a worker takes it."""
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import make_prompt_set, make_team
from webapp.runs import queue_place
from webapp.runs.models import Run, RunTransition
from webapp.runs.queue_place import about, ordinal, place_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(django_user_model):
    team = make_team("lab", ada="admin")
    ada = django_user_model.objects.get(username="ada")
    return {"team": team, "ada": ada, "prompt_set": make_prompt_set(ada, team=team)}


@pytest.fixture
def slots(monkeypatch):
    """The workers' slots per queue, as health.queue_slots would find them."""
    found = {"cpu": 1}
    monkeypatch.setattr(queue_place, "queue_slots", lambda: found)
    return found


def run_on(lab, name, state=Run.QUEUED, steps=20, waited_minutes=0, team=None, method="ttrl"):
    user = lab["ada"] if team is None else team.memberships.first().user
    run = Run.objects.create(name=name, method=method, prompt_set=lab["prompt_set"], team=team or lab["team"],
                             max_steps=steps, created_by=user, state=state)
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now() - timedelta(minutes=60 - waited_minutes))
    return run


def trained(run, steps_done, seconds, finished=False):
    """The run has trained `steps_done` steps in `seconds` (its history: a claim that long ago, or then its end)."""
    start = timezone.now() - timedelta(seconds=seconds)
    RunTransition.objects.create(run=run, cause=RunTransition.CLAIMED, state=Run.RUNNING, at=start)
    if finished:
        RunTransition.objects.create(run=run, cause=RunTransition.FINISHED, state=Run.SUCCEEDED, at=timezone.now())
    Run.objects.filter(pk=run.pk).update(last_step=steps_done, state=Run.SUCCEEDED if finished else Run.RUNNING,
                                         finished_at=timezone.now() if finished else None)


def test_ordinals_and_waits_read_as_a_user_says_them():
    assert [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)] == [
        "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "101st", "111th"]
    assert [about(s) for s in (20, 90, 540, 3600, 3900)] == [
        "starting within a minute", "~2 min", "~9 min", "~1 h", "~1 h 5 min"]


def test_a_run_behind_a_running_one_and_a_queued_one_is_third_and_names_them(lab, slots):
    first = run_on(lab, "first", waited_minutes=0)
    trained(first, 10, 300)  # 30 s a step, 10 of 20 left: 300 s
    second = run_on(lab, "second", waited_minutes=1)
    third = run_on(lab, "third", waited_minutes=2)
    place = place_of(third, lab["ada"])
    assert (place.position, place.ahead, place.others) == (2, [first.pk, second.pk], 0)
    # the second has no pace of its own and the queue no finished ttrl run yet: no estimate
    assert place.eta_seconds is None
    assert place.text == f"2nd in the cpu queue, behind runs {first.pk}, {second.pk}"
    assert place_of(second, lab["ada"]).text == f"1st in the cpu queue, behind run {first.pk}, ~5 min"


def test_the_wait_plays_the_queue_forward_on_the_workers_slots(lab, slots):
    finished = run_on(lab, "earlier")
    trained(finished, 20, 300, finished=True)  # the queue's recent ttrl pace: 15 s a step
    first = run_on(lab, "first", waited_minutes=1)
    trained(first, 10, 300)  # 300 s left
    second = run_on(lab, "second", waited_minutes=2)  # 20 steps at 15 s: 300 s once it starts
    third = run_on(lab, "third", waited_minutes=3)
    assert place_of(third, lab["ada"]).eta_seconds == pytest.approx(600, abs=5)  # one slot: first, then second
    slots["cpu"] = 2
    assert place_of(third, lab["ada"]).eta_seconds == pytest.approx(300, abs=5)  # second took the free slot at once
    assert place_of(second, lab["ada"]).text == f"1st in the cpu queue, behind run {first.pk}, starting within a minute"


def test_a_run_of_another_team_in_front_is_counted_never_named(lab, slots):
    other_team = make_team("rivals", eve="admin")
    theirs = run_on(lab, "theirs", team=other_team, waited_minutes=0)
    mine = run_on(lab, "mine", waited_minutes=1)
    place = place_of(mine, lab["ada"])
    assert place.ahead == [] and place.others == 1
    assert place.text == "2nd in the cpu queue, behind 1 run of other teams"
    # never named: no id of theirs in the place (a whole-text search for the id failed where ids start at 1)
    assert place.to_json()["ahead"] == [] and f"run {theirs.pk}" not in place.text


def test_without_the_workers_slots_the_place_is_said_without_a_wait(lab, monkeypatch):
    monkeypatch.setattr(queue_place, "queue_slots", lambda: None)  # the broker could not be asked
    first = run_on(lab, "first")
    trained(first, 10, 300)
    queued = run_on(lab, "queued", waited_minutes=1)
    assert place_of(queued, lab["ada"]).text == f"1st in the cpu queue, behind run {first.pk}"


def test_only_a_run_waiting_for_a_worker_has_a_place(lab, slots):
    running = run_on(lab, "running")
    trained(running, 1, 10)
    running.refresh_from_db()
    assert place_of(running, lab["ada"]) is None
