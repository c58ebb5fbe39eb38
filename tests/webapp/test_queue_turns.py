"""Teams take turns in the training queue (webapp/runs/lifecycle.py::claim, docs/security.md "Fair use"): a free
worker takes the queued run of the team with the fewest runs in training on its queue, so one team's backlog cannot
keep another team's run waiting behind all of it. The task names a run; every queued run is still taken once."""
import pytest

from tests.factories import make_prompt_set, make_team
from webapp.runs import lifecycle
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

QUEUE = "turns-test-cpu"


@pytest.fixture
def teams(django_user_model):
    make_team("busy-lab", ada="member")
    make_team("small-lab", bob="member")
    users = {u.username: u for u in django_user_model.objects.all()}
    return {name: make_prompt_set(users[user], name=f"set-{name}", team=users[user].memberships.get().team)
            for name, user in (("busy", "ada"), ("small", "bob"))}


def queued(prompt_set, name, queue=QUEUE):
    run = Run.objects.create(name=name, method="ttrl", prompt_set=prompt_set, team=prompt_set.team, max_steps=1,
                             created_by=prompt_set.owner, queue=queue)
    lifecycle.dispatch(run)
    return run


def test_a_team_with_nothing_in_training_goes_before_another_teams_backlog(teams):
    busy = [queued(teams["busy"], f"busy-{i}") for i in range(3)]
    small = queued(teams["small"], "small-0")  # queued last
    taken = [lifecycle.claim(token.pk, "worker").name for token in (*busy, small)]
    # busy-0 first (nobody trains yet, oldest), then small's (busy has one in training), then busy's rest
    assert taken == ["busy-0", "small-0", "busy-1", "busy-2"]


def test_every_queued_run_is_taken_once_whichever_task_arrives_first(teams):
    runs = [queued(teams["busy"], "busy-0"), queued(teams["small"], "small-0"), queued(teams["busy"], "busy-1"),
            queued(teams["small"], "small-1")]
    taken = [lifecycle.claim(token.pk, "worker") for token in reversed(runs)]
    assert sorted(run.name for run in taken) == sorted(run.name for run in runs)
    assert lifecycle.claim(runs[0].pk, "worker") is None  # a task sent twice finds nothing left
    assert Run.objects.filter(state=Run.RUNNING).count() == 4


def test_runs_of_another_queue_wait_for_their_own_workers(teams):
    gpu = queued(teams["small"], "small-gpu", queue="turns-test-gpu")
    cpu = queued(teams["busy"], "busy-cpu")
    assert lifecycle.claim(cpu.pk, "worker").name == "busy-cpu"
    assert Run.objects.get(pk=gpu.pk).state == Run.QUEUED


def test_a_team_counts_only_what_trains_on_the_same_queue(teams):
    elsewhere = queued(teams["busy"], "busy-gpu", queue="turns-test-gpu")
    lifecycle.claim(elsewhere.pk, "gpu-worker")
    first, second = queued(teams["busy"], "busy-cpu"), queued(teams["small"], "small-cpu")
    assert lifecycle.claim(second.pk, "worker").name == "busy-cpu"  # its GPU run does not cost it its turn here
    assert lifecycle.claim(first.pk, "worker").name == "small-cpu"
