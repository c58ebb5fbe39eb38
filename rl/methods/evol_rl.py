"""EVOL-RL: majority drives selection (reward bands), semantic novelty promotes variation within each band.

Rewards live in non-overlapping bands: majority [0.5, 1], minority [−1, −0.5], invalid −1, so every majority
response beats every minority response and novelty only re-ranks within a band (DESIGN §6 fixes the edge cases).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from rl.answers import answers_equal, extract_boxed, majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, bool_param, float_param, shared
from rl.methods.setups import COMPARISON_SETUP
from rl.similarity import cosine_similarity_matrix
from rl.voting import ttrl_rewards

# EVOL-RL App. C.5: ε_norm in the min–max normalisation
EPS_NORM = 1e-8
LONE_RESPONSE_SIMILARITY = 0.5  # DESIGN §6: a lone valid response has similarity 0.5
EQUAL_SCORES_NOVELTY = 0.5  # normalised novelty of a group whose raw scores are all equal (→ ±0.75)
SINGLE_MEMBER_NOVELTY = 1.0  # → 1.0 for a lone majority response, −0.5 for a lone minority one
INVALID_REWARD = -1.0

_DIGIT = re.compile(r"\d")


def evol_rl_answer(completion: str) -> str | None:
    """The voting answer of a completion, or None when it is invalid.

    # EVOL-RL App. C.4: valid only if the last \\boxed{} exists and contains a digit
    """
    answer = extract_boxed(completion)
    if answer is None or not _DIGIT.search(answer):
        return None
    return answer


@dataclass(frozen=True)
class NoveltyScores:
    """Per-response diagnostics (None for invalid responses), for rewards and the dashboard."""

    in_majority: list[bool | None]
    mean_similarity: list[float | None]  # s̄_i: mean over the other members of its own group
    max_similarity: list[float | None]  # m_i: max over all other valid responses
    raw: list[float | None]  # u_i
    normalized: list[float | None]  # ũ_i, min–max within its group
    similarity: np.ndarray  # G×G cosine similarity clipped to [0, 1]; NaN where a response is invalid
    majority: str | None


def novelty_scores(
    answers: Sequence[str | None],
    embeddings: np.ndarray | Sequence[Sequence[float]],
    alpha: float = 0.5,
    majority: str | None = None,
) -> NoveltyScores:
    """Raw and group-normalised novelty of every valid response.

    ``answers[i]`` is None for an invalid response; ``embeddings`` is G×d and the rows of
    invalid responses are ignored. ``majority`` may be passed when it was voted over more
    rollouts than are scored here.
    """
    size = len(answers)
    vectors = np.asarray(embeddings, dtype=np.float64).reshape(size, -1) if size else np.zeros((0, 1))
    valid = np.array([answer is not None for answer in answers], dtype=bool)
    if majority is None:
        majority = majority_vote(answers)
    in_majority = np.array([answer is not None and answers_equal(answer, majority) for answer in answers], dtype=bool)

    similarity = np.full((size, size), np.nan)
    mean_sim = np.full(size, np.nan)
    max_sim = np.full(size, np.nan)
    valid_index = np.flatnonzero(valid)
    n_valid = valid_index.size
    if n_valid == 1:
        mean_sim[valid_index] = max_sim[valid_index] = LONE_RESPONSE_SIMILARITY
        similarity[valid_index, valid_index] = 1.0
    elif n_valid > 1:
        # EVOL-RL App. C.5: S = V Vᵀ on L2-normalised embeddings; clipped to [0, 1] as in the released code
        sub = np.clip(cosine_similarity_matrix(vectors[valid_index]), 0.0, 1.0)
        similarity[np.ix_(valid_index, valid_index)] = sub
        others = ~np.eye(n_valid, dtype=bool)
        # m_i: max similarity to any other valid response
        max_sim[valid_index] = np.where(others, sub, -np.inf).max(axis=1)
        sub_majority = in_majority[valid_index]
        for members in (sub_majority, ~sub_majority):
            count = int(members.sum())
            if count == 0:
                continue
            rows = np.flatnonzero(members)
            if count == 1:
                # a one-member group has no peers: fall back to the mean over all other valid responses
                peers = others[rows]
                mean_sim[valid_index[rows]] = (sub[rows] * peers).sum(axis=1) / (n_valid - 1)
            else:
                block = sub[np.ix_(rows, rows)]
                mean_sim[valid_index[rows]] = (block.sum(axis=1) - np.diag(block)) / (count - 1)

    # EVOL-RL §3 (B.2): u_i = 1 − (α·s̄_i + (1 − α)·m_i)
    raw = 1.0 - (alpha * mean_sim + (1.0 - alpha) * max_sim)
    normalized = np.full(size, np.nan)
    for members in (valid & in_majority, valid & ~in_majority):
        normalized[members] = _min_max_within_group(raw[members])

    def as_list(values: np.ndarray) -> list[float | None]:
        return [float(v) if ok else None for v, ok in zip(values, valid)]

    return NoveltyScores(
        in_majority=[bool(m) if ok else None for m, ok in zip(in_majority, valid)],
        mean_similarity=as_list(mean_sim),
        max_similarity=as_list(max_sim),
        raw=as_list(raw),
        normalized=as_list(normalized),
        similarity=similarity,
        majority=majority,
    )


def _min_max_within_group(raw: np.ndarray) -> np.ndarray:
    """ũ = (u − min u) / (max u − min u + ε_norm)  # EVOL-RL App. C.5

    DESIGN §6 edge cases: a one-member group gets 1, a group of equal scores 0.5.
    """
    if raw.size == 0:
        return raw
    if raw.size == 1:
        return np.array([SINGLE_MEMBER_NOVELTY])
    spread = raw.max() - raw.min()
    if spread < EPS_NORM:
        return np.full(raw.shape, EQUAL_SCORES_NOVELTY)
    return (raw - raw.min()) / (spread + EPS_NORM)


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
            reward = 0.5 + 0.5 * novelty  # EVOL-RL §3 (B.2) reward mapping: majority band [0.5, 1]
        else:
            reward = -1.0 + 0.5 * novelty  # EVOL-RL §3 (B.2) reward mapping: minority band [−1, −0.5]
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
