"""Intuitor / RLIF (Zhao et al. 2025, "Learning to Reason without External Rewards", arXiv 2505.19590).

The reward of a response is its self-certainty, the mean over its tokens of KL(U ‖ p_θ(·| q, o_<i)) with U
uniform over the vocabulary (Eq. (4)); GRPO then normalises it within the prompt's group (Eq. (6)).

What the paper leaves open, settled by the released code (github sunblaze-ucb/Intuitor):

- temperature: the paper's runs (Open-R1, Sec. 4 "Training Setup") compute self-certainty on the raw
  logits, i.e. at temperature 1, although they sample at 0.9 (open-r1-intuitor/src/open_r1/
  intuitor_trainer.py, ``_get_per_token_self_certainty``: ``logsumexp(logits) - logits.mean()`` with no
  division by ``self.temperature``, which ``_get_per_token_logps`` does apply). The verl port divides by the
  rollout temperature, whose default there is 1.0, so both releases score the distribution at T = 1.
  `rl.probes.token_statistics` therefore uses the raw logits (``SELF_CERTAINTY_TEMPERATURE``).
- vocabulary: |V| is the width of the model's output layer, padding rows of the embedding matrix included
  (both releases reduce over the full ``logits`` last dimension).
- per-token mean over the response tokens (EOS included, padding excluded), 0 for an empty response
  (``_get_advantage_from_sce``; verl ``masked_mean`` over ``response_mask``).
- the code drops the constant −log|V| ("equivalent ... as we normalize it in batch"); this module keeps it,
  so that a uniform distribution scores exactly 0 as in Eq. (4). Group normalisation removes the difference.

numpy only; the torch version over a whole forward pass lives in `rl.probes`.
"""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np


def _logsumexp(z: np.ndarray) -> np.ndarray:
    m = np.max(z, axis=-1, keepdims=True)
    return (m + np.log(np.sum(np.exp(z - m), axis=-1, keepdims=True)))[..., 0]


def self_certainty(logits: Sequence[float] | np.ndarray, temperature: float = 1.0) -> float | np.ndarray:
    """KL(U ‖ p) of each distribution p = softmax(logits / temperature) over the last axis.

    ``logits`` is one row (|V|,) → a float, or any (..., |V|) array → an array of (...). Log-probabilities are
    logits too (softmax is shift-invariant), so log p gives the same number. Always ≥ 0; 0 exactly when p is
    uniform; it grows without bound as p concentrates on few tokens (mode-seeking, Sec. 3.3), unlike
    KL(p ‖ U) = log|V| − H(p), which is bounded by log|V|.
    """
    z = np.asarray(logits, dtype=np.float64)
    if z.ndim == 0 or z.shape[-1] == 0:
        raise ValueError("self_certainty needs at least one vocabulary entry on the last axis")
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    z = z / temperature
    vocab = z.shape[-1]
    # Intuitor Eq. (4): KL(U ‖ p) = −(1/|V|) Σ_j log(|V| · p_j) = logsumexp(z) − mean_j(z) − log|V|
    value = _logsumexp(z) - z.mean(axis=-1) - math.log(vocab)
    value = np.maximum(value, 0.0)  # KL ≥ 0; clears float round-off around the uniform distribution
    return float(value) if np.ndim(value) == 0 else value


def self_certainty_reward(per_token: Sequence[float] | np.ndarray) -> float:
    """The response's self-certainty: the mean of its per-token values; 0.0 for an empty response.

    # Intuitor Eq. (4): Self-certainty(o|q) = (1/|o|) Σ_{i=1}^{|o|} KL(U ‖ p_πθ(·|q, o_<i)); u_i of Eq. (6)
    """
    values = np.asarray(per_token, dtype=np.float64)
    if values.size == 0:
        return 0.0  # released code: a zero-length completion gets 0 (open-r1 _get_advantage_from_sce)
    return float(values.mean())
