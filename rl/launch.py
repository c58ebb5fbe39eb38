"""How a run's trainer is started (DESIGN section 2, step 3, and §4.9): its command, and the Slurm batch
script or Ray entrypoint that wraps it when a cluster engine runs it.

- one process: `python -m rl.train --config C --out D [--resume]` (0 or 1 GPU);
- several GPUs on one node: `accelerate launch --config_file rl/accelerate_configs/zero{2,3}.yaml
  --num_processes N -m rl.train ...` (DeepSpeed ZeRO-2 by default, ZeRO-3 for policies whose weights do
  not fit one GPU);
- several nodes (Slurm or Ray): one launcher per node, told its node's rank and the first node's address:
  `accelerate launch --num_machines N --machine_rank R --main_process_ip A ...` with GPUs, and on CPUs
  `torch.distributed.run --nnodes N --node_rank R --master_addr A ...` (gloo), because accelerate's CPU backend
  does not rank the processes of several machines (each believes it is rank 0 of 1). Slurm starts the node
  launchers with `srun` inside the run's job (batch_script), Ray with one task per node of a placement group
  (rl/ray_launch.py). The run directory must be on storage every node shares: rank 0 writes the event log, which
  the worker reads.

On several processes each rank generates its share of the step's rollouts; the trainer gathers them so every
prompt's n_votes rollouts are scored together, and each rank trains on its own slice of the first n_train
(rl/trainer.py). Rank 0 alone writes events. prompts_per_step × n_votes must split evenly over the processes,
and R-Zero runs on one process only; both fail with status 2 and one `status: failed` event otherwise.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from rl.sbatch_options import slurm_options

ACCELERATE_CONFIGS = Path(__file__).resolve().parent / "accelerate_configs"
ZERO_STAGES = {2: ACCELERATE_CONFIGS / "zero2.yaml", 3: ACCELERATE_CONFIGS / "zero3.yaml"}

LAUNCHERS = ("local", "slurm", "ray")
# The main process's port of a run of several nodes, in a Slurm job: derived from the job's id, so every node of
# the job agrees on it without talking, and two jobs that share a node do not both take accelerate's and torchrun's
# default 29500 (the second failed: its port was in use). Ray's runs ask their first node for a free port
# (rl/ray_launch.py); one node's several processes let accelerate pick a free one (`--main_process_port 0`).
SLURM_MAIN_PORT = "$((20000 + SLURM_JOB_ID % 40000))"
# The one resume switch of a job's command: "" or "--resume", decided where the job starts (a Slurm job that
# the engine requeued after a preemption resumes from its checkpoint)
RESUME_VARIABLE = "EVOLAB_RESUME"


def _check(gpus: int, nodes: int, zero_stage: int) -> None:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus must be an integer >= 0, got {gpus!r}")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    if zero_stage not in ZERO_STAGES:
        raise ValueError(f"zero_stage must be one of {sorted(ZERO_STAGES)}, got {zero_stage!r}")


def trainer_command(config_path: str | os.PathLike, out_dir: str | os.PathLike, resume: bool = False,
                    gpus: int = 0, zero_stage: int = 2, python: str | None = None,
                    accelerate_config: str | os.PathLike | None = None) -> list[str]:
    """argv for the training child of a run on one node; `gpus` is how many GPUs it gets there;
    `accelerate_config` replaces the DeepSpeed config (the tests' CPU config)."""
    _check(gpus, 1, zero_stage)
    python = python or sys.executable
    arguments = ["--config", str(config_path), "--out", str(out_dir)] + (["--resume"] if resume else [])
    if gpus <= 1 and accelerate_config is None:
        return [python, "-m", "rl.train", *arguments]
    config_file = str(accelerate_config or ZERO_STAGES[zero_stage])
    return [python, "-m", "accelerate.commands.launch", "--config_file", config_file,
            "--num_processes", str(max(gpus, 1)), "--main_process_port", "0", "-m", "rl.train", *arguments]


def node_command(python: str, config_path, out_dir, nodes: int, gpus: int, node_rank: str, main_address: str,
                 main_port: str, zero_stage: int = 2, accelerate_config=None) -> list[str]:
    """argv of one node's launcher in a run of several nodes (its words may be shell variables the node
    expands: $SLURM_NODEID); every node is given the same main address and port. The resume switch is left to
    the caller (RESUME_VARIABLE)."""
    _check(gpus, nodes, zero_stage)
    arguments = ["--config", str(config_path), "--out", str(out_dir)]
    if gpus == 0:  # CPUs: torchrun ranks the processes of every node (gloo)
        return [python, "-m", "torch.distributed.run", "--nnodes", str(nodes), "--node_rank", node_rank,
                "--nproc_per_node", "1", "--master_addr", main_address, "--master_port", str(main_port),
                "-m", "rl.train", *arguments]
    config_file = str(accelerate_config or ZERO_STAGES[zero_stage])
    return [python, "-m", "accelerate.commands.launch", "--config_file", config_file, "--num_machines", str(nodes),
            "--num_processes", str(nodes * gpus), "--machine_rank", node_rank, "--main_process_ip", main_address,
            "--main_process_port", str(main_port), "-m", "rl.train", *arguments]


# --- Slurm ---------------------------------------------------------------------------------------------

def slurm_job_options(*, job_name: str, nodes: int, gpus: int, log_path, code_dir) -> list[str]:
    """Evolab's own options of a run's job, for sbatch's command line: sbatch reads the script's #SBATCH lines first,
    then its environment, then its command line, each over the one before, so no line of the script can change the
    job's name, its nodes and GPUs, where its output goes (stdout and stderr both to `log_path`, appended; stdin
    /dev/null), the directory it starts in (`code_dir`, from which `python -m rl.train` imports rl), its environment
    (the worker's: ALL) or its being requeued. A run's own options may not name these (rl.sbatch_options)."""
    options = [f"--job-name={job_name}", f"--nodes={nodes}", "--ntasks-per-node=1", f"--output={log_path}",
               f"--error={log_path}", "--input=/dev/null", "--open-mode=append", f"--chdir={code_dir}",
               "--export=ALL", "--requeue"]
    if gpus:
        options.append(f"--gpus-per-node={gpus}")
    return options


def batch_script(*, job_name: str, run_dir, config_path, code_dir, python: str, nodes: int, gpus: int, resume: bool,
                 options: dict, environment: dict, log_path, zero_stage: int = 2, accelerate_config=None) -> str:
    """The sbatch script of a run: one job of `nodes` nodes × `gpus` GPUs, its output appended to `log_path`,
    requeueable (a preempted job starts again from its checkpoint: SLURM_RESTART_COUNT > 0 means --resume). Those are
    Evolab's options, for sbatch's command line (slurm_job_options; a comment repeats them); the run's and the
    worker's checked options (partition, account, time, the allowed extras) are the script's #SBATCH lines.
    One node: the trainer itself (exec: Slurm's signals reach it). Several: `srun` starts one launcher per node,
    its rank SLURM_NODEID, the first node of the allocation (its NodeAddr) as the main process's address."""
    options = slurm_options(options)
    own = slurm_job_options(job_name=job_name, nodes=nodes, gpus=gpus, log_path=log_path, code_dir=code_dir)
    lines = ["#!/bin/bash",
             "# Evolab's own options are on sbatch's command line, where they win over the #SBATCH lines below:",
             f"# sbatch {' '.join(own)}"]
    for name, flag in (("partition", "partition"), ("account", "account"), ("time_limit", "time")):
        if options.get(name):
            lines.append(f"#SBATCH --{flag}={options[name]}")
    lines += [f"#SBATCH {option}" for option in options.get("sbatch", [])]
    lines += [f"export {key}={shlex.quote(str(value))}" for key, value in sorted(environment.items())]
    lines += [f"{RESUME_VARIABLE}={'--resume' if resume else ''}",
              '# requeued by Slurm (a preemption, a node failure): resume from the checkpoint',
              f'if [ "${{SLURM_RESTART_COUNT:-0}}" -gt 0 ]; then {RESUME_VARIABLE}=--resume; fi',
              f"export {RESUME_VARIABLE}",
              f'echo "evolab: {job_name}: Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST, restart '
              f'${{SLURM_RESTART_COUNT:-0}}, ${{{RESUME_VARIABLE}:-from the start}}"']
    if nodes == 1:
        command = trainer_command(config_path, run_dir, gpus=gpus, zero_stage=zero_stage, python=python,
                                  accelerate_config=accelerate_config)
        lines.append(f"exec {shlex.join(command)} ${RESUME_VARIABLE}")
    else:
        node = node_command(python, config_path, run_dir, nodes, gpus, "$SLURM_NODEID", "$EVOLAB_MAIN_NODE",
                            "$EVOLAB_MAIN_PORT", zero_stage, accelerate_config)
        words = " ".join(f'"{w}"' if w.startswith("$") else shlex.quote(w) for w in node)
        per_node = (f"exec {words} ${RESUME_VARIABLE}")
        lines += ['first="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"',
                  'EVOLAB_MAIN_NODE="$(scontrol show node "$first" | sed -n \'s/.*NodeAddr=\\([^ ]*\\).*/\\1/p\')"',
                  "export EVOLAB_MAIN_NODE",
                  f"EVOLAB_MAIN_PORT={SLURM_MAIN_PORT}",
                  "export EVOLAB_MAIN_PORT",
                  f"exec srun --nodes={nodes} --ntasks={nodes} --ntasks-per-node=1 --kill-on-bad-exit=1 "
                  f"bash -c {shlex.quote(per_node)}"]
    return "\n".join(lines) + "\n"


# --- Ray -------------------------------------------------------------------------------------------------


def ray_entrypoint(*, code_dir, python: str, config_path, run_dir, nodes: int, gpus: int, resume: bool,
                   zero_stage: int = 2, accelerate_config=None) -> str:
    """The shell command of a run's Ray job: the trainer itself on one node, else rl.ray_launch, which places one
    launcher per node (a placement group of `nodes` bundles) from inside the job."""
    resume_flag = ["--resume"] if resume else []
    if nodes == 1:
        command = trainer_command(config_path, run_dir, gpus=gpus, zero_stage=zero_stage, python=python,
                                  accelerate_config=accelerate_config) + resume_flag
    else:
        _check(gpus, nodes, zero_stage)
        command = [python, "-m", "rl.ray_launch", "--nodes", str(nodes), "--gpus", str(gpus), "--python", python,
                   "--config", str(config_path), "--out", str(run_dir), "--zero-stage", str(zero_stage),
                   *(["--accelerate-config", str(accelerate_config)] if accelerate_config else []), *resume_flag]
    said = f"evolab: Ray job on {nodes} node(s), {'resuming' if resume else 'from the start'}"
    return f"cd {shlex.quote(str(code_dir))} && echo {shlex.quote(said)} && exec {shlex.join(command)}"
