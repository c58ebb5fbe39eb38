"""Every step rule judges streams with holes: any metric it reads missing at any step (a derived figure that lags
its step, a trainer that logs a metric every other step or stops logging it), NaN, infinite or absent altogether.
A rule that raises stops every rule after it and, inside ingestion, the grouping of a run trained elsewhere (the
degeneration rule did, on `None < 0.9`, when invalid_ratio was missing for the latest steps). Hypothesis damages
realistic streams (the crafted ones of rule_streams.py and streams.py, and the real runs of docs/experiments/) and
asserts that evaluate_step_rules answers, never raises."""
import csv
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from tests.alerts.rule_streams import degenerating_stream
from tests.alerts.streams import collapsing, recovering
from webapp.alerts.rule_specs import RULES, STEP_RULE_KINDS, resolve_thresholds
from webapp.alerts.rules import Finding, History, evaluate_step_rules

DATA = Path(__file__).resolve().parents[2] / "docs" / "experiments"

# What a rule reads beyond RULES[kind].metrics (webapp/alerts/rules.py): the invalid share the collapse rules quote,
# and the evaluation's pass@K for any K (the largest one logged is read, so a smaller one is there too).
DERIVED_READS = {
    "entropy_collapse": ("invalid_ratio",),
    "diversity_collapse": ("invalid_ratio",),
    "pass_at_k_divergence": ("eval/pass@4", "pass@4"),
    "length_collapse": ("invalid_ratio",),
    "degeneration": ("unique_answers",),
}


def reads(kind: str) -> list[str]:
    return sorted(set(RULES[kind].metrics) | set(DERIVED_READS.get(kind, ())))


def _csv(file: str, names: tuple, **where) -> dict:
    with open(DATA / file, newline="") as f:
        rows = [r for r in csv.DictReader(f) if all(r[k] == v for k, v in where.items())]
    return {n: [float(r[n]) if r[n] != "" else None for r in rows] for n in names}


def _complete(stream: dict) -> dict:
    """The stream with every metric some rule reads: what it lacks is filled with a plausible healthy series, so
    that every rule can judge it and the damage below reaches each branch."""
    n = max(len(v) for v in stream.values())
    fill = {
        "entropy": [0.8 - 0.01 * i for i in range(n)],
        "response_length/mean": [40.0 + (i % 3) for i in range(n)],
        "truncated_ratio": [0.05] * n,
        "invalid_ratio": [0.1 + 0.02 * (i % 4) for i in range(n)],
        "zero_variance_groups": [0.3 + 0.05 * (i % 5) for i in range(n)],
        "majority_ratio": [0.5 + 0.01 * i for i in range(n)],
        "unique_answers": [4.0 - (i % 2) for i in range(n)],
        "similarity/mean": [0.7 + 0.005 * i for i in range(n)],
        "pass@1": [0.4 + 0.01 * i for i in range(n)],
        "pass@4": [0.7 - 0.004 * i for i in range(n)],
        "pass@16": [0.95 - 0.01 * i for i in range(n)],
        # evaluated every third step, as a periodic evaluation is
        "eval/pass@1": [0.4 + 0.01 * i if i % 3 == 0 else None for i in range(n)],
        "eval/pass@4": [0.7 - 0.004 * i if i % 3 == 0 else None for i in range(n)],
        "eval/pass@16": [0.95 - 0.01 * i if i % 3 == 0 else None for i in range(n)],
    }
    return {**fill, **{name: list(values) for name, values in stream.items()}}


STREAMS = {
    "degenerating (crafted)": _complete(degenerating_stream()),
    "collapsing (crafted)": _complete(collapsing(16)),
    "recovering (crafted)": _complete(recovering(10)),
    "degenerating TTRL, lr 1e-2 (real)": _complete(_csv("degeneration.csv", (
        "entropy", "response_length/mean", "unique_answers", "majority_ratio", "invalid_ratio", "truncated_ratio"))),
    "Figure 1 TTRL (real)": _complete(_csv("figure1.csv", ("entropy", "response_length/mean", "pass@1", "pass@16"),
                                           method="ttrl")),
}
# mechanism.csv's pass@k is its periodic evaluation's (empty between evaluations): the first 40 steps
_MECHANISM = _csv("mechanism.csv", ("entropy", "response_length/mean", "pass@1", "pass@16"), arm="TTRL", seed="0")
STREAMS["mechanism TTRL, evaluated (real)"] = _complete({
    "entropy": _MECHANISM["entropy"][1:41], "response_length/mean": _MECHANISM["response_length/mean"][1:41],
    "eval/pass@1": _MECHANISM["pass@1"][1:41], "eval/pass@16": _MECHANISM["pass@16"][1:41]})

HOLES = (None, math.nan, math.inf, -math.inf)


@st.composite
def damaged(draw):
    """(kind, History, thresholds): a stream cut at some step, with the metrics ``kind`` reads damaged."""
    kind = draw(st.sampled_from(STEP_RULE_KINDS))
    stream = STREAMS[draw(st.sampled_from(sorted(STREAMS)))]
    n = len(next(iter(stream.values())))
    latest = draw(st.integers(1, n))  # judged at any step, not only the stream's last
    metrics = {name: values[:latest] for name, values in stream.items()}
    for name in draw(st.lists(st.sampled_from(reads(kind)), min_size=1, unique=True)):
        how = draw(st.sampled_from(("holes", "stops", "starts late", "never logged")))
        values = metrics.get(name, [None] * latest)
        if how == "never logged":
            metrics.pop(name, None)
            continue
        if how == "stops":  # logged up to some step, then not (a figure derived later than its step)
            metrics[name] = values[:draw(st.integers(0, latest))]
            continue
        if how == "starts late":
            first = draw(st.integers(0, latest))
            metrics[name] = [None] * first + values[first:]
            continue
        at = draw(st.sets(st.integers(0, latest - 1), min_size=1))
        metrics[name] = [draw(st.sampled_from(HOLES)) if i in at else v for i, v in enumerate(values)]
    overrides = {}
    if RULES[kind].param("window"):
        overrides["window"] = draw(st.integers(1, 5))
    thresholds = resolve_thresholds({kind: overrides})
    limit = draw(st.sampled_from((None, 0, 64, 96)))
    return kind, History(steps=list(range(1, latest + 1)), metrics=metrics, max_completion_length=limit), thresholds


def _as_the_server_loads_it(history: History) -> History:
    """What the engine hands the rules (engine._load_by_step): finite floats or None, marked clean."""
    cleaned = {name: [v if isinstance(v, float) and math.isfinite(v) else None for v in values]
               for name, values in history.metrics.items()}
    return History(steps=history.steps, metrics=cleaned, max_completion_length=history.max_completion_length,
                   clean=True)


def _answers(results: dict) -> bool:
    return all(kind in STEP_RULE_KINDS and (r is None or isinstance(r, Finding)) for kind, r in results.items())


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged())
def test_no_step_rule_raises_whatever_metric_it_reads_is_missing_at_whatever_step(case):
    kind, history, thresholds = case
    assert _answers(evaluate_step_rules(history, thresholds))
    assert _answers(evaluate_step_rules(_as_the_server_loads_it(history), thresholds))


def test_the_degeneration_rule_answers_when_invalid_ratio_is_missing_for_the_latest_steps():
    # the report of issue 36: a run trained elsewhere whose metrics reach step 12 while its rollouts (hence its
    # invalid_ratio) are grouped up to step 7 only
    stream = degenerating_stream()
    stream["invalid_ratio"] = stream["invalid_ratio"][:7]
    history = History(steps=list(range(1, 13)), metrics=stream, max_completion_length=96)
    results = evaluate_step_rules(history, resolve_thresholds())
    assert _answers(results) and "entropy_collapse" in results
