"""EVOL-RL's mechanism in miniature, on CPU: TTRL, EVOL-RL and EVOL-RL without novelty on the template policy.

The template policy (rl/assets/template_policy/, scripts/train_template_policy.py) solves each three-step word
problem with one of three solution templates ("chain", "running", "grouped"; scripts/experiments/templates.py),
about a third each, at pass@1 ≈ 0.25 (temperature 1). Each arm trains it label-free through `python -m rl.train`
on the same held-out problems, with the same sizes and seeds, and the trainer's own periodic evaluation
(`eval_prompts`, eval_every, eval_samples) scores it on a fixed labelled set it never trains on.

Per arm, seed and step it writes to OUT/mechanism.csv:
- the template diversity of the step's training rollouts, read from the run's `group` events with
  `template_of`: `template_entropy` (bits, log2 3 ≈ 1.58 when the three are equally used, 0 when one is left),
  `templates_per_group` (distinct templates among a prompt's rollouts, 1..3) and `dominant_share`;
- the training metrics `entropy` (policy entropy) and `response_length/mean`, and from the training prompts'
  held-out labels `unique_answers`, `majority_ratio`, `label_accuracy` and `reward_accuracy`;
- on evaluation steps, the eval set's `pass@1`, `pass@16` and `maj@16`;
and draws OUT/mechanism.png (mean over seeds, with the seeds' min..max as a band) and prints the table for
docs/experiments.md.

    .venv/bin/pip install matplotlib     # the PNG only; not needed by the product or its tests
    .venv/bin/python scripts/experiments/mechanism.py --out docs/experiments

Not part of `make test`: the nine runs took 49 minutes on 2 cores (two at a time, one thread each).
A run whose event log already ends in `succeeded` is read, not trained again, so an interrupted experiment goes
on where it stopped.
"""
import argparse
import csv
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from rl.events import read_events  # noqa: E402
from scripts.experiments.templates import (TEMPLATE_POLICY_DIR, TEMPLATES, heldout_template_problems,  # noqa: E402
                                           template_of)

ARMS = {  # name -> (method, hyperparameters over SIZES)
    "TTRL": ("ttrl", {}),
    "EVOL-RL": ("evol_rl", {}),
    "EVOL-RL −novelty": ("evol_rl", {"use_novelty": False}),  # the "−Novelty Reward" ablation, EVOL-RL arXiv Table 4
}
# Small enough for a CPU; the same for every arm. Everything else is each method's default (TTRL and EVOL-RL:
# temperature 1, loss_type grpo, the cosine schedule; EVOL-RL: α 0.5, entropy_coef 0.003, epsilon_high 0.28), and
# the evaluation is EVOL-RL's protocol (temperature 0.6, top_p 0.95, pass@16 from 32 samples).
SIZES = {"n_votes": 16, "n_train": 8, "prompts_per_step": 4, "prompts_per_update": 1, "max_completion_length": 64,
         "learning_rate": 1e-5, "save_every": 0, "eval_samples": 32}
# the label monitor's figures over the step's training prompts (labels for monitoring only, never a reward)
TRAIN_METRICS = ["entropy", "response_length/mean", "unique_answers", "majority_ratio", "label_accuracy",
                 "reward_accuracy"]
EVAL_METRICS = ["pass@1", "pass@16", "maj@16"]
TEMPLATE_METRICS = ["template_entropy", "templates_per_group", "dominant_share"]
COLUMNS = TEMPLATE_METRICS + TRAIN_METRICS + EVAL_METRICS


def template_diversity(groups: list[dict]) -> dict[str, float]:
    """The template metrics of one step's `group` events (every rollout, trained or not)."""
    per_group = [[template_of(r["text"]) for r in g["rollouts"]] for g in groups]
    counts = Counter(t for names in per_group for t in names)
    total = sum(counts.values())
    shares = [counts[t] / total for t in TEMPLATES if counts[t]]
    return {
        # Shannon entropy of the step's template shares; a rollout with no template counts in the total only
        "template_entropy": -sum(p * math.log2(p) for p in shares),
        "templates_per_group": statistics.mean(len({t for t in names if t}) for names in per_group),
        "dominant_share": max((counts[t] for t in TEMPLATES), default=0) / total,
    }


def write_jsonl(path: Path, problems: list[dict]) -> None:
    path.write_text("".join(json.dumps({"id": p["id"], "prompt": p["prompt"], "label": p["answer"]}) + "\n"
                            for p in problems))


def is_finished(run_dir: Path) -> bool:
    events = run_dir / "events.jsonl"
    if not events.exists():
        return False
    statuses = [e["state"] for e in read_events(events) if e["type"] == "status"]
    return bool(statuses) and statuses[-1] == "succeeded"


def train(arm: str, seed: int, args, work: Path, threads: int, model: str = str(TEMPLATE_POLICY_DIR),
          sizes: dict = SIZES) -> Path:
    """Train one arm's seed with rl.train (a finished run in `work` is read again, not retrained): `model` and
    `sizes` are this experiment's unless another experiment (novelty.py) gives its own."""
    method, extra = ARMS[arm]
    name = f"{method}{'-no-novelty' if extra else ''}-seed{seed}"
    run_dir = work / name
    if is_finished(run_dir):
        print(f"{name}: finished earlier, read from {run_dir}", flush=True)
        return run_dir
    config = {"method": method, "model": model, "prompts": str(work / "train.jsonl"),
              "eval_prompts": str(work / "eval.jsonl"), "embedding_model": None, "max_steps": args.steps,
              "seed": seed, "hyperparameters": {**sizes, "eval_every": args.eval_every, **getattr(args, "set", {}),
                                                **extra}}
    config_path = work / f"{name}.json"
    config_path.write_text(json.dumps(config, indent=2))
    if run_dir.exists():  # an unfinished run: train it again from the start
        shutil.rmtree(run_dir)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "rl.train", "--config", str(config_path), "--out", str(run_dir)],
                            cwd=ROOT, env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed:\n{result.stderr[-3000:]}")
    print(f"{name}: {args.steps} steps in {time.time() - started:.0f} s", flush=True)
    return run_dir


def rows_of(arm: str, seed: int, run_dir: Path) -> list[dict]:
    """One row per step (and step 0, the evaluation before training) of a finished run."""
    events = read_events(run_dir / "events.jsonl")
    rows: dict[int, dict] = {}
    groups: dict[int, list[dict]] = {}
    for e in events:
        if e["type"] == "metrics":
            rows.setdefault(e["step"], {}).update({m: e["values"].get(m) for m in TRAIN_METRICS})
        elif e["type"] == "eval":
            rows.setdefault(e["step"], {}).update({m: e["values"].get(m) for m in EVAL_METRICS})
        elif e["type"] == "group":
            groups.setdefault(e["step"], []).append(e)
    for step, step_groups in groups.items():
        rows.setdefault(step, {}).update(template_diversity(step_groups))
    return [{"arm": arm, "seed": seed, "step": step, **values} for step, values in sorted(rows.items())]


def read_csv(path: Path) -> list[dict]:
    with open(path) as f:
        return [{"arm": r["arm"], "seed": int(r["seed"]), "step": int(r["step"]),
                 **{c: float(r[c]) for c in COLUMNS if r.get(c) not in ("", None)}} for r in csv.DictReader(f)]


def by_arm_seed(rows: list[dict]) -> dict[str, dict[int, list[dict]]]:
    out: dict[str, dict[int, list[dict]]] = {}
    for r in rows:
        out.setdefault(r["arm"], {}).setdefault(r["seed"], []).append(r)
    return out


def window_mean(rows: list[dict], metric: str, first: int, last: int) -> float | None:
    values = [r[metric] for r in rows if first <= r["step"] <= last and r.get(metric) is not None]
    return statistics.mean(values) if values else None


def spread(values: list[float]) -> str:
    """'mean ± sd (n seeds)' over the seeds' values."""
    values = [v for v in values if v is not None]
    if not values:
        return "–"
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def table(rows: list[dict], steps: int, window: int = 5) -> str:
    """Markdown: each metric at the start and the end, mean ± sd over seeds (training metrics over `window`
    steps; the evaluation before training and at the last step)."""
    lines = ["| arm | template entropy (bits) | templates per group | policy entropy | eval pass@1 | "
             "eval pass@16 | eval maj@16 |",
             "|---|---|---|---|---|---|---|"]
    late = (steps - window + 1, steps)
    for arm, seeds in by_arm_seed(rows).items():
        cells = []
        for metric in ("template_entropy", "templates_per_group", "entropy"):
            start = spread([window_mean(r, metric, 1, window) for r in seeds.values()])
            end = spread([window_mean(r, metric, *late) for r in seeds.values()])
            cells.append(f"{start} → {end}")
        for metric in EVAL_METRICS:
            start = spread([window_mean(r, metric, 0, 0) for r in seeds.values()])
            end = spread([window_mean(r, metric, steps, steps) for r in seeds.values()])
            cells.append(f"{start} → {end}")
        lines.append(f"| {arm} ({len(seeds)} seeds) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@dataclass
class Panel:
    """One chart of an experiment's figure: a CSV column, its title, and whether its per-step values are smoothed
    (a training figure over 4 prompts a step is noisy) or marked (an evaluation, every few steps)."""

    metric: str
    title: str
    smoothed: bool = True
    marked: bool = False
    decorate: object = None  # called with the axes, for a panel's own reference lines and range


def plot_arms(rows: list[dict], png_path: Path, panels: list[Panel], shape: tuple[int, int], figsize, dpi: int,
              smooth: int = 5) -> None:
    """Each panel's metric per arm: the seeds' mean as a line, their range as a band."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG (pip install matplotlib)")
        return
    fig, axes = plt.subplots(*shape, figsize=figsize, squeeze=False)
    for ax, panel in zip(axes.flat, panels):
        for arm, seeds in by_arm_seed(rows).items():
            curves = {}
            for seed, seed_rows in seeds.items():
                points = [(r["step"], r[panel.metric]) for r in seed_rows if r.get(panel.metric) is not None]
                if panel.smoothed:
                    points = [(s, statistics.mean(v for _, v in points[max(0, i - smooth + 1):i + 1]))
                              for i, (s, _) in enumerate(points)]
                curves[seed] = dict(points)
            steps = sorted(set.intersection(*(set(c) for c in curves.values())))
            per_step = [[c[s] for c in curves.values()] for s in steps]
            line, = ax.plot(steps, [statistics.mean(v) for v in per_step], label=arm, linewidth=2,
                            marker="o" if panel.marked else None)
            ax.fill_between(steps, [min(v) for v in per_step], [max(v) for v in per_step],
                            color=line.get_color(), alpha=0.2)
        ax.set_title(panel.title)
        ax.set_xlabel("step")
        if panel.decorate:
            panel.decorate(ax)
    axes.flat[0].legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=dpi)
    print(f"wrote {png_path}")


def _template_entropy_range(ax) -> None:
    """The whole range, so noise does not look like a trend."""
    ax.axhline(math.log2(len(TEMPLATES)), color="grey", linestyle="--", linewidth=1)
    ax.set_ylim(0, 1.7)


PANELS = [Panel("template_entropy", "template entropy of the rollouts (bits)", decorate=_template_entropy_range),
          Panel("entropy", "policy entropy"),
          Panel("pass@1", "eval pass@1", smoothed=False, marked=True),
          Panel("pass@16", "eval pass@16", smoothed=False, marked=True)]


def plot(rows: list[dict], png_path: Path) -> None:
    plot_arms(rows, png_path, PANELS, (1, len(PANELS)), (18, 4), dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    parser.add_argument("--train-prompts", type=int, default=64, help="held-out problems trained on, label-free")
    parser.add_argument("--eval-prompts", type=int, default=32, help="further held-out problems, evaluated only")
    parser.add_argument("--eval-every", type=int, default=25)
    parser.add_argument("--set", nargs="*", default=[], metavar="NAME=JSON",
                        help="hyperparameters over SIZES for every arm, e.g. learning_rate=3e-5")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time, each on cores/jobs threads")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "experiments")
    parser.add_argument("--work", type=Path, default=None, help="run directories (default OUT/mechanism-runs)")
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNG and table from OUT/mechanism.csv")
    args = parser.parse_args()
    args.set = {name: json.loads(value) for name, value in (item.split("=", 1) for item in args.set)}
    args.out.mkdir(parents=True, exist_ok=True)
    csv_path = args.out / "mechanism.csv"
    if args.plot_only:
        rows = read_csv(csv_path)
        print(table(rows, max(r["step"] for r in rows)))
        return plot(rows, args.out / "mechanism.png")

    work = args.work or args.out / "mechanism-runs"
    work.mkdir(parents=True, exist_ok=True)
    problems = heldout_template_problems(args.train_prompts + args.eval_prompts)
    write_jsonl(work / "train.jsonl", problems[:args.train_prompts])
    write_jsonl(work / "eval.jsonl", problems[args.train_prompts:])  # disjoint from the training prompts

    threads = max(1, (os.cpu_count() or 1) // args.jobs)
    runs = [(arm, seed) for seed in args.seeds for arm in args.arms]
    started = time.time()
    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        run_dirs = list(pool.map(lambda run: train(*run, args, work, threads), runs))
    print(f"{len(runs)} runs in {time.time() - started:.0f} s", flush=True)

    rows = [row for (arm, seed), run_dir in zip(runs, run_dirs) for row in rows_of(arm, seed, run_dir)]
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["arm", "seed", "step", *COLUMNS])
        writer.writeheader()
        for row in rows:
            writer.writerow({k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()})
    print(f"wrote {csv_path}")
    print(table(rows, args.steps))
    plot(rows, args.out / "mechanism.png")


if __name__ == "__main__":
    main()
