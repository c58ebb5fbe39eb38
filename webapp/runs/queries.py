"""Read-side helpers shared by the run pages and the JSON API."""
from collections import defaultdict

from .models import Group, MetricPoint, Run, RunEvent

LIVE_CHART_METRICS = ["entropy", "response_length/mean", "reward/mean", "majority_ratio", "label_accuracy"]
# Collapse shows as rollouts growing alike; each method adds the signal its paper watches.
METHOD_CHART_METRICS = {
    "evol_rl": ["similarity/mean", "evol_rl/novelty_mean"],
    "compass": ["similarity/mean", "compass/credibility_mean"],
    "darl": ["similarity/mean", "darl/bonus_ratio"],
    "r_zero": ["rzero/uncertainty_mean", "rzero/repetition_penalty_mean", "rzero/kept_questions"],
}


def chart_metrics(run: Run) -> list[str]:
    """The run page's charts: the health signals, label accuracy where labels exist (R-Zero's
    solver trains on pseudo-labels and logs none), then the method's own signals."""
    names = [n for n in LIVE_CHART_METRICS if n != "label_accuracy"]
    if run.prompt_set.has_labels and run.method != "r_zero":
        names.append("label_accuracy")
    return names + METHOD_CHART_METRICS.get(run.method, ["similarity/mean"])


def metric_series(run: Run, names: list[str] | None = None) -> dict:
    """{name: {"steps": [...], "values": [...]}} in step order."""
    points = MetricPoint.objects.filter(run=run)
    if names:
        points = points.filter(name__in=names)
    series = defaultdict(lambda: {"steps": [], "values": []})
    for name, step, value in points.order_by("step", "seq").values_list("name", "step", "value"):
        series[name]["steps"].append(step)
        series[name]["values"].append(value)
    return dict(series)


def group_steps(run: Run) -> list[int]:
    return list(Group.objects.filter(run=run).order_by("step").values_list("step", flat=True).distinct())


def groups_at(run: Run, step: int | None, prompt_id: str | None = None):
    """The groups of one step (the latest when step is None), rollouts prefetched."""
    groups = Group.objects.filter(run=run)
    if step is None:
        last = groups.order_by("-step").values_list("step", flat=True).first()
        if last is None:
            return None, Group.objects.none()
        step = last
    groups = groups.filter(step=step)
    if prompt_id is not None:
        groups = groups.filter(prompt_id=prompt_id)
    return step, groups.order_by("seq").prefetch_related("rollouts")


def stage_events(run: Run) -> list[dict]:
    """R-Zero's stage events in order: {iteration, phase, state, ...}."""
    return [e.payload for e in RunEvent.objects.filter(run=run, type="stage").order_by("seq")]
