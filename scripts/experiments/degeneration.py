"""A run whose text degenerates, on CPU: TTRL on the default policy at a learning rate far too high (1e-2).

Its answers turn invalid within two steps, the text goes to noise (entropy up) and then to one token repeated up
to max_completion_length (entropy down to near zero): the failure the `degeneration` alert rule is for, recorded so
that tests/alerts/test_real_trajectories.py can replay it through ingestion and the alert engine.

Per step it writes to OUT/degeneration.csv the trainer's `entropy`, `response_length/mean`, `unique_answers` and
`majority_ratio`, and the health figures ingestion derives from the step's rollouts (webapp/runs/ingestion.py,
`_with_derived_health`): `invalid_ratio` (no valid answer) and `truncated_ratio` (length at
max_completion_length), computed here the same way from the run's `group` events.

    .venv/bin/python scripts/experiments/degeneration.py --out docs/experiments

About 2.5 minutes on 2 cores. Not part of `make test`.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rl.events import read_events  # noqa: E402
from rl.policy import heldout_problems  # noqa: E402

# figure1.py's sizes, with the e2e collapse test's learning rate (tests/e2e/test_team_collapse_alerts.py)
SIZES = {"n_votes": 16, "n_train": 8, "prompts_per_step": 4, "max_completion_length": 64, "learning_rate": 1e-2,
         "save_every": 0, "eval_every": 0}
LOGGED = ["entropy", "response_length/mean", "unique_answers", "majority_ratio"]
DERIVED = ["invalid_ratio", "truncated_ratio"]


def train(steps: int, seed: int, work: Path) -> Path:
    rows = [{"id": p["id"], "prompt": p["prompt"], "label": p["answer"]} for p in heldout_problems(32)]
    (work / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = {"method": "ttrl", "model": "default", "prompts": str(work / "prompts.jsonl"), "eval_prompts": None,
              "embedding_model": None, "max_steps": steps, "seed": seed, "hyperparameters": SIZES}
    (work / "config.json").write_text(json.dumps(config, indent=2))
    run_dir = work / "run"
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "rl.train", "--config", str(work / "config.json"),
                             "--out", str(run_dir)], cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"},
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"training failed:\n{result.stderr[-3000:]}")
    print(f"{steps} steps in {time.time() - started:.0f} s", flush=True)
    return run_dir / "events.jsonl"


def per_step(events: list[dict]) -> list[dict]:
    rollouts: dict[int, list[dict]] = {}
    for e in events:
        if e["type"] == "group":
            rollouts.setdefault(e["step"], []).extend(e["rollouts"])
    rows = []
    for e in events:
        if e["type"] != "metrics":
            continue
        row = {"step": e["step"], **{name: e["values"].get(name) for name in LOGGED}}
        step_rollouts = rollouts.get(e["step"], [])
        if step_rollouts:  # as ingestion derives them
            row["invalid_ratio"] = sum(not r.get("valid") for r in step_rollouts) / len(step_rollouts)
            limit = SIZES["max_completion_length"]
            row["truncated_ratio"] = sum((r.get("length") or 0) >= limit for r in step_rollouts) / len(step_rollouts)
        rows.append(row)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "experiments")
    parser.add_argument("--work", type=Path, default=None, help="the run directory's parent (default OUT/runs)")
    parser.add_argument("--events", type=Path, default=None, help="read this events.jsonl instead of training")
    args = parser.parse_args()
    if args.events is None:
        work = args.work or args.out / "runs" / "degeneration"
        work.mkdir(parents=True, exist_ok=True)
    log = args.events or train(args.steps, args.seed, work)
    rows = per_step(list(read_events(log)))
    with open(args.out / "degeneration.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["step", *LOGGED, *DERIVED])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if v is None else round(v, 6) if isinstance(v, float) else v)
                             for k, v in row.items()})
    print(f"wrote {args.out / 'degeneration.csv'} ({len(rows)} steps)")


if __name__ == "__main__":
    main()
