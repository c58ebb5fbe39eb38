"""Metric names of trainers Evolab does not run (verl, TRL, OpenRLHF), mapped onto DESIGN §5's names.

A run trained elsewhere reports its own names (DESIGN §4.8): verl's `actor/entropy`, TRL's
`completions/mean_length`. Ingestion stores each value under the reported name and, where this table
knows it, under the §5 name as well, so the collapse rules, the run list's health figures and the
charts of an external run read the same series as an Evolab-trained run's. The table is the one
documented in docs/external-runs.md; names are as each trainer logs them through MLflow (verl turns
`@` into `_at_`, Transformers' MLflow callback keeps `/`), and TRL's also with the `train/` prefix its W&B and
TensorBoard callbacks add.

Sources: verl `verl/trainer/ppo/metric_utils.py` (compute_data_metrics, compute_timing_metrics) and
`verl/workers/actor/dp_actor.py`; TRL 1.16 `trl/trainer/grpo_trainer.py` (`_metrics`); OpenRLHF
`openrlhf/trainer/ppo_utils/experience_maker.py` and `ppo_actor.py`, logged with a `train/` prefix.
"""
from __future__ import annotations

# trainer -> {reported name: DESIGN §5 name}
TRAINER_METRICS: dict[str, dict[str, str]] = {
    "verl": {
        "actor/entropy": "entropy",
        "response_length/mean": "response_length/mean",
        "response_length/max": "response_length/max",
        "response_length/min": "response_length/min",
        # the share of responses that hit data.max_response_length
        "response_length/clip_ratio": "truncated_ratio",
        # the reward function's score per sequence (critic/rewards/* is after an in-reward KL penalty)
        "critic/score/mean": "reward/mean",
        "actor/kl_loss": "kl",
        "actor/pg_loss": "loss",
        "actor/grad_norm": "grad_norm",
        "actor/lr": "learning_rate",
        "timing_s/step": "time/step",
        "timing_s/gen": "time/generation",
        "timing_s/reward": "time/reward",
    },
    "trl": {
        "entropy": "entropy",
        "completions/mean_length": "response_length/mean",
        "completions/min_length": "response_length/min",
        "completions/max_length": "response_length/max",
        "completions/clipped_ratio": "truncated_ratio",
        "reward": "reward/mean",
        "reward_std": "reward/std",
        # the share of prompts whose completions all got one reward (GRPO learns nothing from them)
        "frac_reward_zero_std": "zero_variance_groups",
        "kl": "kl",
        "loss": "loss",
        "grad_norm": "grad_norm",
        "learning_rate": "learning_rate",
        "clip_ratio/low_mean": "clip_ratio/low",
        "clip_ratio/high_mean": "clip_ratio/high",
        "step_time": "time/step",
    },
    "openrlhf": {
        "train/policy_loss": "loss",
        "train/kl": "kl",
        "train/reward": "reward/mean",
        "train/response_length": "response_length/mean",
        "train/response_clip_ratio": "truncated_ratio",
        "train/actor_lr": "learning_rate",
        "train/actor_grad_norm": "grad_norm",
        "timing/step_total": "time/step",
        "timing/generation": "time/generation",
    },
}

# Names only one trainer logs: seeing one of them says who is reporting.
_SIGNATURES: dict[str, tuple[str, ...]] = {
    "verl": ("actor/", "critic/", "timing_s/", "response_length/clip_ratio", "val-core/", "val-aux/"),
    "trl": ("completions/", "frac_reward_zero_std", "reward_std", "step_time"),
    "openrlhf": ("train/policy_loss", "train/actor_lr", "train/response_length", "timing/step_total"),
}

# transformers' WandbCallback and TensorBoardCallback write a training log's names with a "train/" prefix
# (rewrite_logs): TRL's names as `evolab sync wandb|tensorboard` reads them from those loggers' files
TRAINER_METRICS["trl"].update({"train/" + name: design for name, design in list(TRAINER_METRICS["trl"].items())})
_SIGNATURES["trl"] += tuple("train/" + name for name in _SIGNATURES["trl"])

TRAINERS = tuple(TRAINER_METRICS)


def detect_trainer(names) -> str | None:
    """The trainer whose own names these are (verl, trl, openrlhf), or None when nothing says."""
    for trainer, signatures in _SIGNATURES.items():
        if any(name.startswith(signatures) for name in names):
            return trainer
    return None


def with_design_names(values: dict, trainer: str | None) -> dict:
    """The reported values plus, for each name the trainer's table maps, the same value under its
    DESIGN §5 name. A §5 name the trainer reported itself keeps the reported value."""
    table = TRAINER_METRICS.get(trainer or "", {})
    mapped = {design: values[reported] for reported, design in table.items() if reported in values}
    return {**mapped, **values}
