"""Multi-node training through Slurm (rl/launch.py::slurm_command): the command's shape, and the command
itself run where no cluster exists, with stand-ins for `srun` (one task per "node", each on this machine
with its SLURM_NODEID, as Slurm would start them), `scontrol` (the allocation's first node is this one)
and the interpreter (which records what each node's task was asked to run)."""
import os
import stat
import subprocess

import pytest

from rl.launch import trainer_command

SRUN = """#!/bin/bash
# Stand-in for Slurm's srun: --nodes=N, then `bash -c SCRIPT`; one task per node, here.
nodes=1
while [ $# -gt 0 ]; do
  case "$1" in
    --nodes=*) nodes="${1#--nodes=}"; shift ;;
    --*) shift ;;
    *) break ;;
  esac
done
pids=()
for ((i = 0; i < nodes; i++)); do
  SLURM_NODEID=$i SLURM_PROCID=$i SLURM_JOB_NODELIST="node[0-$((nodes - 1))]" "$@" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=$?; done
exit $status
"""
SCONTROL = """#!/bin/bash
# Stand-in for `scontrol show hostnames LIST`: every node is this machine.
echo 127.0.0.1
echo 127.0.0.1
"""


def test_the_command_starts_one_accelerate_launch_per_node_with_slurms_node_rank():
    command = trainer_command("c.json", "run dir", resume=True, gpus=4, python="py", nodes=2, launcher="slurm")
    assert command[:5] == ["srun", "--nodes=2", "--ntasks=2", "--ntasks-per-node=1", "--gpus-per-node=4"]
    assert command[-3:-1] == ["bash", "-c"]
    script = command[-1]
    assert 'scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1' in script
    for part in ('--num_machines 2 --num_processes 8 --machine_rank "$SLURM_NODEID"',
                 '--main_process_ip "$EVOLAB_MAIN_NODE"', "-m rl.train --config c.json --out 'run dir' --resume"):
        assert part in script


def test_several_nodes_need_the_slurm_launcher():
    with pytest.raises(ValueError, match="launcher='slurm'"):
        trainer_command("c.json", "run", gpus=1, nodes=2)


PYTHON = """#!/bin/bash
# Stand-in for the trainer's interpreter: records, per node, the command line it was given.
printf '%s\\n' "$@" > "$RECORD_DIR/node-$SLURM_NODEID.args"
"""


def test_srun_starts_one_launch_per_node_with_its_rank_and_the_first_nodes_address(tmp_path):
    """The command itself, run through stand-ins: each node's task gets its own machine rank, every task
    the allocation's first node as the main process, and the trainer's arguments arrive intact.
    (accelerate's CPU backend cannot join processes of two machines, so a real two-node training run
    needs GPUs: the DeepSpeed configs launch through torch.distributed, which ranks them.)"""
    shims = tmp_path / "bin"
    shims.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL), ("python", PYTHON)):
        (shims / name).write_text(text)
        (shims / name).chmod((shims / name).stat().st_mode | stat.S_IEXEC)
    records = tmp_path / "records"
    records.mkdir()
    out = tmp_path / "run dir with a space"
    command = trainer_command("config.json", out, resume=True, gpus=2, python=str(shims / "python"), nodes=2,
                              launcher="slurm")
    result = subprocess.run(command, capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{shims}:{os.environ['PATH']}", "RECORD_DIR": str(records)})
    assert result.returncode == 0, result.stderr
    for node in (0, 1):
        argv = (records / f"node-{node}.args").read_text().splitlines()
        assert argv[argv.index("--machine_rank") + 1] == str(node)
        assert argv[argv.index("--main_process_ip") + 1] == "127.0.0.1"
        assert argv[argv.index("--num_machines") + 1] == "2" and argv[argv.index("--num_processes") + 1] == "4"
        assert argv[-6:] == ["rl.train", "--config", "config.json", "--out", str(out), "--resume"]
