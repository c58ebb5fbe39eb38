"""Backtest: replay the step rules, with any thresholds, over runs that already happened, step by step as the engine
judges a live run (the same History cut at each step, the same wait of QUIET_STEPS_TO_RESOLVE quiet steps before an
alert resolves), and say when each rule would have opened. Over the labelled corpus (corpus.py) it also scores each
rule: collapses caught, the delay after their onset, and false alarms on the runs that did not collapse.

The runs come from the corpus or, through the manage.py command and the team's backtest page
(webapp/alerts/views.py), from a team's own past runs, runs trained elsewhere included (engine.history_of).

Pure Python: no Django.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from statistics import median

from . import corpus
from .rule_specs import STEP_RULE_KINDS, resolve_thresholds
from .rules import QUIET_STEPS_TO_RESOLVE, History, evaluate_step_rules

# A labelled collapse is caught in time when a collapse rule opens at most this many steps after its onset
# (issue 36's goal) ...
CAUGHT_WITHIN = 5
# ... and a rule that opened this many steps or more before the onset fired on something else
EARLY = 10
# The rules that claim a collapse (the others watch the answers' format, the optimiser, the run's progress)
COLLAPSE_RULES = ("entropy_collapse", "diversity_collapse", "majority_lock_in", "pass_at_k_divergence",
                  "length_collapse")


@dataclass
class Trajectory:
    """One run to replay: its whole metric history, and for a corpus run its label and onset."""

    name: str
    history: History
    label: str | None = None
    onset: int | None = None
    source: str = "corpus"
    run_id: int | None = None
    evidence: dict = field(default_factory=dict)


@dataclass
class Opening:
    rule: str
    step: int
    message: str
    resolved: int | None = None  # the step it would have resolved at, if it did


def from_corpus(run: corpus.CorpusRun) -> Trajectory:
    by_step = run.metrics_by_step()
    steps = sorted(by_step)
    names = sorted({name for values in by_step.values() for name in values})
    hp = run.hyperparameters
    history = History(steps=steps, metrics={n: [by_step[s].get(n) for s in steps] for n in names},
                      max_completion_length=run.max_completion_length,
                      prompts_per_step=hp.get("prompts_per_step"), n_votes=hp.get("n_votes"))
    return Trajectory(name=run.name, history=history, label=run.label, onset=run.onset, evidence=run.evidence)


def corpus_trajectories(names: list[str] | None = None) -> list[Trajectory]:
    return [_corpus_trajectory(name) for name in (names or corpus.names())]


@lru_cache(maxsize=None)
def _corpus_trajectory(name: str) -> Trajectory:
    """Each corpus run once per process: labelling it asks math-verify about its answers (a few seconds for all)."""
    return from_corpus(corpus.load(name))


def replay(trajectory: Trajectory, thresholds: dict, kinds=STEP_RULE_KINDS) -> list[Opening]:
    """Every alert the rules `kinds` would have opened over the run, in order, with the step it would have
    resolved at: the engine's loop (engine.evaluate_steps) without its database."""
    history, active, openings = trajectory.history, {}, []
    for step in history.steps:
        for kind, finding in evaluate_step_rules(history.at(step), thresholds, kinds).items():
            alert = active.get(kind)
            if finding is None:
                if alert is not None and step - alert[1] >= QUIET_STEPS_TO_RESOLVE:
                    alert[0].resolved = step
                    del active[kind]
            elif alert is None:
                opening = Opening(kind, step, finding.message)
                openings.append(opening)
                active[kind] = [opening, step]
            else:
                alert[1] = step
    return openings


@dataclass
class RuleScore:
    rule: str
    collapses: int = 0  # labelled collapses replayed
    caught: int = 0  # ... where the rule opened after onset − EARLY
    in_time: int = 0  # ... at most CAUGHT_WITHIN steps after the onset
    delays: list[int] = field(default_factory=list)  # opening step − onset, per collapse caught
    negatives: dict[str, int] = field(default_factory=dict)  # label -> runs replayed
    alarmed: dict[str, list[str]] = field(default_factory=dict)  # label -> runs where it opened

    @property
    def median_delay(self) -> float | None:
        return median(self.delays) if self.delays else None

    @property
    def false_alarm_count(self) -> int:
        return sum(len(names) for names in self.alarmed.values())

    @property
    def negative_count(self) -> int:
        return sum(self.negatives.values())

    @property
    def false_alarm_share(self) -> float | None:
        runs = sum(self.negatives.values())
        return sum(len(names) for names in self.alarmed.values()) / runs if runs else None

    def to_json(self) -> dict:
        return {"rule": self.rule, "collapses": self.collapses, "caught": self.caught, "in_time": self.in_time,
                "delays": self.delays, "median_delay": self.median_delay, "negatives": self.negatives,
                "alarmed": self.alarmed, "false_alarm_share": self.false_alarm_share}


def score(replayed: list[tuple[Trajectory, list[Opening]]], kinds=STEP_RULE_KINDS) -> dict[str, RuleScore]:
    """Per rule, over the labelled runs: the collapses it caught (and in time), its delays after their onsets, and
    the other runs it opened on (degenerations count as collapses' kin for the degeneration rule only)."""
    scores = {kind: RuleScore(kind) for kind in kinds}
    for trajectory, openings in replayed:
        if trajectory.label is None:
            continue
        for kind, result in scores.items():
            steps = [o.step for o in openings if o.rule == kind]
            target = corpus.DEGENERATION if kind == "degeneration" else corpus.COLLAPSE
            if trajectory.label == target:
                result.collapses += 1
                after = [s for s in steps if s > trajectory.onset - EARLY]
                if after:
                    result.caught += 1
                    result.delays.append(after[0] - trajectory.onset)
                    result.in_time += after[0] - trajectory.onset <= CAUGHT_WITHIN
            elif trajectory.label in (corpus.HEALTHY, corpus.NO_LEARNING) or (
                    kind == "degeneration" and trajectory.label == corpus.COLLAPSE):
                result.negatives[trajectory.label] = result.negatives.get(trajectory.label, 0) + 1
                if steps:
                    result.alarmed.setdefault(trajectory.label, []).append(trajectory.name)
    return scores


def any_collapse_rule(replayed: list[tuple[Trajectory, list[Opening]]]) -> RuleScore:
    """The collapse rules taken together: a collapse is caught when any of them opens."""
    merged = [(t, [Opening("any collapse rule", o.step, o.message) for o in openings if o.rule in COLLAPSE_RULES])
              for t, openings in replayed]
    return score(merged, kinds=("any collapse rule",))["any collapse rule"]


def openings_by_rule(openings: list[Opening]) -> dict[str, list[Opening]]:
    out: dict[str, list[Opening]] = {}
    for opening in openings:
        out.setdefault(opening.rule, []).append(opening)
    return out


def spans(openings: list[Opening]) -> str:
    """'11–16, 17–': the steps each alert was open, for a table cell or a terminal."""
    return ", ".join(f"{o.step}–{o.resolved if o.resolved is not None else ''}" for o in openings)


def with_thresholds(layers: list[dict], settings: list[str]) -> dict:
    """Thresholds for a replay: the layers (a team's overrides, ...) then `KIND.PARAM=VALUE` settings, each checked
    as a team's would be (a FieldError names a bad one)."""
    overrides: dict = {}
    for setting in settings:
        name, _, value = setting.partition("=")
        kind, _, param = name.partition(".")
        overrides.setdefault(kind.strip(), {})[param.strip()] = value.strip()
    return resolve_thresholds(*layers, overrides)
