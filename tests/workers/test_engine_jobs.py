"""A worker's engine (DESIGN §4.9): how it refuses a setting it cannot honour, and how a job's end
becomes the run's state and message. The engines themselves run for real in tests/e2e/test_slurm_engine.py and
test_ray_engine.py."""
import pytest

from tests.factories import make_prompt_set
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import EngineJob, Run
from workers import engines
from workers.engines import Engine, EngineError, JobState
from workers.engines.base import file_tail
from workers.engines.local import LocalTrainer
from workers.supervisor import final_state, supervise

pytestmark = pytest.mark.django_db


class Titled(Engine):
    name, title = "slurm", "Slurm"


def make_run(user, **fields):
    return Run.objects.create(prompt_set=make_prompt_set(user), name="r", method="ttrl", max_steps=4,
                              created_by=user, **fields)


def trainer_said(run, state, message, seq=0):
    ingest_events(run, [{"type": "status", "seq": seq, "time": 1.0, "state": state, "message": message}])


def test_it_refuses_slurmrestd_rather_than_submit_some_other_way(settings):
    settings.SLURMRESTD_URL = "http://slurm-head:6820"
    with pytest.raises(EngineError, match="unset it on the worker"):
        engines.engine_named("slurm")


def test_it_names_the_launchers_it_knows_when_given_another():
    with pytest.raises(EngineError, match="local, slurm or ray"):
        engines.engine_named("pbs")


def test_a_ray_worker_without_an_address_says_what_to_set(settings):
    settings.RAY_ADDRESS = ""
    with pytest.raises(EngineError, match="RAY_ADDRESS"):
        engines.engine_named("ray")


def test_a_run_on_several_nodes_fails_at_once_on_a_local_worker(user, settings, tmp_path):
    settings.RUNS_DIR = tmp_path
    settings.TRAINER_LAUNCHER = "local"
    run = make_run(user, nodes=2)
    assert supervise(run.pk) == Run.FAILED
    run.refresh_from_db()
    assert "needs a cluster engine" in run.message and "EVOLAB_TRAINER_LAUNCHER=slurm or ray" in run.message


def test_a_stored_run_whose_slurm_options_are_refused_now_fails_before_its_job_is_submitted(user, settings, tmp_path):
    # launched before sbatch's abbreviations were resolved, and stored: resumed now, it must not reach sbatch
    settings.RUNS_DIR = tmp_path
    settings.TRAINER_LAUNCHER = "slurm"
    run = make_run(user, engine_options={"sbatch": ["--outp=/shared/other-team/train.log"]})
    assert supervise(run.pk) == Run.FAILED
    run.refresh_from_db()
    assert run.message == ("Slurm would not take the run: engine_options.sbatch: sbatch option --outp is Slurm's "
                           "--output, which Evolab sets itself"), run.message
    assert not run.job.job_id and not list(tmp_path.rglob("*.sbatch"))


@pytest.mark.parametrize("end, reason, expected", [
    ("timeout", "", "its Slurm job 17 reached its time limit; resume the run to go on from its last checkpoint"),
    ("node_fail", "", "a node of its Slurm job 17 failed; resume the run"),
    ("preempted", "", "its Slurm job 17 was preempted and not requeued"),
    ("out_of_memory", "", "its Slurm job 17 ran out of memory"),
    ("failed", "NonZeroExitCode", "its Slurm job 17 failed (exit code 1): NonZeroExitCode"),
])
def test_an_engine_end_fails_the_run_saying_why(user, end, reason, expected):
    run = make_run(user)
    state, message = final_state(run, Titled(), "17", JobState("ended", reason=reason, end=end, exit_code=1), False)
    assert state == Run.FAILED and message.startswith(expected), message


def test_a_job_that_completed_takes_the_trainers_word_on_how_the_run_ended(user):
    run = make_run(user)
    trainer_said(run, "succeeded", "trained 4 steps")
    assert final_state(run, Titled(), "17", JobState("ended", end="completed"), False) == (Run.SUCCEEDED,
                                                                                           "trained 4 steps")
    other = make_run(user)
    trainer_said(other, "cancelled", "stopped after step 2 with a checkpoint")
    assert final_state(other, Titled(), "18", JobState("ended", end="completed"), True) == (
        Run.CANCELLED, "stopped after step 2 with a checkpoint")


def test_a_job_cancelled_outside_evolab_cancels_the_run_saying_so(user):
    run = make_run(user)
    assert final_state(run, Titled(), "17", JobState("ended", end="cancelled"), False) == (
        Run.CANCELLED, "its Slurm job 17 was cancelled outside Evolab")


def test_a_job_the_engine_forgot_fails_the_run_with_the_engines_words(user):
    run = make_run(user)
    assert final_state(run, Titled(), "17", JobState("unknown", reason="Slurm no longer knows job 17"), False) == (
        Run.FAILED, "Slurm no longer knows job 17")


@pytest.mark.parametrize("state, cancelled, expected", [
    (JobState("ended", reason="the trainer exited with code 2", end="failed", exit_code=2), False,
     (Run.FAILED, "the trainer exited with code 2")),
    (JobState("ended", reason="the trainer was killed by signal 9", end="failed", exit_code=-9), False,
     (Run.FAILED, "the trainer was killed by signal 9")),
    (JobState("ended", reason="the trainer was stopped by signal 9", end="cancelled", exit_code=-9), True,
     (Run.CANCELLED, "cancelled; the trainer was stopped by signal 9")),
    (JobState("ended", end="completed", exit_code=0), True, (Run.CANCELLED, "cancelled")),
])
def test_a_local_trainers_end_is_said_in_its_own_words(user, state, cancelled, expected):
    assert final_state(make_run(user), LocalTrainer(), "4242", state, cancelled) == expected


def test_a_jobs_log_tail_is_plain_text_and_its_end(tmp_path):
    log = tmp_path / "engine.log"
    log.write_text("start\n" + "x" * 5000 + "\nView the dashboard at \x1b[1m\x1b[32mhttp://127.0.0.2:8265 \x1b[39m\x1b[22m\n")
    tail = file_tail(log, chars=100)
    assert tail.endswith("View the dashboard at http://127.0.0.2:8265 \n") and len(tail) == 100
    assert file_tail(tmp_path / "not-yet-written.log") == ""


def test_a_resumed_run_forgets_its_ended_job_so_that_a_new_one_is_submitted(user):
    from webapp.runs import lifecycle

    run = make_run(user, state=Run.FAILED)
    EngineJob.objects.create(run=run, engine="slurm", job_id="17", attempt=1, reason="TimeLimit")
    lifecycle.requeue_for_resume(run, by=run.created_by)
    job = EngineJob.objects.get(run=run)
    assert (run.state, job.job_id, job.reason, job.attempt) == (Run.QUEUED, "", "", 1)
