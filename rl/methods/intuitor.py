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
- the code drops the constant −log|V| ("equivalent ... as we normalize it in batch"); `rl.probes` keeps it,
  so that a uniform distribution scores exactly 0 as in Eq. (4). Group normalisation removes the difference.

The per-token KL(U ‖ p) comes from the policy probe's forward pass (`rl.probes.token_statistics`); this module
averages it over the response.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, shared


def self_certainty_reward(per_token: Sequence[float] | np.ndarray) -> float:
    """The response's self-certainty: the mean of its per-token values; 0.0 for an empty response.

    # Intuitor Eq. (4): Self-certainty(o|q) = (1/|o|) Σ_{i=1}^{|o|} KL(U ‖ p_πθ(·|q, o_<i)); u_i of Eq. (6)
    """
    values = np.asarray(per_token, dtype=np.float64)
    if values.size == 0:
        return 0.0  # released code: a zero-length completion gets 0 (open-r1 _get_advantage_from_sce)
    return float(values.mean())


def score(group: Group, hp: dict, probe) -> GroupScore:
    stats = probe.token_statistics(group)  # one forward pass; self-certainty at temperature 1 (rl/probes.py)
    # Intuitor Eq. (4): u(o|q) = (1/|o|) Σ_i KL(U ‖ π_θ(·|q, o_<i)); the GRPO advantage (Eq. (6)) is the trainer's
    rewards = [self_certainty_reward(s.self_certainty) for s in stats]
    extras = [{"self_certainty": r} for r in rewards]
    metrics = {"intuitor/self_certainty_mean": float(np.mean(rewards))}
    # no vote in the reward: the majority answer is reported for the dashboard only
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers), extras=extras, metrics=metrics)


METHOD = Method(
    name="intuitor",
    title="Intuitor (RLIF)",
    paper="Zhao et al. 2025, Learning to Reason without External Rewards (Intuitor, arXiv:2505.19590)",
    label_free=True,
    description="Reward = self-certainty of the rollout: the mean over its tokens of KL(uniform ‖ p_θ), the "
                "policy's confidence in its own next-token distributions.",
    defaults_source="Intuitor §4 and Table 7 (Qwen2.5-1.5B/3B on MATH) and its recipes/Qwen2.5-3B/intuitor/"
                    "config_demo.yaml: group size 7, 128 problems per update, temperature 0.9, 3,072 completion "
                    "tokens, lr 3e-6 cosine with 10% warmup, KL β 0.005 (§4 and the config; Table 7's 0.0005 read "
                    "as a typo), clip 0.2. Self-certainty at temperature 1, as the released code.",
    hyperparameters=shared(n_votes=7, n_train=7, prompts_per_step=128, prompts_per_update=128, temperature=0.9,
                           max_completion_length=3072, learning_rate=3e-6, warmup_ratio=0.1, kl_coef=0.005),
    scorer=score,
    metric_prefix="intuitor",
    charts=("similarity/mean", "intuitor/self_certainty_mean"),
    search_extras=("self_certainty",),
)
