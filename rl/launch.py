"""The command line that starts a training child (DESIGN section 2, step 3).

The supervisor calls `trainer_command(...)` and runs what it returns:

- 0 or 1 GPU: `python -m rl.train --config C --out D [--resume]`;
- N > 1 GPUs: `accelerate launch --config_file rl/accelerate_configs/zero{2,3}.yaml
  --num_processes N -m rl.train ...` (DeepSpeed ZeRO-2 by default, ZeRO-3 for policies
  whose weights do not fit one GPU).

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
import sys
from pathlib import Path

ACCELERATE_CONFIGS = Path(__file__).resolve().parent / "accelerate_configs"
ZERO_STAGES = {2: ACCELERATE_CONFIGS / "zero2.yaml", 3: ACCELERATE_CONFIGS / "zero3.yaml"}


def trainer_command(config_path: str | os.PathLike, out_dir: str | os.PathLike, resume: bool = False,
                    gpus: int = 0, zero_stage: int = 2, python: str | None = None) -> list[str]:
    """argv for the training child of one run; `gpus` is how many GPUs the worker gives it."""
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
        raise ValueError(f"gpus must be an integer >= 0, got {gpus!r}")
    if zero_stage not in ZERO_STAGES:
        raise ValueError(f"zero_stage must be one of {sorted(ZERO_STAGES)}, got {zero_stage!r}")
    python = python or sys.executable
    arguments = ["--config", str(config_path), "--out", str(out_dir)] + (["--resume"] if resume else [])
    if gpus <= 1:
        return [python, "-m", "rl.train", *arguments]
    return [python, "-m", "accelerate.commands.launch", "--config_file", str(ZERO_STAGES[zero_stage]),
            "--num_processes", str(gpus), "-m", "rl.train", *arguments]
