"""Group scorers: one prompt's n_votes rollouts in, one reward per rollout out, per method.

A scorer sees a `Group` (the prompt, the rollouts' texts, answers, token ids and
embeddings) and, only for the reference methods, `group.reference`. Held-out labels
never reach a label-free scorer: the trainer fills `reference` only for darl / rlpr
(from the prompt row's `reference` field) and rlvr (from the label, on purpose: it is
the supervised upper bound). Scorers that need the policy (COMPASS, the entropy
minimisation baselines, RLPR, DARL) get it through `probe`, a `PolicyProbe`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from rl.answers import answers_equal, extract_boxed, majority_vote
from rl.probes import TokenStatistics, answer_probabilities, token_statistics
from rl.rewards.baselines import em_sequence_reward, em_token_reward, rlvr_rewards, self_consistency_rewards
from rl.rewards.compass import dcar, decisive_path_reward, trajectory_confidence
from rl.rewards.darl import darl_reward
from rl.rewards.evolrl import INVALID_REWARD, evol_rl_answer, novelty_scores
from rl.rewards.ttrl import ttrl_rewards


@dataclass
class Group:
    """One prompt's rollouts at one step, as the scorers see them."""

    prompt_id: str
    prompt: str
    texts: list[str]
    answers: list[str | None]  # extracted with the method's own rule (ANSWER_RULES)
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    embeddings: np.ndarray  # G×d, L2-normalised, of rl.similarity.reasoning_part(text)
    reference: str | None = None  # darl / rlpr: the row's `reference`; rlvr: the label; else None


@dataclass
class GroupScore:
    """A method's verdict on one prompt's rollouts."""

    rewards: list[float]
    majority_answer: str | None
    extras: list[dict] | None = None  # one dict per rollout: the event's `extra`
    metrics: dict[str, float] = field(default_factory=dict)  # method-prefixed, averaged over groups by the trainer


class PolicyProbe:
    """The policy's view of its own rollouts, for the rewards that need more than text."""

    def __init__(self, model: Any, tokenizer: Any, temperature: float):
        self.model, self.tokenizer, self.temperature = model, tokenizer, temperature

    def token_statistics(self, group: Group) -> list[TokenStatistics]:
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return token_statistics(self.model, [group.prompt_ids] * len(group.completion_ids), group.completion_ids,
                                temperature=self.temperature, pad_id=pad)

    def answer_probabilities(self, prefixes: Sequence[str], answers: Sequence[str]) -> list[float]:
        return answer_probabilities(self.model, self.tokenizer, prefixes, answers)


# ---------------------------------------------------------------- the methods


def score_ttrl(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    majority = majority_vote(group.answers)  # TTRL: y* = the most frequent answer among the n_votes rollouts
    return GroupScore(rewards=ttrl_rewards(group.answers, majority), majority_answer=majority)


def score_evol_rl(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    """Majority from all n_votes; novelty among the n_train trained rollouts (EVOL-RL §4.1: vote 64, train 32)."""
    n = hp["n_train"]
    majority = majority_vote(group.answers)
    scores = novelty_scores(group.answers[:n], group.embeddings[:n], alpha=hp["alpha"], majority=majority)
    rewards, extras = [], []
    for j, answer in enumerate(group.answers):
        in_majority = answer is not None and answers_equal(answer, majority)
        novelty = scores.normalized[j] if j < n and hp["use_novelty"] else None
        if answer is None:
            reward = INVALID_REWARD  # EVOL-RL App. C.4: no \boxed{} with a digit → −1
        elif novelty is None:
            reward = 0.75 if in_majority else -0.75  # band middle: the "−Novelty" ablation, or not trained on
        elif in_majority:
            reward = 0.5 + 0.5 * novelty  # EVOL-RL reward mapping: majority band [0.5, 1]
        else:
            reward = -1.0 + 0.5 * novelty  # EVOL-RL reward mapping: minority band [−1, −0.5]
        rewards.append(reward)
        extras.append({"novelty_raw": scores.raw[j] if j < n else None, "novelty": novelty,
                       "mean_similarity": scores.mean_similarity[j] if j < n else None,
                       "max_similarity": scores.max_similarity[j] if j < n else None})
    raw = [x for x in scores.raw if x is not None]
    metrics = {"evol_rl/invalid_ratio": sum(a is None for a in group.answers) / len(group.answers)}
    if raw:
        metrics["evol_rl/novelty_mean"] = float(np.mean(raw))
    return GroupScore(rewards=rewards, majority_answer=majority, extras=extras, metrics=metrics)


def score_compass(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
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


def reasoning_prefix(text: str) -> str:
    """z: the rollout up to where its final answer starts (after the last `\\boxed{`), or all of it plus `\\boxed{`."""
    index = text.rfind("\\boxed{")
    return text[: index + len("\\boxed{")] if index >= 0 else text + " \\boxed{"


def _reference_probabilities(group: Group, probe: PolicyProbe, reference: str) -> tuple[list[float], list[float]]:
    """r(y*, z, x) and r(y, z, x) for every rollout (r(y) = 0 without an answer), in one batched pass."""
    prefixes = [group.prompt + reasoning_prefix(text) for text in group.texts]
    answered = [j for j, a in enumerate(group.answers) if a is not None]
    probabilities = probe.answer_probabilities(prefixes + [prefixes[j] for j in answered],
                                               [reference] * len(prefixes) + [group.answers[j] for j in answered])
    r_ref = probabilities[: len(prefixes)]
    r_gen = [0.0] * len(prefixes)
    for j, p in zip(answered, probabilities[len(prefixes):]):
        r_gen[j] = p
    return r_ref, r_gen


def score_darl(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    majority = majority_vote(group.answers)
    reference = majority if hp["use_majority_as_reference"] else group.reference
    if reference is None:  # label-free variant and nobody answered: no pseudo-reference, no signal
        return GroupScore(rewards=[0.0] * len(group.texts), majority_answer=majority,
                          extras=[{"r_ref": None, "r_gen": None} for _ in group.texts])
    r_ref, r_gen = _reference_probabilities(group, probe, reference)
    # DARL Eq. (3)–(4) (static τ) or Eq. (6) (dynamic threshold r(y*)/γ when tau is null)
    rewards = [darl_reward(a, b, beta=hp["beta"], gamma=hp["gamma"], tau=hp["tau"]) for a, b in zip(r_ref, r_gen)]
    bonus = [r - (1.0 - hp["beta"]) * a > 1e-12 for r, a in zip(rewards, r_ref)]
    extras = [{"r_ref": a, "r_gen": b, "diversity_bonus": flag} for a, b, flag in zip(r_ref, r_gen, bonus)]
    metrics = {"darl/r_ref_mean": float(np.mean(r_ref)), "darl/r_gen_mean": float(np.mean(r_gen)),
               "darl/bonus_ratio": float(np.mean(bonus))}
    return GroupScore(rewards=rewards, majority_answer=majority, extras=extras, metrics=metrics)


def score_rlpr(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    r_ref, r_gen = _reference_probabilities(group, probe, group.reference)
    # RLPR: r = (1/|y*|) Σ_i p_θ(y*_i | x, z, y*_<i)
    return GroupScore(rewards=r_ref, majority_answer=majority_vote(group.answers),
                      extras=[{"r_ref": a, "r_gen": b} for a, b in zip(r_ref, r_gen)],
                      metrics={"rlpr/r_ref_mean": float(np.mean(r_ref))})


def score_em_token(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    stats = probe.token_statistics(group)
    rewards = [em_token_reward(s.entropy) for s in stats]  # EM-RL-Token: r = −(1/T) Σ_t H_t
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers),
                      extras=[{"mean_token_entropy": -r} for r in rewards])


def score_em_sequence(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    stats = probe.token_statistics(group)
    rewards = [em_sequence_reward(s.logprob) for s in stats]  # EM-RL-Sequence: r = (1/T) Σ_t log p(y_t)
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers),
                      extras=[{"mean_token_logprob": r} for r in rewards])


def score_self_consistency(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    return GroupScore(rewards=self_consistency_rewards(group.answers), majority_answer=majority_vote(group.answers))


def score_rlvr(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    # supervised: reward 1 when the answer is equivalent to the label (DeepSeekMath's verifiable reward)
    return GroupScore(rewards=rlvr_rewards(group.answers, group.reference), majority_answer=majority_vote(group.answers))


Scorer = Callable[[Group, dict, PolicyProbe], GroupScore]
GROUP_SCORERS: dict[str, Scorer] = {
    "ttrl": score_ttrl, "evol_rl": score_evol_rl, "compass": score_compass, "darl": score_darl, "rlpr": score_rlpr,
    "em_token": score_em_token, "em_sequence": score_em_sequence, "self_consistency": score_self_consistency,
    "rlvr": score_rlvr,
}
# how each method reads a final answer; EVOL-RL counts a box without a digit as invalid (DESIGN §6)
ANSWER_RULES: dict[str, Callable[[str], str | None]] = {"evol_rl": evol_rl_answer}


def answer_rule(method: str) -> Callable[[str], str | None]:
    return ANSWER_RULES.get(method, extract_boxed)
