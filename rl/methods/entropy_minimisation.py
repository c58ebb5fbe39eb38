"""EM-RL-Token and EM-RL-Sequence (Agarwal et al. 2025), the entropy-minimisation baselines of EVOL-RL."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, shared
from rl.methods.setups import COMPARISON_SETUP, COMPARISON_SOURCE
from rl.params import Param

EM_AGGREGATIONS = ("sum", "mean")


def _aggregate(values: Sequence[float] | np.ndarray, aggregation: str) -> float:
    if aggregation not in EM_AGGREGATIONS:
        raise ValueError(f"aggregation must be one of {EM_AGGREGATIONS}, got {aggregation!r}")
    values = np.asarray(values, dtype=np.float64)
    if values.size == 0:
        return 0.0
    return float(values.sum() if aggregation == "sum" else values.mean())


def em_token_reward(token_entropies: Sequence[float] | np.ndarray, aggregation: str = "sum") -> float:
    """− the summed token entropy of the rollout (or, with aggregation="mean", the mean); 0 for no tokens.

    # Agarwal et al. 2025 (arXiv 2505.15134), EM-RL-token reward: r(y) = −Σ_t H(π_θ(·|x, y_<t))
    """
    return -_aggregate(token_entropies, aggregation)


def em_sequence_reward(token_logprobs: Sequence[float] | np.ndarray, aggregation: str = "sum") -> float:
    """The sequence log-probability of the rollout (or, with aggregation="mean", per token); 0 for no tokens.

    # Agarwal et al. 2025 (arXiv 2505.15134), EM-RL-sequence reward: r(y) = log π_θ(y|x) = Σ_t log π_θ(y_t|x, y_<t)
    """
    return _aggregate(token_logprobs, aggregation)


_PAPER = "Agarwal et al. 2025, The Unreasonable Effectiveness of Entropy Minimization (baseline in EVOL-RL)"
_AGGREGATION = Param(
    "aggregation", "choice", "sum", "How the per-token terms add up: 'sum' as Agarwal et al. 2025 define the EM-RL "
    "rewards (−Σ_t H_t, Σ_t log p_t), or 'mean' (length-normalised).", choices=EM_AGGREGATIONS)


def _score(group: Group, hp: dict, probe, per_token: str, reward, mean_name: str, sum_name: str) -> GroupScore:
    """Both baselines: one term per generated token (TokenStatistics.<per_token>), summed (or averaged) into r."""
    stats = probe.token_statistics(group)
    aggregation = hp.get("aggregation", "sum")
    terms = [getattr(s, per_token) for s in stats]
    return GroupScore(rewards=[reward(t, aggregation) for t in terms], majority_answer=majority_vote(group.answers),
                      extras=[{mean_name: float(np.mean(t)) if t else 0.0, sum_name: float(np.sum(t))} for t in terms])


def score_token(group: Group, hp: dict, probe) -> GroupScore:
    # EM-RL-Token (Agarwal et al.): r = −Σ_t H_t
    return _score(group, hp, probe, "entropy", em_token_reward, "mean_token_entropy", "token_entropy_sum")


def score_sequence(group: Group, hp: dict, probe) -> GroupScore:
    # EM-RL-Sequence: r = Σ_t log p(y_t) = log π(y|x)
    return _score(group, hp, probe, "logprob", em_sequence_reward, "mean_token_logprob", "sequence_logprob")


TOKEN = Method(
    name="em_token",
    title="EM-RL-Token",
    paper=_PAPER,
    label_free=True,
    description="Reward = − summed token entropy of the rollout (Agarwal et al.: r = −Σ_t H_t).",
    defaults_source=COMPARISON_SOURCE + ".",
    hyperparameters=shared(**COMPARISON_SETUP) + (_AGGREGATION,),
    scorer=score_token,
    search_extras=("mean_token_entropy",),
)

SEQUENCE = Method(
    name="em_sequence",
    title="EM-RL-Sequence",
    paper=_PAPER,
    label_free=True,
    description="Reward = log-probability of the rollout, a sum over its tokens (sequence-level entropy minimisation).",
    defaults_source=COMPARISON_SOURCE + ".",
    hyperparameters=shared(**COMPARISON_SETUP) + (_AGGREGATION,),
    scorer=score_sequence,
    search_extras=("mean_token_logprob",),
)
