"""The labelled trajectory corpus (docs/alert-corpus.md): real CPU runs of this project's trainer, stored compactly
by scripts/experiments/corpus.py under webapp/alerts/corpus/, each labelled from its held-out labels alone
(`label_run`), never from the alert rules. The backtest (backtest.py), the rules' tests and the collapse forecast's
evaluation read it.

A run's steps carry the trainer's metrics and, per prompt, its rollouts' answers, validity, rewards, lengths and
whether they were trained on. `metrics_by_step` adds what ingestion derives from the same rollouts
(rl.metrics.step_health, rl.metrics.majority_changes), so a rule judges a corpus run on the figures it judges a
live run on. `events` turns a run back into a trainer's event log, for replays through ingestion itself.

Pure Python: no Django (the backtest's command and page, and the benchmark, read it alike).
"""
from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from statistics import mean

from rl.answers import answers_equal
from rl.metrics import majority_changes, step_health

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"

COLLAPSE, DEGENERATION, HEALTHY, NO_LEARNING = "collapse", "degeneration", "healthy", "no learning"
LABELS = (COLLAPSE, DEGENERATION, HEALTHY, NO_LEARNING)

# The labelling rule's constants (docs/alert-corpus.md says why each)
SMOOTH = 8  # steps a held-out figure is averaged over, centred: 32 prompts at the Figure 1 sizes, the whole set
GAP_SHARE = 0.6  # collapse: the exploration gap (pass@n − pass@1) at the end at most this share of its start ...
LEARNED = 0.15  # ... unless pass@1 rose this much: the gap then closed by finding the answers first time (RLVR)
EXTINCT = 0.01  # degeneration: right answers under 1% of the rollouts (URLVR's model collapse step)
VALID_GONE, VALID_START = 0.1, 0.5  # ... with valid answers under 10% at the end, from at least half at the start
STILL_KL = 1e-4  # no learning: the policy's mean KL to its start stayed below this


@dataclass
class Step:
    step: int
    time: float | None
    metrics: dict
    groups: list[dict]


@dataclass
class CorpusRun:
    name: str
    method: str
    seed: int
    hyperparameters: dict
    labels: dict[str, str]  # prompt id -> held-out answer
    steps: list[Step]
    label: str = ""
    onset: int | None = None
    evidence: dict = field(default_factory=dict)

    @property
    def max_completion_length(self) -> int | None:
        return self.hyperparameters.get("max_completion_length")

    def metrics_by_step(self) -> dict[int, dict]:
        """{step: {name: value}}: the trainer's metrics with ingestion's derived figures added (a value the
        trainer logged itself is kept, as ingestion keeps it)."""
        out, previous = {}, {}
        for step in self.steps:
            derived = step_health(_rollouts(step.groups), self.max_completion_length)
            derived.update(majority_changes(step.groups, previous, self.labels))
            for group in step.groups:
                previous[group["prompt_id"]] = group["majority_answer"]
            out[step.step] = {**derived, **step.metrics}
        return out

    def events(self) -> list[dict]:
        """The run as a trainer's event log (texts empty: the corpus keeps none), for ingestion."""
        events = []
        for step in self.steps:
            for group in step.groups:
                events.append({"seq": len(events), "time": step.time, "type": "group", "step": step.step,
                               "prompt_id": group["prompt_id"], "majority_answer": group["majority_answer"],
                               "similarity": None, "rollouts": [
                                   {"index": i, "text": "", "answer": answer, "valid": bool(valid),
                                    "in_majority": bool(majority), "reward": reward, "advantage": None,
                                    "length": length, "used_for_training": bool(trained), "entropy": None,
                                    "extra": {}}
                                   for i, (answer, valid, majority, reward, length, trained) in enumerate(zip(
                                       group["answers"], group["valid"], group["in_majority"], group["rewards"],
                                       group["lengths"], group["trained"]))]})
            events.append({"seq": len(events), "time": step.time, "type": "metrics", "step": step.step,
                           "values": step.metrics})
        return events


def _rollouts(groups: list[dict]) -> list[tuple]:
    """(group, valid, length, reward, trained) per rollout, as ingestion reads them."""
    return [(n, bool(valid), length, reward, bool(trained)) for n, group in enumerate(groups)
            for valid, length, reward, trained in zip(group["valid"], group["lengths"], group["rewards"],
                                                       group["trained"])]


def names() -> list[str]:
    return sorted(path.name.removesuffix(".jsonl.gz") for path in CORPUS_DIR.glob("*.jsonl.gz"))


@lru_cache(maxsize=None)
def load(name: str) -> CorpusRun:
    """One stored run, labelled."""
    with gzip.open(CORPUS_DIR / f"{name}.jsonl.gz", "rt") as f:
        header, *records = (json.loads(line) for line in f)
    run = CorpusRun(name=header["name"], method=header["method"], seed=header["seed"],
                    hyperparameters=header["hyperparameters"], labels=header["labels"],
                    steps=[Step(r["step"], r.get("time"), r["metrics"], r["groups"]) for r in records])
    run.label, run.onset, run.evidence = label_run(run)
    return run


def load_all() -> list[CorpusRun]:
    return [load(name) for name in names()]


# --- the labelling rule (docs/alert-corpus.md): held-out labels only --------------------------------------------


def held_out_figures(run: CorpusRun) -> list[dict]:
    """Per step, from the held-out labels: pass@1 (share of rollouts right), pass@n (share of prompts with a right
    rollout among their votes), the exploration gap pass@n − pass@1 (right answers sampling could still find
    that the vote does not give), and the share of valid answers."""
    figures = []
    for step in run.steps:
        right = total = found = valid = 0
        for group in step.groups:
            label = run.labels.get(group["prompt_id"])
            correct = [a is not None and label is not None and _equal(a, label) for a in group["answers"]]
            right, total, found = right + sum(correct), total + len(correct), found + any(correct)
            valid += sum(group["valid"])
        prompts = len(step.groups) or 1
        figures.append({"step": step.step, "pass@1": right / total if total else None,
                        "pass@n": found / prompts, "gap": found / prompts - (right / total if total else 0),
                        "valid": valid / total if total else None, "kl": step.metrics.get("kl")})
    return figures


@lru_cache(maxsize=100_000)
def _equal(answer: str, label: str) -> bool:
    # the corpus's answers are mostly whole numbers: two integer literals are equal exactly when their values are
    # (what math-verify says, without its round trip: labelling the corpus took 4 s of them)
    if _INTEGER.fullmatch(answer) and _INTEGER.fullmatch(label):
        return int(answer) == int(label)
    return answers_equal(answer, label)


_INTEGER = re.compile(r"-?\d{1,30}")


def _smoothed(figures: list[dict], name: str) -> list[float | None]:
    """Centred means over SMOOTH steps: a label may look ahead, so its onset does not lag."""
    out, half = [], SMOOTH // 2
    for i in range(len(figures)):
        values = [f[name] for f in figures[max(0, i - half): i + half] if f[name] is not None]
        out.append(mean(values) if values else None)
    return out


def _mean_of(figures: list[dict], name: str) -> float | None:
    values = [f[name] for f in figures if f[name] is not None]
    return mean(values) if values else None


def label_run(run: CorpusRun) -> tuple[str, int | None, dict]:
    """(label, onset step or None, the figures it rests on), from the held-out labels and the trainer's KL only.
    The start is the mean of the first SMOOTH steps, the end the mean of the last SMOOTH.

    - degeneration: valid answers under VALID_GONE at the end, from at least VALID_START over the first two steps
      (text can come apart within two); onset: the first step from which right answers (pass@1) stay under EXTINCT
      (URLVR's "model collapse step").
    - collapse: the exploration gap (the right answers a prompt's votes still hold that the vote does not give)
      at the end at most GAP_SHARE of its start, while pass@1 rose less than LEARNED: sampling lost answers it used
      to find (pass@n falls, EVOL-RL Fig. 1), not because the policy now finds them first time (a supervised run).
      Onset: the first step from which the smoothed gap stays below halfway between its start and its end for
      SMOOTH steps (or to the end).
    - no learning: neither, and the policy's mean KL to its start stayed under STILL_KL.
    - healthy: the rest, neither collapsed nor degenerated (a run may still lose accuracy: random reward does); a
      gap that fell as far as a collapse's and came back is noted as a transient dip.
    """
    figures = held_out_figures(run)
    if len(figures) < 2 * SMOOTH:
        return HEALTHY, None, {"note": "too short to judge"}
    steps = [f["step"] for f in figures]
    names = ("pass@1", "pass@n", "gap", "valid")
    start = {name: _mean_of(figures[:SMOOTH], name) for name in names}
    end = {name: _mean_of(figures[-SMOOTH:], name) for name in names}
    evidence = {"start": {k: round(v, 4) for k, v in start.items()}, "end": {k: round(v, 4) for k, v in end.items()}}
    # text can come apart within two steps (the lr 1e-2 runs): the answers' start is the first steps'
    first_valid = _mean_of(figures[:2], "valid")
    if first_valid >= VALID_START and end["valid"] < VALID_GONE:
        gone = [f["pass@1"] is not None and f["pass@1"] < EXTINCT for f in figures]
        return DEGENERATION, next((steps[i] for i in range(len(steps)) if all(gone[i:])), steps[-1]), evidence
    gap = _smoothed(figures, "gap")
    halfway = (start["gap"] + end["gap"]) / 2
    learned = end["pass@1"] - start["pass@1"] >= LEARNED
    if end["gap"] <= GAP_SHARE * start["gap"] and not learned:
        below = [g is not None and g < halfway for g in gap]
        onset = next((steps[i] for i in range(len(steps)) if all(below[i:i + SMOOTH])), steps[-1])
        return COLLAPSE, onset, evidence
    low = GAP_SHARE * start["gap"]
    dipped = [s for s, g in zip(steps[SMOOTH:-SMOOTH], gap[SMOOTH:-SMOOTH]) if g is not None and g <= low]
    if dipped and not learned:
        evidence["transient_dip"] = [dipped[0], dipped[-1]]
    kls = [f["kl"] for f in figures if isinstance(f["kl"], (int, float))]
    if kls and mean(kls) < STILL_KL:
        return NO_LEARNING, None, evidence
    return HEALTHY, None, evidence
