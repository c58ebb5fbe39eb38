"""`python -m rl.train --config CONFIG.json --out RUN_DIR [--resume]` (DESIGN section 4.1).

The command line alone: it reads the run config and checks all of it before anything
heavy is imported (rl/run_config.py: a bad config fails in well under a second with one
message naming the field), then hands the run to the driver (rl/driver.py) with the plan
of its method, one GRPO phase or R-Zero's phases (rl/methods/r_zero/training.py), which trains it with
LabelFreeGRPOTrainer and appends events to RUN_DIR/events.jsonl.

Exit status: 0 on success or on a graceful cancel (SIGTERM: the step in progress
finishes, a checkpoint is written, `status: cancelled`); 2 for a bad config and
1 for a failure during training, both after a `status: failed` event.

Under `accelerate launch --num_processes N` (rl.launch) every rank runs this; the
prompts_per_step × n_votes rollouts of a step are split evenly over the ranks, and
rank 0 alone writes events.jsonl.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
import traceback
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no code path downloads from a hub (DESIGN section 3)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# TRL 1.16 calls transformers APIs that transformers 5 renamed; the rename notices would bury real errors
# in the stderr tail the supervisor keeps
warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|trl)(\.|$)")

from rl.driver import run, stop_when_supervisor_is_gone, train_grpo  # noqa: E402
from rl.events import EVENTS_FILE, EventWriter  # noqa: E402
from rl.grpo_config import world_size  # noqa: E402
from rl.methods import get_method  # noqa: E402
from rl.params import FieldError  # noqa: E402
from rl.run_config import check_processes, check_prompt_lengths, load_config  # noqa: E402
from rl.methods.r_zero.training import train_rzero  # noqa: E402


class SilentEvents:
    """What ranks other than 0 hold instead of an EventWriter: the same calls, nothing written, so the log
    keeps a single writer and one `seq` sequence."""

    def __init__(self, run_dir: Path):
        self.path = Path(run_dir) / EVENTS_FILE

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def __enter__(self) -> "SilentEvents":
        return self

    def __exit__(self, *exc) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="run config JSON (DESIGN section 4.1)")
    parser.add_argument("--out", required=True, help="run directory; events go to RUN_DIR/events.jsonl")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in RUN_DIR")
    args = parser.parse_args(argv)
    run_dir = Path(args.out)
    # only on the supervisor's host: a rank on another node of a Slurm job cannot see its process (srun's
    # SIGTERM reaches it instead)
    if os.environ.get("EVOLAB_SUPERVISOR_HOST", socket.gethostname()) == socket.gethostname():
        stop_when_supervisor_is_gone(int(os.environ.get("EVOLAB_SUPERVISOR_PID") or 0))
    writer = EventWriter if int(os.environ.get("RANK", "0")) == 0 else SilentEvents
    with writer(run_dir) as events:
        try:
            config = load_config(args.config)
            check_processes(config, world_size())
            check_prompt_lengths(config)
        except FieldError as e:
            events.status("failed", f"invalid config: {e}")
            print(f"rl.train: invalid config ({e.field}): {e}", file=sys.stderr)
            return 2
        except Exception as e:  # a config check that crashed is still a failed run, not a silent one
            events.status("failed", f"could not read the config: {type(e).__name__}: {e}")
            traceback.print_exc()
            return 2
        # the plan the driver (rl/driver.py) runs: one GRPO phase, or R-Zero's phases (rl/methods/r_zero/training.py)
        plan = train_rzero if get_method(config.method).trains_in_phases else train_grpo
        try:
            state, message = run(config, run_dir, events, args.resume, plan)
        except Exception as e:  # the message goes to the dashboard; the traceback to the log and stderr
            trace = traceback.format_exc()
            print(trace, file=sys.stderr)
            events.log("error", trace[-4000:])
            events.status("failed", f"{type(e).__name__}: {e}")
            return 1
        events.status(state, message)
        return 0


if __name__ == "__main__":
    sys.exit(main())
