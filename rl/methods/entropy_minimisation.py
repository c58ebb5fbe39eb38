"""EM-RL-Token and EM-RL-Sequence (Agarwal et al. 2025), the entropy-minimisation baselines of EVOL-RL."""

from __future__ import annotations

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Hyperparameter, Method, shared
from rl.rewards.baselines import em_sequence_reward, em_token_reward

_PAPER = "Agarwal et al. 2025, The Unreasonable Effectiveness of Entropy Minimization (baseline in EVOL-RL)"
_AGGREGATION = Hyperparameter(
    "aggregation", "choice", "sum", "How the per-token terms add up: 'sum' as Agarwal et al. 2025 define the EM-RL "
    "rewards (−Σ_t H_t, Σ_t log p_t), or 'mean' (length-normalised).", choices=("sum", "mean"))


def score_token(group: Group, hp: dict, probe) -> GroupScore:
    stats = probe.token_statistics(group)
    aggregation = hp.get("aggregation", "sum")
    rewards = [em_token_reward(s.entropy, aggregation) for s in stats]  # EM-RL-Token (Agarwal et al.): r = −Σ_t H_t
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers),
                      extras=[{"mean_token_entropy": float(np.mean(s.entropy)) if s.entropy else 0.0,
                               "token_entropy_sum": float(np.sum(s.entropy))} for s in stats])


def score_sequence(group: Group, hp: dict, probe) -> GroupScore:
    stats = probe.token_statistics(group)
    aggregation = hp.get("aggregation", "sum")
    rewards = [em_sequence_reward(s.logprob, aggregation) for s in stats]  # EM-RL-Sequence: r = Σ_t log p(y_t) = log π(y|x)
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers),
                      extras=[{"mean_token_logprob": float(np.mean(s.logprob)) if s.logprob else 0.0,
                               "sequence_logprob": float(np.sum(s.logprob))} for s in stats])


TOKEN = Method(
    name="em_token",
    title="EM-RL-Token",
    paper=_PAPER,
    label_free=True,
    description="Reward = − summed token entropy of the rollout (Agarwal et al.: r = −Σ_t H_t).",
    hyperparameters=shared() + (_AGGREGATION,),
    scorer=score_token,
)

SEQUENCE = Method(
    name="em_sequence",
    title="EM-RL-Sequence",
    paper=_PAPER,
    label_free=True,
    description="Reward = log-probability of the rollout, a sum over its tokens (sequence-level entropy minimisation).",
    hyperparameters=shared() + (_AGGREGATION,),
    scorer=score_sequence,
)
