"""A miniature of EVOL-RL Figure 1 on the default policy, on CPU.

Trains TTRL and EVOL-RL with the same seed, prompts and sizes through `python -m rl.train`,
then writes, per method and step, the training-set policy entropy, mean response length,
pass@1 and pass@16 (from the held-out labels: monitoring only, never a reward) to a CSV,
and the four panels to a PNG.

    .venv/bin/pip install matplotlib     # the PNG only; not needed by the product or its tests
    .venv/bin/python scripts/experiments/figure1.py --steps 40 --out docs/experiments

Not part of `make test`: a run takes tens of minutes on 2 cores.
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

PANELS = ["entropy", "response_length/mean", "pass@1", "pass@16"]
# Small enough for a CPU, large enough for pass@16 (n_votes ≥ 16) and for the trend to show.
SIZES = {"n_votes": 16, "n_train": 8, "prompts_per_step": 4, "max_completion_length": 64, "learning_rate": 1e-4,
         "save_every": 0, "eval_every": 0}


def train(method: str, steps: int, seed: int, work: Path, extra: dict) -> list[dict]:
    run_dir = work / method
    prompts = work / "prompts.jsonl"
    config = {"method": method, "model": "default", "prompts": str(prompts), "eval_prompts": None,
              "embedding_model": None, "max_steps": steps, "seed": seed, "hyperparameters": {**SIZES, **extra}}
    config_path = work / f"{method}.json"
    config_path.write_text(json.dumps(config, indent=2))
    started = time.time()
    result = subprocess.run([sys.executable, "-m", "rl.train", "--config", str(config_path), "--out", str(run_dir)],
                            cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"{method} failed:\n{result.stderr[-3000:]}")
    print(f"{method}: {steps} steps in {time.time() - started:.0f} s", flush=True)
    return [e for e in read_events(run_dir / "events.jsonl") if e["type"] == "metrics"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts", type=int, default=32, help="held-out arithmetic problems to train on, label-free")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "experiments")
    parser.add_argument("--work", type=Path, default=None, help="run directories (default OUT/runs)")
    parser.add_argument("--plot-only", action="store_true", help="redraw the PNG from OUT/figure1.csv")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.plot_only:
        return plot(read_csv(args.out / "figure1.csv"), args.out / "figure1.png")
    work = args.work or args.out / "runs"
    work.mkdir(exist_ok=True)
    rows = [{"id": p["id"], "prompt": p["prompt"], "label": p["answer"]} for p in heldout_problems(args.prompts)]
    (work / "prompts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    series = {}
    for method, extra in (("ttrl", {}), ("evol_rl", {})):
        series[method] = train(method, args.steps, args.seed, work, extra)

    csv_path = args.out / "figure1.csv"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["method", "step", *PANELS])
        for method, events in series.items():
            for e in events:
                writer.writerow([method, e["step"], *[e["values"].get(name) for name in PANELS]])
    print(f"wrote {csv_path}")
    plot({m: [(e["step"], e["values"]) for e in events] for m, events in series.items()}, args.out / "figure1.png")


def read_csv(path: Path) -> dict:
    series = {}
    with open(path) as f:
        for row in csv.DictReader(f):
            values = {name: float(row[name]) for name in PANELS if row[name] not in ("", None)}
            series.setdefault(row["method"], []).append((int(row["step"]), values))
    return series


def plot(series: dict, png_path: Path) -> None:
    """series: method -> [(step, {metric: value})]."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no PNG (pip install matplotlib)")
        return
    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for ax, name in zip(axes, PANELS):
        for method, points in series.items():
            kept = [(step, values[name]) for step, values in points if values.get(name) is not None]
            ax.plot([s for s, _ in kept], [v for _, v in kept], label=method, alpha=0.35)
            # a 5-step moving average: per-step figures over 4 prompts are noisy
            smooth = [sum(v for _, v in kept[max(0, i - 4):i + 1]) / len(kept[max(0, i - 4):i + 1]) for i in range(len(kept))]
            ax.plot([s for s, _ in kept], smooth, color=ax.lines[-1].get_color(), linewidth=2)
        ax.set_title(name)
        ax.set_xlabel("step")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)
    print(f"wrote {png_path}")


if __name__ == "__main__":
    main()
