"""Runs handed to a real Ray cluster (DESIGN §4.9): PyPI's ray, a head on 127.0.0.2 and a second node on 127.0.0.3,
one CPU each, started once per session (scripts/clusters.py). The worker submits each run through the Ray Jobs
REST API and only watches it: a 2-node run trains two ranks (gloo) placed on both nodes, a run Ray cannot place
waits `pending` with Ray's reason, a cancel stops the Ray job after the trainer checkpointed, and a killed worker
leaves the job training for a second worker that re-attaches to it (no second job, every event once, the steps
unbroken). Ray started naively dials cloud metadata addresses and posts usage reports: the last test checks that
every connection of the cluster's processes stayed on loopback."""
import pytest

from tests.e2e.helpers import (DONE, assert_each_event_stored_once, assert_only_loopback, kill_the_worker_mid_run,
                               launch_small_run, metric_steps, start_a_worker_that_re_attaches, statuses_of)
from webapp.runs.models import EngineJob, Rollout, RunEvent
from workers.engines.base import TERMINAL_CODES

pytestmark = pytest.mark.e2e


@pytest.fixture
def ray(ray_cluster, engine_stack):
    return engine_stack({"EVOLAB_TRAINER_LAUNCHER": "ray", "RAY_ADDRESS": ray_cluster.address})


def test_a_two_node_run_trains_as_one_ray_job_across_both_nodes(ray, ray_cluster, live_user):
    run_id = launch_small_run(ray, live_user, "ray-two-nodes", max_steps=2, nodes=2)
    run = ray.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=300)
    assert run["state"] == "succeeded" and run["last_step"] == 2, (run["message"], run["engine"])
    engine = run["engine"]
    assert engine["name"] == "ray" and engine["job_id"] == f"evolab-run-{run_id}-1", engine
    job = ray_cluster.job(engine["job_id"])
    assert job["status"] == "SUCCEEDED" and "rl.ray_launch --nodes 2" in job["entrypoint"]
    # the job's log, its end on the page: the end only (torch's elastic agent may log a page of shutdown noise after
    # the launcher's first line, which then is in the whole log alone)
    logs = TERMINAL_CODES.sub("", ray_cluster.get(f"/api/jobs/{engine['job_id']}/logs")["logs"])  # as the page shows it
    assert "evolab: Ray job on 2 node(s), from the start" in logs
    assert engine["log_tail"].strip() and engine["log_tail"].strip().splitlines()[-1] in logs, engine
    # each node's launcher ran on its own node (STRICT_SPREAD): the ranks met at the first node's address
    assert {n["raylet"]["nodeManagerAddress"] for n in ray_cluster.get("/nodes?view=summary")["data"]["summary"]} \
        == {ray_cluster.HEAD, ray_cluster.SECOND}
    # each prompt's 8 rollouts, generated half on each rank, were voted on together
    assert sorted(Rollout.objects.filter(run_id=run_id, step=1).values_list("index", flat=True)) == sorted(
        list(range(8)) * 2)
    assert_each_event_stored_once(run_id)


def test_a_run_ray_cannot_place_waits_pending_with_rays_reason_and_cancels(ray, ray_cluster, live_user):
    run_id = launch_small_run(ray, live_user, "ray-needs-a-gpu", max_steps=2, gpus=1)
    # pending from its claim, its engine (and then the engine's reason) known a moment later
    pending = ray.api.wait_for(run_id, lambda r: r["state"] == "pending" and (r["engine"] or {}).get("reason"),
                               timeout=60, what="pending with Ray's reason")
    assert pending["engine"]["reason"].startswith("pending in Ray: Job has not started yet"), pending
    assert ray_cluster.job(pending["engine"]["job_id"])["status"] == "PENDING"
    ray.api.post(f"/runs/{run_id}/cancel")
    run = ray.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=60)
    assert run["state"] == "cancelled" and "stopped while waiting in Ray's queue" in run["message"], run


def test_a_cancelled_run_stops_its_ray_job_after_a_checkpoint(ray, ray_cluster, live_user):
    run_id = launch_small_run(ray, live_user, "ray-cancel", max_steps=40)
    ray.api.wait_for(run_id, lambda r: (r["last_step"] or 0) >= 1, timeout=180, what="step 1")
    ray.api.post(f"/runs/{run_id}/cancel")
    run = ray.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=120)
    assert run["state"] == "cancelled" and run["last_step"] < 40, run
    job = ray_cluster.job(run["engine"]["job_id"])
    assert job["status"] == "STOPPED"
    assert RunEvent.objects.filter(run_id=run_id, type="checkpoint").exists()  # the trainer saved before it ended
    # Ray kills a stopped job 3 s after its SIGTERM unless told otherwise: it waits the worker's cancel grace
    assert job["runtime_env"]["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == "30"


def test_a_killed_worker_leaves_the_ray_job_training_and_the_next_worker_re_attaches(ray, ray_cluster, live_user):
    # enough steps that the job still trains when the next worker takes the run on, some 8 s (the lease, and a
    # worker's start) after the kill: at 0.3 s a step on an idle machine, 30 steps were too few
    steps = 50
    run_id = launch_small_run(ray, live_user, "ray-worker-killed", max_steps=steps)
    job_id = kill_the_worker_mid_run(ray, run_id)
    assert ray_cluster.job(job_id)["status"] == "RUNNING"  # training went on without its worker
    start_a_worker_that_re_attaches(ray, run_id, max_steps=steps)
    run = ray.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=240)
    assert run["state"] == "succeeded" and run["last_step"] == steps, run
    assert run["engine"]["job_id"] == job_id and EngineJob.objects.get(run_id=run_id).attempt == 1  # one job, never two
    assert [state for state, _ in statuses_of(run_id)] == ["running", "succeeded"]  # trained once, no resume
    assert metric_steps(run_id) == list(range(1, steps + 1))
    assert_each_event_stored_once(run_id)


def test_a_run_cancelled_while_its_worker_is_gone_has_its_job_stopped_by_the_next_worker(ray, ray_cluster, live_user):
    run_id = launch_small_run(ray, live_user, "ray-cancelled-orphan", max_steps=200)  # cancelled long before
    job_id = kill_the_worker_mid_run(ray, run_id)
    cancelling = ray.api.post(f"/runs/{run_id}/cancel")
    # no worker to stop the job yet: the run waits for one, saying so, and its job trains on meanwhile
    assert cancelling["state"] == "queued" and "the next worker to take the run stops its job" in cancelling["message"]
    assert ray_cluster.job(job_id)["status"] == "RUNNING"
    ray.start_worker()
    run = ray.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=120)
    assert run["state"] == "cancelled" and ray_cluster.job(job_id)["status"] == "STOPPED", run
    assert EngineJob.objects.get(run_id=run_id).attempt == 1  # stopped, never submitted again
    assert RunEvent.objects.filter(run_id=run_id, type="checkpoint").exists()


def test_the_ray_cluster_talked_to_loopback_only(ray_cluster):
    """Last in this file: the nodes kept the loopback addresses they were given (Ray rewrites 127.0.0.1 to the
    host's address), and every connection of the cluster's processes, sampled through the tests above, had a
    loopback peer: no metadata probe, no usage report."""
    nodes = ray_cluster.get("/nodes?view=summary")["data"]["summary"]
    assert {n["raylet"]["nodeManagerAddress"] for n in nodes} == {ray_cluster.HEAD, ray_cluster.SECOND}
    assert_only_loopback(ray_cluster)
