"""Read-side helpers shared by the run pages and the JSON API."""
import json
import math

from django.db.models import Max

from rl import metric_catalogue
from rl.methods import METHODS
from webapp.alerts import forecast
from webapp.alerts.models import Alert
from webapp.metrics import series

from .models import Group, Run, RunEvent


def chart_metrics(run: Run) -> list[str]:
    """The run page's charts: the health signals, label accuracy where labels exist and the method
    charts it (R-Zero's solver trains on its own questions and logs none), then the method's own
    signals (Method.charts: collapse shows as rollouts growing alike, each paper watches its own)."""
    spec = run.spec
    names = list(metric_catalogue.names(chart=True))
    has_labels = run.prompt_set is not None and run.prompt_set.has_labels
    if has_labels and (spec is None or spec.charts_label_accuracy):
        names.append("label_accuracy")
        if spec is not None and spec.rewards_the_vote:  # TTRL §4: the reward's agreement with the label's
            names.append("reward_accuracy")
    # a run trained elsewhere with no method of ours: the similarity of its rollouts, computed on a worker
    return names + list(spec.charts if spec else ("similarity/mean",))


def metric_series_of_runs(run_ids: list[int], names: list[str] | None = None, since_step: int | None = None,
                          max_points: int | None = None) -> dict:
    """{run_id: {name: {"steps": [...], "values": [...], "times": [...]}}} in step order (webapp/metrics/series.py
    reads them); `times` are the unix seconds of the event that carried each point. `since_step` keeps the points
    with step > since_step; `max_points` thins each series (see downsample)."""
    result = {}
    for run_id, found in series.read(run_ids, names, since_step).items():
        result[run_id] = {name: item.lists() for name, item in found.items()}
        if max_points is not None:
            result[run_id] = {name: downsample(lists, max_points) for name, lists in result[run_id].items()}
    return result


def downsample(points: dict, max_points: int) -> dict:
    """At most max_points points of a series in step order (series.keep_indices: the lowest and the
    highest value of each bucket of consecutive steps, so a one-step spike survives any thinning)."""
    keep = series.keep_indices(series.floats(points["values"]), max_points)
    if keep is None:
        return points
    return {key: [column[i] for i in keep] for key, column in points.items()}


def latest_similarity_groups(run: Run) -> dict:
    """The heatmap's start: the groups of the latest step that has similarity matrices,
    {"step", "groups": [{prompt_id, majority_answer, similarity}]} (step None when none)."""
    with_matrix = Group.objects.filter(run=run, similarity__isnull=False)
    step = with_matrix.aggregate(last=Max("step"))["last"]
    if step is None:
        return {"step": None, "groups": []}
    rows = with_matrix.filter(step=step).order_by("seq").values("prompt_id", "majority_answer", "similarity")
    # A prompt logged twice at one step (a replayed step after a resume): the later wins.
    groups = {row["prompt_id"]: row for row in rows}
    return {"step": step, "groups": [g for g in groups.values() if isinstance(g["similarity"], list)]}


def run_time_origin(run: Run) -> float | None:
    """Unix seconds of the run's first event: zero of the wall-clock x-axis."""
    return RunEvent.objects.filter(run=run).order_by("seq").values_list("time", flat=True).first()


def run_last_event_time(run: Run) -> float | None:
    return RunEvent.objects.filter(run=run).order_by("-seq").values_list("time", flat=True).first()


def resume_points(run: Run) -> list[dict]:
    """Where the run was resumed: every trainer `status: running` event after the first,
    placed at the step logged just before it (None when no step was logged yet)."""
    running = [
        (seq, time) for seq, time, payload in
        RunEvent.objects.filter(run=run, type="status").order_by("seq").values_list("seq", "time", "payload")
        if (payload or {}).get("state") == "running"
    ]
    points = []
    for seq, time in running[1:]:
        step = RunEvent.objects.filter(run=run, seq__lt=seq, step__isnull=False).aggregate(last=Max("step"))["last"]
        points.append({"step": step, "time": time, "seq": seq})
    return points


def hyperparameter_rows(run: Run) -> tuple[list[dict], list[dict]]:
    """The run page's hyperparameter table: [{name, value, default, differs, known}] in
    the method's schema order, then keys the schema does not know; and the run's
    alert_rules overrides as [{rule, param, value}]."""

    method = METHODS.get(run.method)
    defaults = method.defaults() if method else {}
    hp = run.hyperparameters or {}
    rows = []
    for name in list(defaults) + sorted(k for k in hp if k not in defaults and k != "alert_rules"):
        known = name in defaults
        value = hp.get(name, defaults.get(name))
        rows.append({
            "name": name,
            "value": value,
            "default": defaults.get(name),
            "value_text": _display(value),
            "default_text": _display(defaults[name]) if known else "—",
            "known": known,
            "set": name in hp,
            "differs": name in hp and (not known or not _same(hp[name], defaults[name])),
        })
    rules = []
    overrides = hp.get("alert_rules")
    if isinstance(overrides, dict):
        for rule, params in overrides.items():
            if isinstance(params, dict):
                rules.extend({"rule": rule, "param": k, "value": _display(v)} for k, v in params.items())
            else:
                rules.append({"rule": rule, "param": "", "value": _display(params)})
    return rows, rules


def _display(value) -> str:
    """A hyperparameter value as JSON writes it (true, null, 5e-07), the way it is entered."""
    return json.dumps(value, sort_keys=True)


def _same(a, b) -> bool:
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)
    return a == b


def group_steps(run: Run) -> list[int]:
    return list(Group.objects.filter(run=run).order_by("step").values_list("step", flat=True).distinct())


def step_bounds(run: Run, step: int | None) -> dict:
    """The rollouts page's step navigation: the first and last steps with rollouts and the nearest
    ones before and after `step`, four index lookups whatever the number of steps (the page no longer
    lists every step)."""
    groups = Group.objects.filter(run=run).values_list("step", flat=True)
    bounds = {"first_step": groups.order_by("step").first(), "last_step": groups.order_by("-step").first(),
              "prev_step": None, "next_step": None}
    if step is not None:
        bounds["prev_step"] = groups.filter(step__lt=step).order_by("-step").first()
        bounds["next_step"] = groups.filter(step__gt=step).order_by("step").first()
    return bounds


def groups_at(run: Run, step: int | None, prompt_id: str | None = None):
    """The groups of one step (the latest when step is None), rollouts prefetched; groups a resumed
    trainer logged again replace the earlier attempt's (superseded)."""
    groups = Group.objects.filter(run=run, superseded=False)
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
    """R-Zero's stage events in order, as their live `stage` messages carry them: {iteration, phase, state, ...}."""
    return [stage_fields(e.payload) for e in RunEvent.objects.filter(run=run, type="stage").order_by("seq")]


def stage_fields(event: dict) -> dict:
    """A stage event as the run page shows it, live and on load: without the log's own fields (the page lists
    every other field as a detail of the stage)."""
    return {k: v for k, v in event.items() if k not in ("seq", "time", "type")}


def live_state(run: Run) -> dict:
    """What the run page's live messages add to it, as the page opens with it (its initial JSON) and as
    GET /api/runs/{id}/live-state gives it to a page that missed some of those messages (`behind`, or a socket
    that reconnects): the steps with rollouts (`group`), the heatmap (`group`), R-Zero's stages (`stage`) and
    question sets (`questions`), where the run was resumed (`resume`), and the collapse forecast (`alert` messages
    of its rule). One function, so the page and the API cannot disagree."""
    return {
        "steps": group_steps(run),
        "heatmap": latest_similarity_groups(run),
        "stages": stage_events(run),
        "resumes": resume_points(run),
        "iterations": run.rzero_iterations(),
        "forecast": collapse_forecast(run),
    }


def collapse_forecast(run: Run) -> dict | None:
    """The run's collapse forecast while its entropy_collapse_forecast alert is active (open or acknowledged), as the
    run page shows it: {"text": "collapse expected around step 22 (18–29 at 80%)", "alert", "step", "low", "high",
    "confidence"}; None otherwise (never forecast, resolved, or ended with the run)."""
    alert = Alert.objects.active().filter(run=run, rule=forecast.KIND).only("pk", "values").first()
    values = alert.values if alert is not None else {}
    if not all(isinstance(values.get(k), (int, float)) for k in ("expected_step", "low", "high", "confidence")):
        return None
    return {"text": forecast.headline(values["expected_step"], values["low"], values["high"], values["confidence"]),
            "alert": alert.pk, "step": int(values["expected_step"]), "low": int(values["low"]),
            "high": int(values["high"]), "confidence": values["confidence"]}


def hyperparameter_diff(runs: list[Run]) -> dict:
    """The compare page's table: a row per run setting (steps, seed, hardware, eval set), then one per
    hyperparameter any of the runs has (a value the run did not set is its method's default):
    {name, cells: [text per run], differs}; `differing_names` lists every name whose values differ, the
    method, model and prompt set of the page's first table included, so a confounded comparison shows."""

    def text(value):
        return "—" if value is _MISSING else _display(value)

    per_run, names = [], list(_RUN_SETTINGS)
    for run in runs:
        method = METHODS.get(run.method)
        values = {**(method.defaults() if method else {}), **(run.hyperparameters or {})}
        per_run.append({**{name: read(run) for name, read in _RUN_SETTINGS.items()}, **values})
        names += [n for n in values if n not in names]
    rows = []
    for name in names:
        raw = [values.get(name, _MISSING) for values in per_run]
        cells = [text(v) for v in raw]
        rows.append({"name": name, "cells": cells, "differs": len(set(cells)) > 1})
    headline = [name for name, read in _RUN_HEADLINE.items() if len({read(run) for run in runs}) > 1]
    return {"rows": rows, "differing": sum(r["differs"] for r in rows),
            "differing_names": headline + [r["name"] for r in rows if r["differs"]]}


# what the compare page's first table shows, and the run settings its hyperparameter table starts with
_RUN_HEADLINE = {"method": lambda r: r.method, "model": lambda r: r.model, "prompt_set": lambda r: r.prompt_set_id}
_RUN_SETTINGS = {"max_steps": lambda r: r.max_steps, "seed": lambda r: r.seed, "gpus": lambda r: r.gpus,
                 "nodes": lambda r: r.nodes,
                 "eval_prompt_set": lambda r: r.eval_prompt_set.name if r.eval_prompt_set_id else None,
                 # the model novelty and the heatmaps are measured with (EVOL-RL's reward reads it)
                 "embedding_model": lambda r: r.embedding_model or "default (MiniLM)"}


_MISSING = object()
