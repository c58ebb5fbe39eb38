"""The lease on a running run (webapp/runs/lifecycle.py): a run whose supervisor stopped heartbeating
is re-queued with resume (a bounded number of times), then failed; a cancel ends it; a supervisor that
lost its lease writes nothing more; a queued run whose task message was lost is sent again. Messages
go to the real broker (the test Redis), read back from their queue's list."""
import base64
import json
import uuid
from datetime import timedelta

import pytest
import redis
from django.conf import settings
from django.utils import timezone

from tests.factories import make_prompt_set
from webapp.runs import lifecycle
from webapp.runs.models import EngineJob, Run, RunLease

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue():
    name = f"{settings.QUEUE_PREFIX}lease-{uuid.uuid4().hex[:8]}"
    yield name
    redis.Redis.from_url(settings.REDIS_URL).delete(name)


def sent_runs(queue) -> list[int]:
    """The run ids of the train tasks waiting in `queue`, oldest first."""
    messages = redis.Redis.from_url(settings.REDIS_URL).lrange(queue, 0, -1)
    return [json.loads(base64.b64decode(json.loads(m)["body"]))[0][0] for m in reversed(messages)]


def running_run(user, queue, heartbeat_age=120, state=Run.RUNNING, job=None, **fields):
    now = timezone.now()
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=10,
                             created_by=user, queue=queue, state=state,
                             started_at=now - timedelta(seconds=heartbeat_age + 5), **fields)
    RunLease.objects.create(run=run, owner="host-a:1:abc", heartbeat_at=now - timedelta(seconds=heartbeat_age))
    if job is not None:
        EngineJob.objects.create(run=run, **job)
    return run


def holder(run) -> str:
    return RunLease.objects.filter(run=run).values_list("owner", flat=True).first() or ""


def test_a_run_whose_supervisor_went_silent_is_queued_to_resume_and_sent_again(user, queue,
                                                                               django_capture_on_commit_callbacks):
    run = running_run(user, queue)
    with django_capture_on_commit_callbacks(execute=True):
        outcome = lifecycle.reap()
    run.refresh_from_db()
    assert outcome["resumed"] == [run.pk]
    assert (run.state, run.resume_requested, run.auto_resumes, holder(run)) == (Run.QUEUED, True, 1, "")
    assert "its worker stopped answering" in run.message and "automatic resume 1 of 3" in run.message
    assert sent_runs(queue) == [run.pk]


def test_a_run_with_a_fresh_heartbeat_is_left_alone(user, queue):
    run = running_run(user, queue, heartbeat_age=settings.RUN_LEASE_SECONDS / 2)
    assert lifecycle.reap()["resumed"] == []
    run.refresh_from_db()
    assert run.state == Run.RUNNING and holder(run) == "host-a:1:abc"


def test_after_its_automatic_resumes_a_silent_run_fails_saying_why(user, queue):
    run = running_run(user, queue, auto_resumes=settings.RUN_AUTO_RESUMES)
    assert lifecycle.reap()["failed"] == [run.pk]
    run.refresh_from_db()
    assert run.state == Run.FAILED and run.finished_at is not None
    assert f"after {settings.RUN_AUTO_RESUMES} automatic resumes" in run.message


def test_a_silent_run_with_a_cancel_request_ends_cancelled(user, queue):
    run = running_run(user, queue, cancel_requested=True)
    assert lifecycle.reap()["cancelled"] == [run.pk]
    run.refresh_from_db()
    assert run.state == Run.CANCELLED and not run.cancel_requested and run.message.startswith("cancelled;")


def test_cancel_ends_a_run_whose_supervisor_is_gone_at_once(api_client, user, queue):
    run = running_run(user, queue)
    response = api_client.post(f"/api/runs/{run.pk}/cancel")
    assert response.status_code == 200, response.content
    assert response.json()["state"] == "cancelled"


def test_a_supervisor_that_lost_its_lease_can_neither_heartbeat_nor_finish_the_run(user, queue):
    run = running_run(user, queue)
    lifecycle.reap()
    assert not lifecycle.heartbeat(run.pk, "host-a:1:abc")
    assert not lifecycle.finish(run, Run.FAILED, "stale", 1, "", owner="host-a:1:abc")
    run.refresh_from_db()
    assert run.state == Run.QUEUED

    lifecycle.claim(run.pk, "host-b:2:def")
    assert holder(run) == "host-b:2:def" and lifecycle.heartbeat(run.pk, "host-b:2:def")
    assert not lifecycle.heartbeat(run.pk, "host-a:1:abc")


def test_a_queued_run_whose_message_may_be_lost_is_sent_again(user, queue, django_capture_on_commit_callbacks):
    old = timezone.now() - timedelta(seconds=settings.RUN_REDISPATCH_SECONDS + 1)
    lost = Run.objects.create(name="lost", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2,
                              created_by=user, queue=queue, dispatched_at=old)
    recent = Run.objects.create(name="recent", method="ttrl", prompt_set=make_prompt_set(user, name="p2"),
                                max_steps=2, created_by=user, queue=queue, dispatched_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert lifecycle.reap()["redispatched"] == [lost.pk]
    assert sent_runs(queue) == [lost.pk]
    lost.refresh_from_db()
    assert lost.dispatched_at > old and Run.objects.get(pk=recent.pk).state == Run.QUEUED


def test_a_run_whose_cluster_job_trains_on_is_queued_for_the_next_worker_to_re_attach(
        user, queue, settings, django_capture_on_commit_callbacks):
    settings.RUN_AUTO_RESUMES = 0  # re-attaching resumes nothing, so it is never refused for want of resumes
    run = running_run(user, queue, state=Run.PENDING, job={"engine": "slurm", "job_id": "4242", "attempt": 1})
    with django_capture_on_commit_callbacks(execute=True):
        outcome = lifecycle.reap()
    run.refresh_from_db()
    assert outcome["reattached"] == [run.pk] and sent_runs(queue) == [run.pk]
    assert (run.state, run.auto_resumes, run.job.job_id, run.resume_requested) == (Run.QUEUED, 0, "4242", False)
    assert run.message.endswith("the next worker watches its Slurm job 4242")


def test_a_cancel_of_a_run_whose_worker_is_gone_leaves_its_cluster_job_to_the_next_worker_to_stop(user, queue):
    from webapp.runs.actions import cancel_run

    run = running_run(user, queue, job={"engine": "ray", "job_id": "evolab-run-1-1", "attempt": 1})
    cancelled = cancel_run(run, user)
    assert (cancelled.state, cancelled.cancel_requested) == (Run.QUEUED, True)
    # claimable despite the cancel, so a worker stops the job; a run without a job is simply cancelled
    assert lifecycle.claim(run.pk, "host-b:2:def", Run.PENDING).state == Run.PENDING
    plain = Run.objects.create(name="q", method="ttrl", prompt_set=run.prompt_set, max_steps=10, created_by=user,
                               queue=queue, cancel_requested=True)
    assert lifecycle.claim(plain.pk, "host-b:2:def") is None
    plain.refresh_from_db()
    assert plain.state == Run.CANCELLED and plain.message == "cancelled before it started"
