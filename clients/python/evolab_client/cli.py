"""The `evolab` command.

    evolab sync verl DIR --run RUN     follow verl's rollout dumps (trainer.rollout_data_dir=DIR) into a run
    evolab sync wandb DIR              follow a W&B run folder (wandb/run-...) into a run, or import it (--once)
    evolab sync tensorboard DIR        the same for a TensorBoard log folder (events.out.tfevents.* files)
    evolab sync wandb DIR --all        import every run folder under DIR (an archive)
    evolab sync trackio DIR            a run of Trackio's databases (TRACKIO_DIR/PROJECT.db); --all: every run

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
from .metric_sync import SOURCES, MetricSync, run_folders, trackio_runs
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
    for name, what in (("wandb", "a W&B run folder (wandb/run-..., online or offline), its run-*.wandb file"),
                       ("tensorboard", "a TensorBoard log folder, its events.out.tfevents.* files"),
                       ("trackio", "Trackio's folder (TRACKIO_DIR), a PROJECT.db SQLite database per project")):
        logger = sources.add_parser(name, help=what)
        if name == "trackio":
            logger.add_argument("--project", help="only this project's database (PROJECT.db)")
            logger.add_argument("--trackio-run", help="only the run of this name (or Trackio run id)")
        logger.add_argument("directory", help="the run folder (or, with --all, a folder of run folders)")
        logger.add_argument("--run", help="send to this existing run (Evolab run id, MLflow run id, or "
                            "[TEAM/]EXPERIMENT/RUN_NAME) instead of creating one")
        logger.add_argument("--experiment", help="the new run's experiment (TEAM/NAME when you are in several "
                            "teams); default: W&B's project, else Default")
        logger.add_argument("--name", help="the new run's name (default: W&B's run name, else the folder's)")
        logger.add_argument("--trainer", choices=("verl", "trl", "openrlhf"),
                            help="whose metric names these are (default: told by the names)")
        logger.add_argument("--all", action="store_true", help="import every run folder under DIR, one run each")
        logger.add_argument("--once", action="store_true", help="import what is there and exit instead of "
                            "following: the run ends as the files say (TensorBoard's files never say: finished)")
        logger.add_argument("--state", help="where the position is kept (default DIR/.evolab-sync.json)")
        logger.add_argument("--poll", type=float, default=0.2, help="seconds between looks at the files (default 0.2)")
        logger.add_argument("--url", help="Evolab's address (default: EVOLAB_URL)")
        logger.add_argument("--token", help="API token (default: EVOLAB_TOKEN)")
    args = parser.parse_args(argv)
    # stopped by a process manager (SIGTERM) as by Ctrl-C: the position is on disk after every batch either way
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        client = Evolab(url=args.url, token=args.token, retry_for=None)
        return _sync_verl(client, args) if args.source == "verl" else _sync_logger(client, args)
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


def _sync_logger(client: Evolab, args) -> int:
    if args.source == "trackio":
        sources = [s for s in trackio_runs(args.directory)
                   if (not args.project or s.database.stem == args.project)
                   and (not args.trackio_run or args.trackio_run in (s.trackio_run["name"], s.trackio_run["id"]))]
        if not sources:
            print(f"evolab: no Trackio run in {args.directory} (PROJECT.db files) matches", file=sys.stderr)
            return 1
        if len(sources) > 1 and not args.all:
            names = ", ".join(f"{s.database.stem}/{s.trackio_run['name']}" for s in sources)
            print(f"evolab: {len(sources)} Trackio runs there ({names}): name one with --project and --trackio-run, "
                  "or import them all with --all", file=sys.stderr)
            return 2
    elif args.all:
        sources = [SOURCES[args.source](folder) for folder in run_folders(args.directory, args.source)]
        if not sources:
            print(f"evolab: no {args.source} run folder under {args.directory}", file=sys.stderr)
            return 1
    else:
        sources = [SOURCES[args.source](args.directory)]
    if args.all and (args.run or args.name or args.state):
        print("evolab: --all makes one run per folder: --run, --name and --state name one", file=sys.stderr)
        return 2
    for source in sources:
        _sync_source(client, args, source, once=args.once or args.all)
    if args.all:
        print(f"evolab: {len(sources)} runs imported", flush=True)
    return 0


def _sync_source(client: Evolab, args, source, once: bool) -> None:
    sync = MetricSync(client, source, run=args.run, experiment=args.experiment, name=args.name, trainer=args.trainer,
                      state_path=args.state, poll_seconds=args.poll, log=lambda m: print(m, flush=True))
    print(f"evolab: reading {source.directory}; position kept in {sync.state_path}", flush=True)
    if once:
        sync.sync_once()
        # the files' own end, when they record one, was read; otherwise an import ends the run as finished
        sync.finish("KILLED" if source.ends_itself else "FINISHED")
    else:
        sync.follow()
    print(sync.summary(), flush=True)


if __name__ == "__main__":
    sys.exit(main())
