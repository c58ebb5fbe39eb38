"""The `evolab` command.

    evolab sync verl DIR --run RUN     follow verl's rollout dumps (trainer.rollout_data_dir=DIR) into a run

RUN is Evolab's run id, MLflow's run id, or EXPERIMENT/RUN_NAME (verl's trainer.project_name /
trainer.experiment_name when verl logs to Evolab through MLflow), TEAM/EXPERIMENT/RUN_NAME when another of your
teams has a run of that name: the command waits for that run to appear.
`--create NAME` makes a new run instead, for a trainer that reports no metrics. EVOLAB_URL and EVOLAB_TOKEN
say where and as whom.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time

from .client import Evolab, EvolabError
from .verl import VerlSync


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="evolab", description="Report runs trained elsewhere to Evolab.")
    commands = parser.add_subparsers(dest="command", required=True)
    sync = commands.add_parser("sync", help="send a trainer's rollout dumps to a run, and keep sending")
    sources = sync.add_subparsers(dest="source", required=True)
    verl = sources.add_parser("verl", help="verl's trainer.rollout_data_dir ({step}.jsonl files)")
    verl.add_argument("directory", help="the dump folder (trainer.rollout_data_dir)")
    which = verl.add_mutually_exclusive_group(required=True)
    which.add_argument("--run", help="Evolab run id, MLflow run id, or [TEAM/]EXPERIMENT/RUN_NAME")
    which.add_argument("--create", metavar="NAME", help="create a new run of this name and send to it")
    verl.add_argument("--experiment", help="with --create: the experiment (TEAM/NAME when you are in several teams)")
    verl.add_argument("--answer-rule", help="how answers are read: boxed (default), answer_tag, gsm8k or a method name")
    verl.add_argument("--once", action="store_true", help="send what is there and exit instead of following")
    verl.add_argument("--state", help="where the position is kept (default DIR/.evolab-sync-RUN.json)")
    verl.add_argument("--poll", type=float, default=2.0, help="seconds between looks at the folder (default 2)")
    verl.add_argument("--batch", type=int, default=1000, help="rollouts per request (default 1000)")
    verl.add_argument("--url", help="Evolab's address (default: EVOLAB_URL)")
    verl.add_argument("--token", help="API token (default: EVOLAB_TOKEN)")
    args = parser.parse_args(argv)
    # stopped by a process manager (SIGTERM) as by Ctrl-C: the position is on disk after every batch either way
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        client = Evolab(url=args.url, token=args.token, retry_for=None)
        return _sync_verl(client, args)
    except ValueError as exc:  # a missing setting, a run name in several teams (AmbiguousRun)
        print(f"evolab: {exc}", file=sys.stderr)
        return 2
    except EvolabError as exc:
        print(f"evolab: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("evolab: stopped", file=sys.stderr)
        return 130


def _interrupted(signum, frame):
    raise KeyboardInterrupt


def _sync_verl(client: Evolab, args) -> int:
    if args.create:
        run = client.create_run(args.create, experiment=args.experiment, tags={"evolab.trainer": "verl"})
        print(f"evolab: created run {run.id} ({run.name}): {client.url}/runs/{run.id}/", flush=True)
    else:
        run = client.find_run(args.run)
        if run is None and args.once:
            print(f"evolab: no run {args.run!r}", file=sys.stderr)
            return 1
        if run is None:
            print(f"evolab: waiting for run {args.run!r} to appear...", flush=True)
            while run is None:
                time.sleep(5)
                run = client.find_run(args.run)
    if args.answer_rule:
        client.set_tags(run.mlflow_run_id, {"evolab.answer_rule": args.answer_rule})
    sync = VerlSync(client, run, args.directory, state_path=args.state, batch_lines=args.batch,
                    poll_seconds=args.poll, log=lambda m: print(m, flush=True))
    print(f"evolab: sending {args.directory} to run {run.id} ({run.name}); position kept in {sync.state_path}", flush=True)
    if args.once:
        sync.sync_once(final=True)
    else:
        sync.follow()
    print(f"evolab: {sync.sent} rollouts sent", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
