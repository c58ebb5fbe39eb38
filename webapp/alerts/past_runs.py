"""The Django side of the backtest (backtest.py): a team's past runs, runs trained elsewhere included, as
trajectories to replay the rules over, read from the metric store whole (the engine reads a live run's first 20 and
last 200 steps; a replay cuts each step's view the same way, History.at)."""
from webapp.metrics import series

from .backtest import Trajectory
from .engine import RULE_METRICS, size_of
from .rules import History

# A replay reads every step of a run; longer runs are replayed over their first this many steps (and say so)
MAX_STEPS = 20_000


def trajectory_of(run) -> Trajectory:
    """The run's rule metrics, every step up to MAX_STEPS."""
    found = series.read([run.pk])[run.pk]
    by_step: dict[int, dict] = {}
    for name, points in found.items():
        if name not in RULE_METRICS and not name.startswith("eval/"):
            continue
        lists = points.lists()
        for step, value in zip(lists["steps"], lists["values"]):
            if step <= MAX_STEPS:
                by_step.setdefault(step, {})[name] = value
    steps = sorted(by_step)
    names = sorted({n for values in by_step.values() for n in values})
    history = History(steps=steps, metrics={n: [by_step[s].get(n) for s in steps] for n in names}, **size_of(run))
    return Trajectory(name=f"#{run.pk} {run.name}", history=history, source="team", run_id=run.pk)
