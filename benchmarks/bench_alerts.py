"""The alert rules judged on the labelled trajectory corpus (webapp/alerts/corpus/, docs/alert-corpus.md): each rule
with its default thresholds replayed over every run as the engine judges a live one (webapp/alerts/backtest.py).

The collapse forecast (entropy_collapse_forecast) is listed too, but judged by benchmarks/bench_forecast.py: a
warning long before an onset is its point, not a miss. For each rule: the labelled collapses it caught (opened at most 10 steps before the onset, or after it), how many
within 5 steps of the onset (issue 36's goal: all of them), the median delay after the onset, and its false alarms
on the runs labelled healthy and no learning (goal: at most 5% of them); the degeneration rule is scored on the
degenerations and against every other run. Then the runs each rule alarmed on, for reading.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_alerts.py

Exits 1 when a goal is missed (the figures are in benchmarks/RESULTS.md, misses included).
"""
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from webapp.alerts import backtest, corpus  # noqa: E402
from webapp.alerts.rule_specs import STEP_RULE_KINDS, resolve_thresholds  # noqa: E402

GOAL_FALSE_ALARMS = 0.05


def main() -> int:
    trajectories = backtest.corpus_trajectories()
    labels = Counter(t.label for t in trajectories)
    print(f"{len(trajectories)} runs: " + ", ".join(f"{n} {label}" for label, n in sorted(labels.items())))
    thresholds = resolve_thresholds()
    replayed = [(t, backtest.replay(t, thresholds)) for t in trajectories]
    scores = [*backtest.score(replayed).values(), backtest.any_collapse_rule(replayed)]
    print(f"\n{'rule':<26} {'caught':>8} {'≤5 steps':>9} {'median delay':>13} {'false alarms':>13} {'healthy':>8} "
          f"{'no learning':>12}")
    missed = []
    for s in scores:
        healthy = len(s.alarmed.get(corpus.HEALTHY, []))
        still = len(s.alarmed.get(corpus.NO_LEARNING, []))
        share = s.false_alarm_share or 0.0
        delay = "—" if s.median_delay is None else f"{s.median_delay:+g}"
        print(f"{s.rule:<26} {s.caught:>3} of {s.collapses:<3} {s.in_time:>9} {delay:>13} "
              f"{s.false_alarm_count:>4} of {s.negative_count:<3}{share:>5.0%} {healthy:>8} {still:>12}")
        if s.collapses and s.rule in (*backtest.COLLAPSE_RULES, "degeneration", "any collapse rule") and (
                s.in_time < s.collapses or share > GOAL_FALSE_ALARMS):
            missed.append(s.rule)
    print("\nalarms on runs that did not collapse:")
    for s in scores:
        for label, names in sorted(s.alarmed.items()):
            print(f"  {s.rule:<26} {label:<12} {', '.join(names)}")
    print("\ndelays after each collapse's onset (negative: before it):")
    for kind in STEP_RULE_KINDS:
        per_run = []
        for t, openings in replayed:
            if t.label == (corpus.DEGENERATION if kind == "degeneration" else corpus.COLLAPSE):
                steps = [o.step for o in openings if o.rule == kind and o.step > t.onset - backtest.EARLY]
                per_run.append(f"{t.name} {steps[0] - t.onset:+d}" if steps else f"{t.name} missed")
        if any(not entry.endswith("missed") for entry in per_run):
            print(f"  {kind}: " + "; ".join(per_run))
    if missed:
        print(f"\ngoals missed by: {', '.join(missed)} (every collapse within 5 steps, at most "
              f"{GOAL_FALSE_ALARMS:.0%} false alarms)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
