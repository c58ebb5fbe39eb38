"""The metrics Evolab knows by name (DESIGN section 5), one record each: where the pages chart it, how the run list
shows it, and where the trainer reads it from. The one list: the trainer's callback (rl/callbacks.py), ingestion's
derived health and the run list's live figures (webapp/runs/ingestion.py), the run list's columns
(webapp/runs/listing.py), the run page's charts (webapp/runs/queries.py) and the pages' JSON
(webapp/runs/metric_groups.py, which charts.js applies to every name) all read it.

A method's own metrics (`evol_rl/novelty_mean`) are not listed: their prefix is the method's (rl.methods), and
they chart with the rewards. Names trainers elsewhere report are mapped onto these in rl/trainer_metrics.py.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricRecord:
    name: str
    group: str  # a section of the run and compare pages (GROUPS)
    title: str = ""  # the run list's column title (only where run_list)
    decimals: int = 3  # digits the run list shows
    run_list: bool = False  # the run list shows its last value per run, and the live `run` message carries it
    chart: bool = False  # charted on every run's page, whatever the method
    trainer: str | None = None  # the key of the trainer's log record it is read from (TRL's name, or our own)
    derived: bool = False  # ingestion works it out from the step's stored rollouts when the trainer logs none


# The sections of the pages, in display order.
GROUPS = ("health", "rewards", "labels & eval", "optimisation", "time", "other")

# In each group's display order (DESIGN section 5's, then the rest); the pages put names not listed here after
# these, alphabetically.
RECORDS = (
    MetricRecord("entropy", "health", "Entropy", 3, run_list=True, chart=True, trainer="entropy"),
    MetricRecord("response_length/mean", "health", "Length", 0, run_list=True, chart=True,
                 trainer="completions/mean_length"),
    MetricRecord("similarity/mean", "health", trainer="similarity/mean"),
    MetricRecord("majority_ratio", "health", "Majority", 2, run_list=True, chart=True, trainer="majority_ratio"),
    MetricRecord("unique_answers", "health", trainer="unique_answers"),
    MetricRecord("majority_flip_rate", "health", derived=True),
    MetricRecord("invalid_ratio", "health", derived=True),
    MetricRecord("truncated_ratio", "health", derived=True),
    MetricRecord("zero_variance_groups", "health", derived=True),
    MetricRecord("reward/mean", "rewards", chart=True, trainer="reward"),
    MetricRecord("reward/std", "rewards", trainer="reward_std"),
    MetricRecord("reward/vote_mean", "rewards", trainer="reward/vote_mean"),
    MetricRecord("reward/vote_std", "rewards", trainer="reward/vote_std"),
    MetricRecord("reward", "rewards"),  # a trainer elsewhere that logs its reward unprefixed
    MetricRecord("label_accuracy", "labels & eval", trainer="label_accuracy"),
    MetricRecord("reward_accuracy", "labels & eval", trainer="reward_accuracy"),
    MetricRecord("correct_to_wrong", "labels & eval", derived=True),
    MetricRecord("maj@16", "labels & eval", trainer="maj@16"),
    MetricRecord("pass@1", "labels & eval", trainer="pass@1"),
    MetricRecord("pass@16", "labels & eval", trainer="pass@16"),
    MetricRecord("kl", "optimisation", trainer="kl"),
    MetricRecord("loss", "optimisation", trainer="loss"),
    MetricRecord("grad_norm", "optimisation", trainer="grad_norm"),
    MetricRecord("learning_rate", "optimisation", trainer="learning_rate"),
    MetricRecord("clip_ratio/low", "optimisation", trainer="clip_ratio/low_mean"),
    MetricRecord("clip_ratio/high", "optimisation", trainer="clip_ratio/high_mean"),
    MetricRecord("updates/skipped", "optimisation", trainer="updates/skipped"),
    # what trainers elsewhere log of their optimisation under these names
    MetricRecord("entropy_loss", "optimisation"),
    MetricRecord("policy_loss", "optimisation"),
    MetricRecord("pg_loss", "optimisation"),
    MetricRecord("kl_loss", "optimisation"),
    MetricRecord("clip_ratio", "optimisation"),
    MetricRecord("time/step", "time"),
    MetricRecord("time/generation", "time", trainer="time/generation"),
    MetricRecord("time/reward", "time", trainer="time/reward"),
    MetricRecord("time/novelty", "time", trainer="time/novelty"),
    MetricRecord("time/update", "time"),
)

# A name not listed goes to the first group one of whose prefixes it starts with (the method's own prefixes,
# `evol_rl/`, are the rewards': webapp/runs/metric_groups.py adds them); any other name is "other".
GROUP_PREFIXES = {
    "health": ("response_length/", "similarity/"),
    "rewards": ("reward/",),
    "labels & eval": ("maj@", "pass@", "eval/"),
    "optimisation": ("clip_ratio/", "kl/", "loss/", "grad_norm/", "optim/", "updates/"),
    "time": ("time/",),
}

BY_NAME = {record.name: record for record in RECORDS}


def names(**flags) -> tuple[str, ...]:
    """The names of the records whose fields have these values, in catalogue order: names(run_list=True)."""
    return tuple(r.name for r in RECORDS if all(getattr(r, field) == value for field, value in flags.items()))
