"""Runs handed to a real Slurm cluster (DESIGN §4.9): Debian's slurm-wlm and munge, a slurmctld and two slurmd
"nodes" on this machine's loopback address, started once per session (scripts/clusters.py). The worker only
submits (`sbatch`) and watches (`scontrol`, `sacct`), it is not the trainer's parent: a run trains as a job, waits
as `pending` with Slurm's reason while the cluster is full, cancels cleanly, is re-attached by a second worker
when its worker is killed (no second job, every event once, the steps unbroken), and resumes from its checkpoint
when Slurm requeues its job. A 2-node run stands in for a multi-node one: two ranks on CPU (gloo)."""
from pathlib import Path

import pytest
import requests

from tests.e2e.helpers import (DONE, SMALL_TTRL, assert_each_event_stored_once, assert_only_loopback,
                               kill_the_worker_mid_run, launch_small_run, metric_steps, start_a_worker_that_re_attaches,
                               statuses_of)
from tests.factories import make_prompt_set
from tests.waiting import wait_until
from webapp.runs.model_names import ModelNameError
from webapp.runs.models import EngineJob, Run, RunEvent
from workers.engines.base import JobSpec
from workers.engines.slurm import SlurmCli

pytestmark = pytest.mark.e2e


@pytest.fixture
def slurm(slurm_cluster, engine_stack, tmp_path):
    # A job inherits the worker's environment (sbatch exports it). Each node of this cluster has one CPU, but it
    # binds no task to it (both nodes are this machine): one thread per trainer, as Ray sets for its jobs, else a
    # trainer's second thread fights the other rank or the stack for two cores and a step takes 8 s, not 0.5 s.
    # Its model root offers a folder the worker finds and the trainer refuses (no weights).
    (tmp_path / "models" / "no-weights-model").mkdir(parents=True)
    return engine_stack({"EVOLAB_TRAINER_LAUNCHER": "slurm", **slurm_cluster.env, "OMP_NUM_THREADS": "1",
                         "EVOLAB_MODEL_ROOTS": str(tmp_path / "models")})


def job_fields(cluster, job_id) -> dict:
    shown = cluster.run("scontrol", "--oneliner", "show", "job", job_id).stdout
    return dict(part.split("=", 1) for part in shown.split() if "=" in part)


def job_state(cluster, job_id) -> str:
    return job_fields(cluster, job_id).get("JobState", "")


def test_a_run_trains_as_a_slurm_job_and_its_page_shows_the_job(slurm, slurm_cluster, live_user):
    run_id = launch_small_run(slurm, live_user, "slurm-ok", max_steps=3,
                              engine_options={"time_limit": "30", "sbatch": ["--comm=evolab-e2e"]})
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=240)
    assert run["state"] == "succeeded" and run["last_step"] == 3, run
    engine = run["engine"]
    assert engine["name"] == "slurm" and engine["job_id"].isdigit(), engine
    script = (Path(Run.objects.get(pk=run_id).run_dir) / f"evolab-run-{run_id}-1.sbatch").read_text()
    assert f"# sbatch --job-name=evolab-run-{run_id}-1 " in script and "-m rl.train" in script
    assert job_state(slurm_cluster, engine["job_id"]) == "COMPLETED"
    fields = job_fields(slurm_cluster, engine["job_id"])
    assert fields["JobName"] == f"evolab-run-{run_id}-1"  # from the command line
    # the run's options, #SBATCH lines under the comment that gives the command line; its abbreviation in full
    assert "#SBATCH --comment=evolab-e2e" in script and fields["Comment"] == "evolab-e2e", fields
    assert fields["TimeLimit"] == "00:30:00", fields
    # the job's output, as Slurm wrote it, on the run's page
    assert f"evolab: evolab-run-{run_id}-1: Slurm job {engine['job_id']} on n" in engine["log_tail"], engine
    assert_each_event_stored_once(run_id)


# On a real Slurm worker, a run's `--outp`, `--err`, `--chd` and `--arr=0-3` ran four jobs writing to the member's
# paths: sbatch takes any unique prefix of an option, and Evolab compared names exactly
HOSTILE = ["--outp=/tmp/evolab-hostile.log", "--open=truncate", "--chdi=/tmp", "--export-file=/tmp/evolab-env",
           "--arr=0-999", "--job=victim", "--no-r", "--err=/tmp/evolab-hostile.err", "--tasks-per-node=8"]


def test_slurm_options_a_run_may_not_set_are_refused_however_abbreviated_and_never_reach_slurm(slurm, slurm_cluster,
                                                                                                 live_user):
    prompt_set = make_prompt_set(live_user, name="arith-hostile")
    jobs = slurm_cluster.run("squeue", "--noheader", "--states=all", "--format=%i").stdout.split()
    for option in HOSTILE:
        response = slurm.api.session.post(slurm.api.base + "/runs", timeout=30, json={
            "name": "hostile", "method": "ttrl", "prompt_set": prompt_set.pk, "max_steps": 2,
            "hyperparameters": SMALL_TTRL, "engine_options": {"sbatch": ["--constraint=cpu", option]}})
        assert response.status_code == 400, (option, response.text)
        refusal = response.json()
        assert refusal["field"] == "engine_options.sbatch" and option.split("=")[0] in refusal["error"], refusal
    assert not Run.objects.exists()
    assert slurm_cluster.run("squeue", "--noheader", "--states=all", "--format=%i").stdout.split() == jobs  # none new


def test_evolabs_own_options_on_sbatchs_command_line_win_over_hostile_sbatch_lines(slurm_cluster, tmp_path,
                                                                                   monkeypatch):
    """Defence in depth, should a hostile line ever pass the check: a script whose #SBATCH lines, written here
    directly, name other files, another directory and job name, no requeue, two nodes and no environment, submitted
    by SlurmCli with Evolab's options on the command line: the real sbatch and slurmd follow Evolab's."""
    monkeypatch.setenv("SLURM_CONF", slurm_cluster.env["SLURM_CONF"])
    monkeypatch.setenv("EVOLAB_TEST_MARKER", "from-the-worker")
    run_dir, code_dir, elsewhere = tmp_path / "run", tmp_path / "code", tmp_path / "elsewhere"
    for folder in (run_dir, code_dir, elsewhere):
        folder.mkdir()
    (elsewhere / "stdin").write_text("read from elsewhere\n")
    hostile = [f"--outp={elsewhere}/out.log", f"--err={elsewhere}/err.log", f"--input={elsewhere}/stdin",
               "--open=truncate", f"--chd={elsewhere}", "--job=victim", "--no-r", "--nodes=2", "--export=NONE"]
    script = run_dir / "hostile.sbatch"
    script.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {option}\n" for option in hostile) +
                      'echo "evolab-test: in $(pwd) as $SLURM_JOB_NAME on $SLURM_JOB_NUM_NODES node(s), '
                      'marker ${EVOLAB_TEST_MARKER:-unset}, stdin $(cat)"\n'
                      'echo "evolab-test: on stderr" >&2\n')
    spec = JobSpec(name="evolab-run-0-1", run_id=0, run_dir=run_dir, config_path=run_dir / "config.json",
                   code_dir=code_dir, python="python3", nodes=1, gpus=0, resume=False)
    spec.log_path.write_text("written before the job\n")

    # the lines are real directives: sbatch alone follows them (held, so the job never runs)
    held = slurm_cluster.run("sbatch", "--parsable", "--hold", str(script)).stdout.strip()
    fields = job_fields(slurm_cluster, held)
    assert (fields["JobName"], fields["WorkDir"], fields["StdOut"], fields["Requeue"]) == (
        "victim", str(elsewhere), f"{elsewhere}/out.log", "0"), fields
    slurm_cluster.run("scancel", held)

    job_id = SlurmCli().submit_script(script, spec)
    wait_until(lambda: job_state(slurm_cluster, job_id) == "COMPLETED", 60, every=0.5, what="the job to complete",
               last=lambda: job_fields(slurm_cluster, job_id))
    fields = job_fields(slurm_cluster, job_id)
    assert fields["JobState"] == "COMPLETED", fields
    assert (fields["JobName"], fields["WorkDir"], fields["StdOut"], fields["StdErr"], fields["StdIn"],
            fields["Requeue"], fields["NumNodes"]) == ("evolab-run-0-1", str(code_dir), str(spec.log_path),
                                                       str(spec.log_path), "/dev/null", "1", "1"), fields
    log = spec.log_path.read_text()
    assert log.startswith("written before the job\n"), log  # appended, not truncated
    assert (f"evolab-test: in {code_dir} as evolab-run-0-1 on 1 node(s), marker from-the-worker, stdin \n" in log
            and "evolab-test: on stderr\n" in log), log
    assert sorted(path.name for path in elsewhere.iterdir()) == ["stdin"]  # nothing written elsewhere


def test_a_two_node_run_trains_two_ranks_through_srun(slurm, slurm_cluster, live_user):
    run_id = launch_small_run(slurm, live_user, "slurm-two-nodes", max_steps=2, nodes=2)
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=300)
    assert run["state"] == "succeeded" and run["last_step"] == 2, (run["message"], run["engine"])
    nodes = slurm_cluster.run("scontrol", "--oneliner", "show", "job", run["engine"]["job_id"]).stdout
    assert "NumNodes=2" in nodes and "NodeList=n[1-2]" in nodes


def test_a_run_the_cluster_cannot_hold_waits_pending_with_slurms_reason_and_cancels(slurm, slurm_cluster, live_user,
                                                                                    session_key):
    run_id = launch_small_run(slurm, live_user, "slurm-too-big", max_steps=2, nodes=3)
    # pending from its claim, its engine (and then the engine's reason) known a moment later
    pending = slurm.api.wait_for(run_id, lambda r: r["state"] == "pending" and (r["engine"] or {}).get("reason"),
                                 timeout=60, what="pending with Slurm's reason")
    assert pending["engine"]["reason"].startswith("pending in Slurm: "), pending
    job_id = pending["engine"]["job_id"]
    assert job_state(slurm_cluster, job_id) == "PENDING"
    listing = requests.get(slurm.url + "/", cookies={"sessionid": session_key}, timeout=30).text
    assert 'data-field="engine-reason">pending in Slurm: ' in listing  # beside the state, in the run list
    slurm.api.post(f"/runs/{run_id}/cancel")
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=60)
    assert run["state"] == "cancelled" and job_state(slurm_cluster, job_id) == "CANCELLED", run


def test_a_cancelled_run_stops_its_job_which_checkpoints(slurm, slurm_cluster, live_user):
    run_id = launch_small_run(slurm, live_user, "slurm-cancel", max_steps=40)
    slurm.api.wait_for(run_id, lambda r: (r["last_step"] or 0) >= 1, timeout=180, what="step 1")
    job_id = EngineJob.objects.get(run_id=run_id).job_id
    slurm.api.post(f"/runs/{run_id}/cancel")
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=120)
    assert run["state"] == "cancelled" and run["last_step"] < 40, run
    assert job_state(slurm_cluster, job_id) in ("COMPLETED", "CANCELLED")  # the trainer stopped itself, or was stopped
    assert RunEvent.objects.filter(run_id=run_id, type="checkpoint").exists()


def test_a_killed_worker_leaves_the_job_training_and_the_next_worker_re_attaches(slurm, slurm_cluster, live_user):
    # enough steps that the job still trains when the next worker takes the run on, some 8 s (the lease, and a
    # worker's start) after the kill: at 0.3 s a step on an idle machine, 30 steps were too few
    steps = 50
    run_id = launch_small_run(slurm, live_user, "slurm-worker-killed", max_steps=steps)
    job_id = kill_the_worker_mid_run(slurm, run_id)
    assert job_state(slurm_cluster, job_id) == "RUNNING"  # training went on without its worker
    start_a_worker_that_re_attaches(slurm, run_id, max_steps=steps)
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=240)
    assert run["state"] == "succeeded" and run["last_step"] == steps, run
    assert run["engine"]["job_id"] == job_id and EngineJob.objects.get(run_id=run_id).attempt == 1  # one job, never two
    assert [state for state, _ in statuses_of(run_id)] == ["running", "succeeded"]  # trained once, no restart, no resume
    assert metric_steps(run_id) == list(range(1, steps + 1))
    assert_each_event_stored_once(run_id)


def test_a_job_slurm_requeues_resumes_from_its_checkpoint(slurm, slurm_cluster, live_user):
    # requeued once step 2 is seen, a few steps later: enough left to train after it
    run_id = launch_small_run(slurm, live_user, "slurm-requeued", max_steps=12,
                              hyperparameters={**SMALL_TTRL, "save_every": 1})
    slurm.api.wait_for(run_id, lambda r: (r["last_step"] or 0) >= 2, timeout=180, what="step 2")
    job_id = EngineJob.objects.get(run_id=run_id).job_id
    assert slurm_cluster.run("scontrol", "requeue", job_id).returncode == 0  # as a preemption with requeue does
    # a requeued job may start again only after a delay: once it is back in the queue, make it eligible now

    def running_again():
        state = job_state(slurm_cluster, job_id)
        if state == "PENDING":
            slurm_cluster.run("scontrol", "update", f"JobId={job_id}", "StartTime=now")
        return state == "RUNNING"

    wait_until(running_again, 60, every=1, what="the requeued job to run again",
               last=lambda: job_fields(slurm_cluster, job_id))
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=300)
    assert run["state"] == "succeeded" and run["last_step"] == 12, run
    running = [message for state, message in statuses_of(run_id) if state == "running"]
    assert len(running) == 2 and running[1].startswith("resumed from checkpoints/"), running
    assert ", restart 1, --resume" in (Path(Run.objects.get(pk=run_id).run_dir) / "engine.log").read_text()
    assert EngineJob.objects.get(run_id=run_id).job_id == job_id  # Slurm ran the same job again
    assert_each_event_stored_once(run_id)


def test_a_job_that_reaches_its_time_limit_fails_the_run_saying_so(slurm, slurm_cluster, live_user):
    run_id = launch_small_run(slurm, live_user, "slurm-time-limit", max_steps=1000)  # stopped long before
    slurm.api.wait_for(run_id, lambda r: (r["last_step"] or 0) >= 1, timeout=180, what="step 1")
    job_id = EngineJob.objects.get(run_id=run_id).job_id
    # the limit Slurm enforces, shortened to now: SIGTERM, then SIGKILL after KillWait
    assert slurm_cluster.run("scontrol", "update", f"JobId={job_id}", "TimeLimit=0").returncode == 0
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=120)
    assert job_state(slurm_cluster, job_id) == "TIMEOUT"
    assert run["state"] == "failed" and run["message"].startswith(
        f"its Slurm job {job_id} reached its time limit; resume the run"), run["message"]


def test_a_trainer_that_refuses_its_config_fails_the_job_and_the_run_with_its_words(slurm, slurm_cluster, live_user):
    run_id = launch_small_run(slurm, live_user, "slurm-bad-model", max_steps=2, model="no-weights-model", gpus=0)
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=120)
    assert run["state"] == "failed" and "no-weights-model' has no config.json" in run["message"], run["message"]
    assert job_state(slurm_cluster, run["engine"]["job_id"]) == "FAILED"
    assert "no-weights-model' has no config.json" in run["engine"]["log_tail"]  # the trainer's stderr, in the job's log


def test_a_model_name_with_no_folder_fails_the_run_before_a_job_is_submitted(slurm, slurm_cluster, live_user):
    run_id = launch_small_run(slurm, live_user, "slurm-no-model", max_steps=2, model="Qwen/Qwen3-70B", gpus=0)
    run = slurm.api.wait_for(run_id, lambda r: r["state"] in DONE, timeout=60)
    assert run["state"] == "failed" and run["message"] == ModelNameError("Qwen/Qwen3-70B", "model").run_message
    assert not run["engine"]["job_id"]
    assert not slurm_cluster.run("squeue", "--noheader", "--name", f"evolab-run-{run_id}-1").stdout.strip()


def test_a_run_launched_from_the_browser_trains_as_a_slurm_job_whose_page_shows_it(slurm, live_user, session_key,
                                                                                  browser_page):
    page = browser_page
    prompt_set = make_prompt_set(live_user, name="arith-browser")
    page.context.add_cookies([{"name": "sessionid", "value": session_key, "url": slurm.url}])
    page.goto(slurm.url + f"/runs/new/?prompt_set={prompt_set.pk}")
    page.fill("input[name=name]", "from-the-browser")
    page.fill("input[name=max_steps]", "2")
    page.click("#cluster-options summary")
    page.fill("input[name=slurm_time_limit]", "an hour")
    page.click("#launch-button")
    # refused, naming the field, with every value kept
    assert "time_limit must be in Slurm's format" in page.text_content("#error-slurm_time_limit")
    assert page.input_value("input[name=name]") == "from-the-browser" and not Run.objects.exists()
    page.fill("input[name=slurm_time_limit]", "30")
    page.click("#launch-button")
    page.wait_for_selector("#engine-job:not([hidden])")
    page.wait_for_function("/^[0-9]+$/.test(document.getElementById('engine-job-id').textContent)")
    assert page.text_content("#engine-title") == "Slurm"
    page.wait_for_function("document.getElementById('run-state').textContent === 'succeeded'", timeout=240_000)
    run = Run.objects.get(name="from-the-browser")
    assert page.text_content("#engine-job-id") == run.job.job_id
    page.wait_for_function("document.getElementById('engine-log-tail').textContent.includes('evolab: evolab-run-')")
    assert "#SBATCH --time=30" in (Path(run.run_dir) / f"evolab-run-{run.pk}-1.sbatch").read_text()


def test_the_slurm_cluster_talked_to_loopback_only(slurm_cluster):
    """Last in this file: every connection of munged, slurmctld, slurmd and the jobs' trainers, sampled through the
    tests above, had a loopback peer."""
    # a job step of its own, so that the daemons hold connections to watch even when this test runs alone
    assert slurm_cluster.run("srun", "--nodes=2", "--ntasks=2", "sleep", "3").returncode == 0
    assert_only_loopback(slurm_cluster)
