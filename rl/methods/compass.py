"""COMPASS: a confidence-weighted vote with credibility (DCAR) plus the decisiveness of the path (DPR)."""

from __future__ import annotations

import numpy as np

from rl.groups import Group, GroupScore
from rl.methods.schema import Method, bool_param, shared
from rl.rewards.compass import dcar, decisive_path_reward, trajectory_confidence


def score(group: Group, hp: dict, probe) -> GroupScore:
    stats = probe.token_statistics(group)
    confidences = [trajectory_confidence(s.top1, s.top2) for s in stats]  # COMPASS Eq. (2)–(3)
    verdict = dcar(group.answers, confidences, hp["use_confidence_weighting"], hp["use_credibility"])
    # COMPASS Eq. (10)–(12): entropy-weighted decisiveness of the path
    decisiveness = [decisive_path_reward(s.top1, s.top2, s.entropy) for s in stats]
    # COMPASS Eq. (1): R = R_outcome (DCAR) + R_process (DPR)
    rewards = [o + (d if hp["use_dpr"] else 0.0) for o, d in zip(verdict.rewards, decisiveness)]
    extras = [{"confidence": c, "decisiveness": d, "credibility": verdict.credibility}
              for c, d in zip(confidences, decisiveness)]
    metrics = {"compass/credibility_mean": verdict.credibility, "compass/confidence_mean": float(np.mean(confidences)),
               "compass/decisiveness_mean": float(np.mean(decisiveness))}
    return GroupScore(rewards=rewards, majority_answer=verdict.pseudo_label, extras=extras, metrics=metrics)


METHOD = Method(
    name="compass",
    title="COMPASS",
    paper="Rewarding the Journey, Not Just the Destination: A Composite Path and Answer Self-Scoring Reward "
          "Mechanism (COMPASS)",
    label_free=True,
    description="Confidence-weighted vote with credibility (DCAR) plus entropy-weighted decisiveness of the path (DPR).",
    defaults_source="COMPASS §4.1: GRPO, lr 5e-7 cosine (AdamW), 64 responses for the vote at temperature 0.6 "
                    "(1.0 for Qwen2.5-Math), 32 trained; below 7B the settings of the TTRL paper (the shared "
                    "defaults: 8 prompts a step, 3,072 tokens).",
    hyperparameters=shared(temperature=0.6) + (
        bool_param("use_confidence_weighting", True, "Ablation: with false the pseudo-label is a plain majority vote."),
        bool_param("use_credibility", True, "Ablation: with false agreeing answers get 1 instead of the credibility."),
        bool_param("use_dpr", True, "Ablation: with false the Decisive Path Reward is left out."),
    ),
    scorer=score,
    rewards_the_vote=True,  # reward_accuracy (TTRL §4) is charted with labels
    metric_prefix="compass",
    charts=("similarity/mean", "compass/credibility_mean"),
    search_extras=("confidence", "credibility"),
)
