"""Does EVOL-RL's novelty prevent the Figure 1 collapse? TTRL, EVOL-RL and EVOL-RL without novelty × 3 seeds, on CPU.

The setting is the Figure 1 miniature's (docs/experiments.md; scripts/experiments/figure1.py), where TTRL does
collapse: the default policy, 32 held-out arithmetic problems trained on label-free, n_votes 16, n_train 8,
prompts_per_step 4, prompts_per_update 1, 64 tokens, learning rate 1e-4 on the papers' cosine schedule, 40 steps.
Everything else is each method's default, and the loss each arm used is read back from the method's resolved
hyperparameters into the CSV. Added to Figure 1's setting: the trainer's own periodic evaluation (`eval_prompts`,
EVOL-RL's protocol: 32 samples at temperature 0.6) every 10 steps on 32 further held-out problems it never trains
on, because the training prompts' pass@k moves in steps of 1/4.

Per arm, seed and step it writes OUT/novelty.csv:
- from the step's `metrics` event: `entropy`, `response_length/mean`, and the label monitor's figures over the
  step's training prompts (labels used for monitoring only, never in a reward): `pass@1`, `pass@16`,
  `unique_answers` (distinct answers per group), `majority_ratio`, `label_accuracy` (the vote is right) and
  `reward_accuracy` (a rollout's label-free reward agrees with the label's);
- on evaluation steps (0 is before training): `eval_pass@1`, `eval_pass@16`, `eval_maj@16`;
and draws OUT/novelty.png and prints the table for docs/experiments.md.

    .venv/bin/pip install matplotlib     # the PNG only; not needed by the product or its tests
    .venv/bin/python scripts/experiments/novelty.py --out docs/experiments
    .venv/bin/python scripts/experiments/novelty.py --out docs/experiments --plot-only   # table and PNG from the CSV

Not part of `make test`. A run whose event log already ends in `succeeded` is read, not trained again.
"""
import argparse
import csv
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rl.events import read_events  # noqa: E402
from rl.methods import validate_hyperparameters  # noqa: E402
from rl.policy import heldout_problems  # noqa: E402
from scripts.experiments.corpus import FIGURE1  # noqa: E402
from scripts.experiments import mechanism  # noqa: E402
from scripts.experiments.mechanism import ARMS, Panel, by_arm_seed, plot_arms, window_mean, write_jsonl  # noqa: E402

SIZES = {**FIGURE1, "prompts_per_update": 1, "learning_rate": 1e-4, "eval_samples": 32}
TRAIN_METRICS = ["entropy", "response_length/mean", "pass@1", "pass@16", "unique_answers", "majority_ratio",
                 "label_accuracy", "reward_accuracy"]
EVAL_METRICS = ["pass@1", "pass@16", "maj@16"]
COLUMNS = TRAIN_METRICS + [f"eval_{m}" for m in EVAL_METRICS]
PANELS = [Panel("entropy", "policy entropy"), Panel("pass@1", "pass@1 (training prompts)"),
          Panel("pass@16", "pass@16 (training prompts)"), Panel("unique_answers", "distinct answers per group"),
          Panel("label_accuracy", "label accuracy of the vote"),
          Panel("eval_pass@16", "eval pass@16 (held-out)", smoothed=False, marked=True)]


def arm_hyperparameters(arm: str, eval_every: int) -> dict:
    method, extra = ARMS[arm]
    return validate_hyperparameters(method, {**SIZES, "eval_every": eval_every, **extra})


def train(arm: str, seed: int, args, work: Path, threads: int) -> Path:
    return mechanism.train(arm, seed, args, work, threads, model="default", sizes=SIZES)


def rows_of(arm: str, seed: int, run_dir: Path, loss_type: str) -> list[dict]:
    """One row per step (and step 0, the evaluation before training) of a finished run."""
    rows: dict[int, dict] = {}
    for e in read_events(run_dir / "events.jsonl"):
        if e["type"] == "metrics":
            rows.setdefault(e["step"], {}).update({m: e["values"].get(m) for m in TRAIN_METRICS})
        elif e["type"] == "eval":
            rows.setdefault(e["step"], {}).update({f"eval_{m}": e["values"].get(m) for m in EVAL_METRICS})
    return [{"arm": arm, "loss_type": loss_type, "seed": seed, "step": step, **values}
            for step, values in sorted(rows.items())]


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return [{"arm": r["arm"], "loss_type": r["loss_type"], "seed": int(r["seed"]), "step": int(r["step"]),
                 **{c: float(r[c]) for c in COLUMNS if r.get(c) not in ("", None)}} for r in csv.DictReader(f)]


def cell(values: list[float | None]) -> str:
    """'mean (min..max)' over the seeds, so a claim about every seed can be read off the table."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    return f"{statistics.mean(values):.3f} ({min(values):.3f}..{max(values):.3f})"


def table(rows: list[dict], steps: int, window: int = 5) -> str:
    """Markdown: each training metric over steps 1..window and the last `window` steps, each evaluation before
    training and at the last step; mean over seeds with the seeds' range."""
    training = ["entropy", "pass@1", "pass@16", "unique_answers", "majority_ratio", "label_accuracy", "reward_accuracy"]
    evals = ["eval_pass@1", "eval_pass@16", "eval_maj@16"]
    lines = ["| arm (loss) | " + " | ".join(training + evals) + " |", "|---" * (1 + len(training) + len(evals)) + "|"]
    late = (steps - window + 1, steps)
    for arm, seeds in by_arm_seed(rows).items():
        loss = next(iter(seeds.values()))[0]["loss_type"]
        cells = [f"{cell([window_mean(r, m, 1, window) for r in seeds.values()])} → "
                 f"{cell([window_mean(r, m, *late) for r in seeds.values()])}" for m in training]
        cells += [f"{cell([window_mean(r, m, 0, 0) for r in seeds.values()])} → "
                  f"{cell([window_mean(r, m, steps, steps) for r in seeds.values()])}" for m in evals]
        lines.append(f"| {arm} ({loss}, {len(seeds)} seeds) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def per_seed(rows: list[dict], steps: int, window: int = 5) -> str:
    """Per arm and seed: entropy and training pass@16 early and late, eval pass@16 at the end."""
    lines = []
    late = (steps - window + 1, steps)
    for arm, seeds in by_arm_seed(rows).items():
        parts = []
        for seed, r in sorted(seeds.items()):
            parts.append(f"seed {seed}: entropy {window_mean(r, 'entropy', 1, window):.3f} → "
                         f"{window_mean(r, 'entropy', *late):.3f}, pass@16 {window_mean(r, 'pass@16', 1, window):.2f}"
                         f" → {window_mean(r, 'pass@16', *late):.2f}, eval pass@16 "
                         f"{window_mean(r, 'eval_pass@16', 0, 0):.2f} → {window_mean(r, 'eval_pass@16', steps, steps):.2f}")
        lines.append(f"- {arm}: " + "; ".join(parts) + ".")
    return "\n".join(lines)


def plot(rows: list[dict], png_path: Path) -> None:
    plot_arms(rows, png_path, PANELS, (2, 3), (16, 7.5), dpi=100)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, each on cores/jobs threads")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "experiments")
    parser.add_argument("--work", type=Path, default=None, help="run directories (default OUT/novelty-runs)")
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNG and table from OUT/novelty.csv")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "novelty.csv"
    if args.plot_only:
        rows = read_csv(csv_path)
        steps = max(r["step"] for r in rows)
        print(table(rows, steps), per_seed(rows, steps), sep="\n\n")
        return plot(rows, args.out / "novelty.png")

    work = args.work or args.out / "novelty-runs"
    work.mkdir(parents=True, exist_ok=True)
    problems = [{"id": p["id"], "prompt": p["prompt"], "answer": p["answer"]} for p in heldout_problems(64)]
    write_jsonl(work / "train.jsonl", problems[:32])  # Figure 1's 32 training problems
    write_jsonl(work / "eval.jsonl", problems[32:])   # disjoint from them

    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    runs = [(arm, seed) for seed in args.seeds for arm in args.arms]
    started = time.time()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        run_dirs = list(pool.map(lambda run: train(*run, args, work, threads), runs))
    print(f"{len(runs)} runs in {time.time() - started:.0f} s", flush=True)

    rows = [row for (arm, seed), run_dir in zip(runs, run_dirs)
            for row in rows_of(arm, seed, run_dir, arm_hyperparameters(arm, args.eval_every)["loss_type"])]
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["arm", "loss_type", "seed", "step", *COLUMNS])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    print(f"wrote {csv_path}")
    print(table(rows, args.steps), per_seed(rows, args.steps), sep="\n\n")
    plot(rows, args.out / "novelty.png")


if __name__ == "__main__":
    main()
