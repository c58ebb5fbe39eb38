"""rl.launch for cluster engines (DESIGN §4.9): a run's Slurm options are checked and never reach a shell
unquoted, the batch script starts one launcher per node ranked by Slurm and resumes when Slurm requeues it, and
the Ray entrypoint is the trainer or rl.ray_launch. The scripts run for real in tests/e2e/test_slurm_engine.py
and test_ray_engine.py; here their text."""
import subprocess

import pytest

from rl.launch import batch_script, node_command, ray_entrypoint, slurm_options, trainer_command
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


def test_a_one_node_job_execs_the_trainer_with_its_options_as_sbatch_lines():
    text = script(options={"partition": "debug", "time_limit": "30", "sbatch": ["--constraint=a100"]})
    lines = text.splitlines()
    assert lines[0] == "#!/bin/bash"
    assert {"#SBATCH --job-name=evolab-run-7-1", "#SBATCH --nodes=1", "#SBATCH --partition=debug",
            "#SBATCH --time=30", "#SBATCH --constraint=a100", "#SBATCH --requeue",
            "#SBATCH --output=/runs/7/engine.log"} <= set(lines)
    assert lines[-1] == ("exec /venv/bin/python -m rl.train --config /runs/7/config.json --out /runs/7 "
                         "$EVOLAB_RESUME")
    assert "#SBATCH --gpus-per-node" not in text


def test_a_gpu_job_asks_slurm_for_its_gpus_per_node():
    assert "#SBATCH --gpus-per-node=4" in script(gpus=4).splitlines()


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
    assert "#SBATCH --nodes=2" in text and "#SBATCH --ntasks-per-node=1" in text
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
