"""rl.launch for cluster engines (DESIGN §4.9): a run's Slurm options are checked and never reach a shell
unquoted, the batch script starts one launcher per node ranked by Slurm and resumes when Slurm requeues it, and
the Ray entrypoint is the trainer or rl.ray_launch. The scripts run for real in tests/e2e/test_slurm_engine.py
and test_ray_engine.py; here their text."""
import subprocess

import pytest

from rl.launch import batch_script, node_command, ray_entrypoint, slurm_job_options, trainer_command
from rl.sbatch_options import resolve_sbatch_option, slurm_options
from rl.params import FieldError


def script(**overrides):
    arguments = dict(job_name="evolab-run-7-1", run_dir="/runs/7", config_path="/runs/7/config.json",
                     code_dir="/srv/evolab", python="/venv/bin/python", nodes=1, gpus=0, resume=False, options={},
                     environment={"HF_HUB_OFFLINE": "1"}, log_path="/runs/7/engine.log")
    return batch_script(**{**arguments, **overrides})


def test_it_keeps_the_options_it_knows_and_drops_empty_ones():
    assert slurm_options({"partition": "gpu-a100", "account": "", "time_limit": "1-12:00:00",
                          "sbatch": ["--constraint=a100", "--exclusive"]}) == {
        "partition": "gpu-a100", "time_limit": "1-12:00:00", "sbatch": ["--constraint=a100", "--exclusive"]}


@pytest.mark.parametrize("options, field", [
    ({"partition": "gpu; rm -rf /"}, "partition"),
    ({"account": "$(id)"}, "account"),
    ({"time_limit": "tomorrow"}, "time_limit"),
    ({"sbatch": ["--constraint=a100 --wrap=id"]}, "sbatch"),
    ({"sbatch": ["constraint=a100"]}, "sbatch"),
    ({"sbatch": ["--output=/etc/passwd"]}, "sbatch"),
    ({"sbatch": ["--job-name=other"]}, "sbatch"),
    ({"qos": "high"}, "qos"),
])
def test_it_names_the_option_it_refuses(options, field):
    with pytest.raises(FieldError) as refused:
        slurm_options(options)
    assert refused.value.field == f"engine_options.{field}" and (field in str(refused.value) or "sbatch option" in str(refused.value))


@pytest.mark.parametrize("name, value", [("partition", "gpu\n"), ("account", "lab\n"), ("time_limit", "30\n"),
                                         ("sbatch", ["--constraint=a100\n"])])
def test_a_value_ending_in_a_newline_is_refused_not_written_as_a_blank_line(name, value):
    # `$` matches before a final newline: "gpu\n" was taken and wrote a blank line into the job's script
    with pytest.raises(FieldError) as refused:
        slurm_options({name: value})
    assert refused.value.field == f"engine_options.{name}"
    assert repr(value[0] if name == "sbatch" else value) in str(refused.value)


def refusal(*sbatch) -> str:
    with pytest.raises(FieldError) as refused:
        slurm_options({"sbatch": list(sbatch)})
    assert refused.value.field == "engine_options.sbatch"
    return str(refused.value)


# sbatch takes any unique prefix of a long option (getopt_long), and a run's lines came after Evolab's own #SBATCH
# lines: each of these was accepted, and sbatch read it as the option it abbreviates
@pytest.mark.parametrize("option, said", [
    ("--outp=/shared/other-team/train.log", "--outp is Slurm's --output, which Evolab sets itself"),
    ("--open=truncate", "--open is Slurm's --open-mode, which Evolab sets itself"),
    ("--chdi=/tmp", "--chdi is Slurm's --chdir, which Evolab sets itself"),
    ("--job=victim", "--job is Slurm's --job-name, which Evolab sets itself"),
    ("--no-r", "--no-r is Slurm's --no-requeue, which Evolab sets itself"),
    ("--err=/shared/x", "--err is Slurm's --error, which Evolab sets itself"),
    ("--tasks-per-node=8", "--tasks-per-node is Slurm's --ntasks-per-node, which Evolab sets itself"),
    ("--arr=0-999", "--arr is Slurm's --array, which a run may not set"),
    ("--export-f=/home/me/env", "--export-f is Slurm's --export-file, which a run may not set"),
    ("--export-file=/home/me/env", "--export-file is an option that a run may not set"),
])
def test_it_refuses_an_abbreviation_of_an_option_a_run_may_not_set_saying_what_it_is(option, said):
    assert said in refusal(option)


@pytest.mark.parametrize("option", [
    "--export=NONE", "--chdir=/tmp", "--output=/x", "--error=/x", "--input=/x", "--open-mode=truncate", "--array=1-4",
    "--job-name=x", "--requeue", "--no-requeue", "--wrap=id", "--parsable", "--nodes=4", "--ntasks=4",
    "--ntasks-per-gpu=1", "--gpus=8", "--gpus-per-task=1", "--gres=gpu:8", "--dependency=afterok:1", "--uid=0",
    "--gid=0", "--get-user-env", "--wckey=x", "--test-only", "--hold", "--batch=x", "--clusters=other",
    "--cluster=other", "--container=/x", "--propagate", "--kill-on-invalid-dep=yes", "--help", "--usage", "--wait",
    "--priority=99999", "--reboot", "--nodefile=/x", "--bbf=/x",
])
def test_it_refuses_options_that_would_change_the_job_evolab_submits(option):
    said = refusal(option)
    assert "Evolab sets itself" in said or "a run may not set" in said, said


@pytest.mark.parametrize("option, field", [("--part=gpu", "partition"), ("--partition=gpu", "partition"),
                                           ("--accou=lab", "account"), ("--time=30", "time_limit")])
def test_partition_account_and_time_are_refused_as_extras_pointing_to_their_own_fields(option, field):
    assert f"engine_options.{field}" in refusal(option)


def test_an_ambiguous_abbreviation_is_refused_naming_what_it_could_be():
    said = refusal("--gpu=1")
    assert "--gpu is ambiguous" in said and "--gpu-bind" in said and "--gpus-per-node" in said


def test_an_option_sbatch_does_not_have_is_refused():
    assert "sbatch has no option --frobnicate" in refusal("--frobnicate=1")


def test_an_allowed_abbreviation_is_written_with_its_full_name():
    # the full name means the same to every sbatch; a newer one, with more options, may read a prefix otherwise
    assert slurm_options({"sbatch": ["--const=a100", "--exclus", "--mem-per-g=40G", "--qos=low"]})["sbatch"] == [
        "--constraint=a100", "--exclusive", "--mem-per-gpu=40G", "--qos=low"]


@pytest.mark.parametrize("option, said", [
    ("--nodelist=/etc/hosts", "names a file"), ("--exclude=../nodes", "names a file"),
    ("--nodel=./n1", "names a file"), ("--mem", "--mem needs a value"), ("--contiguous=yes", "takes no value"),
    ("--comment='a", "quotes"), ("--comment=a#b", "quotes"),
])
def test_a_value_sbatch_would_read_otherwise_is_refused(option, said):
    assert said in refusal(option)


def test_allowed_options_and_their_values_are_kept():
    options = ["--constraint=a100&ib", "--nodelist=n[1-4]", "--exclude=n7", "--mem=64G", "--cpus-per-task=8",
               "--mail-type=END,FAIL", "--mail-user=me@example.com", "--begin=now+1hour", "--signal=B:USR1@60",
               "--nice=10", "--exclusive=user", "--contiguous", "--reservation=maint", "--comment=ablation-3"]
    assert slurm_options({"sbatch": options})["sbatch"] == options


def own_options(**overrides):
    arguments = dict(job_name="evolab-run-7-1", nodes=1, gpus=0, log_path="/runs/7/engine.log", code_dir="/srv/evolab")
    return slurm_job_options(**{**arguments, **overrides})


def test_evolabs_own_options_are_for_sbatchs_command_line_where_they_win_over_any_sbatch_line():
    assert own_options() == ["--job-name=evolab-run-7-1", "--nodes=1", "--ntasks-per-node=1",
                             "--output=/runs/7/engine.log", "--error=/runs/7/engine.log", "--input=/dev/null",
                             "--open-mode=append", "--chdir=/srv/evolab", "--export=ALL", "--requeue"]
    assert own_options(gpus=4, nodes=2)[-1] == "--gpus-per-node=4" and "--nodes=2" in own_options(nodes=2)


def shortest_abbreviation(name: str) -> str:
    for end in range(1, len(name) + 1):
        try:
            if resolve_sbatch_option(name[:end]) == name:
                return name[:end]
        except ValueError:  # none, or ambiguous
            pass


def test_a_run_may_set_none_of_evolabs_own_options_however_it_spells_them():
    for option in own_options(gpus=4):
        name, _, value = option[2:].partition("=")
        abbreviated = f"--{shortest_abbreviation(name)}" + (f"={value}" if value else "")
        assert "Evolab sets itself" in refusal(option) and "Evolab sets itself" in refusal(abbreviated), abbreviated


def test_a_one_node_job_execs_the_trainer_with_the_runs_options_as_sbatch_lines():
    text = script(options={"partition": "debug", "time_limit": "30", "sbatch": ["--const=a100"]})
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    # only the run's (and the worker's) checked options are #SBATCH lines; the comment says where Evolab's are
    assert [line for line in lines if line.startswith("#SBATCH")] == [
        "#SBATCH --partition=debug", "#SBATCH --time=30", "#SBATCH --constraint=a100"]
    assert "# sbatch " + " ".join(own_options()) in lines
    assert lines[-1] == ("exec /venv/bin/python -m rl.train --config /runs/7/config.json --out /runs/7 "
                         "$EVOLAB_RESUME")


def test_environment_values_are_quoted_for_the_shell():
    assert "export NOTE='a b; $(id)'" in script(environment={"NOTE": "a b; $(id)"}).splitlines()


def test_the_resume_switch_is_set_when_asked_or_when_slurm_requeued_the_job(tmp_path):
    # the script's own lines up to its exec, run by bash: what would the trainer get?
    for resume, restarts, expected in ((False, "0", ""), (True, "0", "--resume"), (False, "1", "--resume")):
        text = script(resume=resume).rsplit("\n", 2)[0] + '\nprintf "%s" "$EVOLAB_RESUME"\n'
        (tmp_path / "job").write_text(text)
        done = subprocess.run(["bash", str(tmp_path / "job")], capture_output=True, text=True,
                              env={"SLURM_RESTART_COUNT": restarts, "PATH": "/usr/bin:/bin"})
        assert done.stdout.rsplit("\n", 1)[-1] == expected, (resume, restarts, done.stdout)


def test_several_nodes_start_one_launcher_per_node_through_srun_ranked_by_slurm():
    text = script(nodes=2)
    srun = text.splitlines()[-1]
    assert srun.startswith("exec srun --nodes=2 --ntasks=2 --ntasks-per-node=1 --kill-on-bad-exit=1 bash -c ")
    # the rank and the main node's address are expanded on each node, not in the batch script
    assert '"$SLURM_NODEID"' in srun and '"$EVOLAB_MAIN_NODE"' in srun and "torch.distributed.run" in srun
    # the main port from the job's id: every node agrees on it, two jobs sharing a node do not (29500 for all did)
    assert '"$EVOLAB_MAIN_PORT"' in srun and "EVOLAB_MAIN_PORT=$((20000 + SLURM_JOB_ID % 40000))" in text


def test_the_processes_of_one_node_take_a_free_port_not_29500_which_another_run_may_hold():
    command = trainer_command("c.json", "out", gpus=4)
    assert command[command.index("--main_process_port") + 1] == "0"  # accelerate picks a free one


def test_a_cpu_node_launcher_is_torchrun_and_a_gpu_one_accelerate():
    cpu = node_command("py", "c.json", "out", 2, 0, "1", "10.0.0.5", "31234")
    assert cpu[:3] == ["py", "-m", "torch.distributed.run"] and cpu[cpu.index("--node_rank") + 1] == "1"
    assert cpu[cpu.index("--master_addr") + 1] == "10.0.0.5" and cpu[cpu.index("--master_port") + 1] == "31234"
    gpu = node_command("py", "c.json", "out", 2, 8, "0", "10.0.0.5", "31234")
    assert gpu[:3] == ["py", "-m", "accelerate.commands.launch"]
    assert gpu[gpu.index("--num_machines") + 1] == "2" and gpu[gpu.index("--num_processes") + 1] == "16"
    assert gpu[gpu.index("--main_process_port") + 1] == "31234"


def test_the_ray_entrypoint_is_the_trainer_on_one_node_and_ray_launch_on_several():
    one = ray_entrypoint(code_dir="/srv/evolab", python="/venv/bin/python", config_path="/runs/7/config.json",
                         run_dir="/runs/7", nodes=1, gpus=0, resume=True)
    assert one.startswith("cd /srv/evolab && echo ")
    assert one.endswith("exec /venv/bin/python -m rl.train --config /runs/7/config.json --out /runs/7 --resume")
    several = ray_entrypoint(code_dir="/srv/my evolab", python="/venv/bin/python", config_path="/runs/7/config.json",
                             run_dir="/runs/7", nodes=2, gpus=1, resume=False)
    assert several.startswith("cd '/srv/my evolab' && ")
    assert "-m rl.ray_launch --nodes 2 --gpus 1" in several and "--resume" not in several
