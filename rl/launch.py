"""The command line that starts a training child (DESIGN section 2, step 3).

The supervisor calls `trainer_command(...)` and runs what it returns:

- 0 or 1 GPU: `python -m rl.train --config C --out D [--resume]`;
- N > 1 GPUs: `accelerate launch --config_file rl/accelerate_configs/zero{2,3}.yaml
  --num_processes N -m rl.train ...` (DeepSpeed ZeRO-2 by default, ZeRO-3 for policies
  whose weights do not fit one GPU).

- several nodes (a worker started with EVOLAB_TRAINER_NODES=N and EVOLAB_TRAINER_LAUNCHER=slurm,
  inside a Slurm allocation): `srun --nodes N --ntasks-per-node 1 ... bash -c '...accelerate launch
  --num_machines N --machine_rank $SLURM_NODEID --main_process_ip <first node> ...'`: Slurm starts one
  `accelerate launch` per node, each starting that node's GPUs' ranks; the run directory must be on a
  filesystem every node shares (rank 0 writes the event log, which the supervisor tails). A cancel's
  SIGTERM to `srun` reaches every task. Tested without a cluster by running the command with stand-ins
  for `srun`, `scontrol` and the interpreter, which start each node's task on this machine and record
  what it was asked to run (tests/rl/test_slurm_launch.py); a real two-node run needs GPUs (accelerate's
  CPU backend does not rank processes of several machines).

On several processes each rank generates its share of the step's rollouts; the
trainer gathers them so every prompt's n_votes rollouts are scored together, and
each rank trains on its own slice of the first n_train (rl/trainer.py). Rank 0
alone writes events. prompts_per_step × n_votes must split evenly over the
processes, and R-Zero runs on one process only; both fail with status 2 and one
`status: failed` event otherwise. Tested for real with two CPU processes (gloo,
tests/rl/accelerate_cpu.yaml); the DeepSpeed configs themselves need GPUs.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

ACCELERATE_CONFIGS = Path(__file__).resolve().parent / "accelerate_configs"
ZERO_STAGES = {2: ACCELERATE_CONFIGS / "zero2.yaml", 3: ACCELERATE_CONFIGS / "zero3.yaml"}


LAUNCHERS = ("local", "slurm")
MAIN_PROCESS_PORT = 29500


def trainer_command(config_path: str | os.PathLike, out_dir: str | os.PathLike, resume: bool = False,
                    gpus: int = 0, zero_stage: int = 2, python: str | None = None, nodes: int = 1,
                    launcher: str = "local", accelerate_config: str | os.PathLike | None = None) -> list[str]:
    """argv for the training child of one run; `gpus` is how many GPUs the worker gives it (on each of
    `nodes` nodes); `accelerate_config` replaces the DeepSpeed config (the tests' CPU config)."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus must be an integer >= 0, got {gpus!r}")
    if zero_stage not in ZERO_STAGES:
        raise ValueError(f"zero_stage must be one of {sorted(ZERO_STAGES)}, got {zero_stage!r}")
    if isinstance(nodes, bool) or not isinstance(nodes, int) or nodes < 1:
        raise ValueError(f"nodes must be an integer >= 1, got {nodes!r}")
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher must be one of {', '.join(LAUNCHERS)}, got {launcher!r}")
    python = python or sys.executable
    arguments = ["--config", str(config_path), "--out", str(out_dir)] + (["--resume"] if resume else [])
    config_file = str(accelerate_config or ZERO_STAGES[zero_stage])
    if nodes > 1:
        if launcher != "slurm":
            raise ValueError(f"a run on {nodes} nodes needs a cluster launcher (launcher='slurm')")
        return slurm_command(python, config_file, nodes, gpus, arguments)
    if gpus <= 1 and accelerate_config is None:
        return [python, "-m", "rl.train", *arguments]
    return [python, "-m", "accelerate.commands.launch", "--config_file", config_file,
            "--num_processes", str(max(gpus, 1)), "-m", "rl.train", *arguments]


def slurm_command(python: str, config_file: str, nodes: int, gpus: int, arguments: list[str]) -> list[str]:
    """srun, one task per node, each an `accelerate launch` of that node's ranks: the node's rank is
    Slurm's SLURM_NODEID, and the main process is on the allocation's first node."""
    per_node = max(gpus, 1)
    accelerate = [python, "-m", "accelerate.commands.launch", "--config_file", config_file,
                  "--num_machines", str(nodes), "--num_processes", str(nodes * per_node),
                  "--machine_rank", "$SLURM_NODEID", "--main_process_ip", "$EVOLAB_MAIN_NODE",
                  "--main_process_port", str(MAIN_PROCESS_PORT), "-m", "rl.train", *arguments]
    # Expanded by each task's shell, on its node; everything else is quoted as it is.
    words = " ".join(f'"{word}"' if word.startswith("$") else shlex.quote(word) for word in accelerate)
    script = ('EVOLAB_MAIN_NODE="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)"; '
              f"export EVOLAB_MAIN_NODE; exec {words}")
    return ["srun", f"--nodes={nodes}", f"--ntasks={nodes}", "--ntasks-per-node=1",
            *([f"--gpus-per-node={gpus}"] if gpus else []), "--kill-on-bad-exit=1", "--job-name=evolab-trainer",
            "bash", "-c", script]
