"""EVOL-RL: majority drives selection (reward bands), semantic novelty promotes variation within each band."""

from __future__ import annotations

import numpy as np

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, bool_param, float_param, shared
from rl.rewards.evolrl import INVALID_REWARD, evol_rl_answer, novelty_scores
from rl.rewards.ttrl import ttrl_rewards

# EVOL-RL §4 (App. C, verl/examples/labelfree/*.sh): every method it compares, its TTRL, EM-RL and self-consistency
# baselines included, runs TTRL's 64 votes / 32 trained with 12,288 response tokens (K=12). The baselines take this
# setup so that a comparison with EVOL-RL differs only in what EVOL-RL adds.
# verl's loss there is the token mean of each micro-batch of 2 rollouts (ppo_micro_batch_size_per_gpu=2, no dynamic
# batching), averaged: per rollout, nearly, as EVOL-RL Eq. (1) writes it: loss_type "grpo"
COMPARISON_SETUP = {"max_completion_length": 12288, "loss_type": "grpo"}
COMPARISON_SOURCE = ("EVOL-RL §4, which compares it (verl/examples/labelfree/ttrl_baseline.sh: 64 votes, 32 trained, "
                     "8 prompts a step, 1 per update, 12,288 response tokens, lr 5e-7 cosine after a 3% warmup, "
                     "KL 0.001, token means over micro-batches of 2 rollouts: loss_type 'grpo')")


def score(group: Group, hp: dict, probe) -> GroupScore:
    """Majority and novelty over all n_votes rollouts; the trainer trains on the first n_train (DESIGN §6).

    As the released code: s̄ within the response's own answer group and m over every other valid response,
    both among all n_votes rollouts, so the untrained rollouts shape the trained ones' novelty and carry
    their own real reward and novelty in the group event. use_novelty=false is the "−Novelty Reward"
    ablation (EVOL-RL Table 4): the novelty-aware reward is removed and TTRL's 1/0 majority reward remains.
    """
    majority = majority_vote(group.answers)
    metrics = {"evol_rl/invalid_ratio": sum(a is None for a in group.answers) / len(group.answers)}
    if not hp["use_novelty"]:
        return GroupScore(rewards=ttrl_rewards(group.answers, majority), majority_answer=majority,
                          extras=[{"novelty_raw": None, "novelty": None, "mean_similarity": None,
                                   "max_similarity": None} for _ in group.answers], metrics=metrics)
    scores = novelty_scores(group.answers, group.embeddings, alpha=hp["alpha"], majority=majority)
    rewards, extras = [], []
    for j, answer in enumerate(group.answers):
        novelty = scores.normalized[j]
        if answer is None or novelty is None:
            reward = INVALID_REWARD  # EVOL-RL App. C.4: no \boxed{} with a digit → −1
        elif scores.in_majority[j]:
            reward = 0.5 + 0.5 * novelty  # EVOL-RL reward mapping: majority band [0.5, 1]
        else:
            reward = -1.0 + 0.5 * novelty  # EVOL-RL reward mapping: minority band [−1, −0.5]
        rewards.append(reward)
        extras.append({"novelty_raw": scores.raw[j], "novelty": novelty,
                       "mean_similarity": scores.mean_similarity[j], "max_similarity": scores.max_similarity[j]})
    raw = [x for x in scores.raw if x is not None]
    if raw:
        metrics["evol_rl/novelty_mean"] = float(np.mean(raw))
    return GroupScore(rewards=rewards, majority_answer=majority, extras=extras, metrics=metrics)


METHOD = Method(
    name="evol_rl",
    title="EVOL-RL",
    paper="On the Evolution of Language Models without Labels: Majority Drives Selection, Novelty Promotes "
          "Variation (EVOL-RL)",
    label_free=True,
    description="Majority selects (reward bands [0.5, 1] / [-1, -0.5]); semantic novelty ranks within each band.",
    defaults_source="EVOL-RL App. C Tables 2-3: train batch 8, PPO mini-batch 1 (32 rollouts), 64 votes, 32 "
                    "trained, temperature 1.0 (0.6 for validation), lr 5e-7, KL loss 0.001, clip-high 0.28, "
                    "entropy coefficient 0.003, α 0.5; 12,288 response tokens (§4); the cosine schedule after a 3% "
                    "warmup of verl/examples/labelfree/evol_rl.sh (whose --ent defaults to 0: the paper's 0.003 is "
                    "kept).",
    hyperparameters=shared(epsilon_high=0.28, entropy_coef=0.003, **COMPARISON_SETUP) + (
        float_param("alpha", 0.5, "Novelty mixing: u = 1 − (α·mean similarity in own group + (1 − α)·max "
                    "similarity).", 0.0, 1.0),
        bool_param("use_novelty", True, "Ablation (\"−Novelty Reward\"): with false the reward falls back to "
                   "TTRL's: 1 for the majority answer, 0 otherwise."),
        bool_param("use_entropy_bonus", True, "Ablation: with false entropy_coef is ignored (set to 0)."),
        bool_param("use_clip_high", True, "Ablation: with false epsilon_high is ignored (symmetric clipping with "
                   "epsilon)."),
    ),
    scorer=score,
    rewards_the_vote=True,  # reward_accuracy (TTRL §4) is charted with labels
    # EVOL-RL counts a box without a digit as invalid (DESIGN §6)
    answer_rule=evol_rl_answer,
    metric_prefix="evol_rl",
    scoring_timer="time/novelty",  # EVOL-RL's compute-overhead analysis (conference version)
    charts=("similarity/mean", "evol_rl/novelty_mean"),
    search_extras=("novelty", "mean_similarity"),
)
