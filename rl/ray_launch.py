"""`python -m rl.ray_launch --nodes N --gpus G ...`: a run of several nodes inside its Ray job (DESIGN §4.9).

The job's entrypoint (rl.launch.ray_entrypoint) runs this on one node of the cluster. It reserves one bundle
per node (a placement group, STRICT_SPREAD: each bundle on another node, its CPU and GPUs), asks the first
bundle's node for its address and a free port there, and starts one node launcher per bundle as a Ray task (rl.launch.node_command:
`accelerate launch` with GPUs, `torch.distributed.run` on CPUs), each told its node's rank and that address.
It ends with the worst exit code of its nodes. Ray's stop of the job reaches this process as SIGTERM: each
node's trainer gets SIGTERM too, so it checkpoints after its step as a cancel asks; a trainer whose task dies
is sent SIGTERM by the kernel (PR_SET_PDEATHSIG), so none trains on unwatched.
"""
from __future__ import annotations

import argparse
import ctypes
import os
import signal
import socket
import subprocess
import sys

import ray
from ray.util.placement_group import placement_group
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from rl.launch import RESUME_VARIABLE, node_command

PLACEMENT_TIMEOUT_S = 600
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@ray.remote
def main_endpoint() -> tuple[str, int]:
    """The first node's address and a port free there for the main process (every node is told both): a fixed
    port would clash with another run's on a shared node."""
    with socket.socket() as probe:
        probe.bind(("", 0))
        return ray.util.get_node_ip_address(), probe.getsockname()[1]


@ray.remote
def node_launcher(argv: list[str], env: dict) -> int:
    """One node's launcher; a cancel of this task (the job stopped) is a SIGTERM to it and its trainer."""
    child = subprocess.Popen(argv, env={**os.environ, **env}, preexec_fn=_die_with_parent)
    try:
        return child.wait()
    except (KeyboardInterrupt, SystemExit):
        child.send_signal(signal.SIGTERM)
        return child.wait()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.ray_launch")
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--zero-stage", type=int, default=2)
    parser.add_argument("--accelerate-config")
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)

    ray.init(address="auto", log_to_driver=True)
    bundle = {"CPU": 1, **({"GPU": args.gpus} if args.gpus else {})}
    group = placement_group([dict(bundle) for _ in range(args.nodes)], strategy="STRICT_SPREAD")
    ray.get(group.ready(), timeout=PLACEMENT_TIMEOUT_S)

    def on(index):
        return PlacementGroupSchedulingStrategy(placement_group=group, placement_group_bundle_index=index)

    main_address, main_port = ray.get(main_endpoint.options(num_cpus=0, scheduling_strategy=on(0)).remote())
    env = {RESUME_VARIABLE: "--resume" if args.resume else ""}
    tasks = []
    for rank in range(args.nodes):
        command = node_command(args.python, args.config, args.out, args.nodes, args.gpus, str(rank), main_address,
                               str(main_port), args.zero_stage, args.accelerate_config)
        command += ["--resume"] if args.resume else []
        tasks.append(node_launcher.options(num_cpus=1, num_gpus=args.gpus, scheduling_strategy=on(rank))
                     .remote(command, env))

    def stop(signum, frame):
        for task in tasks:
            ray.cancel(task, force=False)

    signal.signal(signal.SIGTERM, stop)
    codes = []
    for task in tasks:
        try:
            codes.append(ray.get(task))
        except (ray.exceptions.TaskCancelledError, ray.exceptions.RayTaskError) as exc:
            print(f"rl.ray_launch: a node's launcher ended with {exc}", file=sys.stderr, flush=True)
            codes.append(1)
    return max(codes, key=abs) if codes else 1


if __name__ == "__main__":
    sys.exit(main())
