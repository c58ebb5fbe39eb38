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

from rl.answers import extract_boxed, majority_vote
from rl.probes import (TokenStatistics, answer_probabilities, answer_probabilities_from_ids, completion_prefix_ids,
                       token_statistics)
from rl.rewards.baselines import (em_sequence_reward, em_token_reward, rlpr_debiased_reward, rlpr_std_filter,
                                  rlvr_rewards, self_consistency_rewards)
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
    skip_training: bool = False  # RLPR std filtering: the trainer leaves this group's rollouts out of the update


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

    def _prompt_ids(self, group: Group) -> list[int]:
        # the exact ids the rollouts continued; a group built without them (tests, tools) tokenises the prompt
        return list(group.prompt_ids) or list(self.tokenizer(group.prompt, add_special_tokens=False)["input_ids"])

    def reasoning_prefix_ids(self, group: Group) -> list[list[int]]:
        """x ⊕ z of each rollout as ids: the prompt ids and the generated ids up to where the final answer starts."""
        prompt_ids = self._prompt_ids(group)
        return [completion_prefix_ids(self.tokenizer, prompt_ids, ids, reasoning_prefix(text))
                for ids, text in zip(group.completion_ids, group.texts)]

    def answer_prefix_ids(self, group: Group) -> list[int]:
        """x ⊕ answer opener, without reasoning: the context of RLPR's debiasing term r′."""
        return self._prompt_ids(group) + list(self.tokenizer(ANSWER_OPENER, add_special_tokens=False)["input_ids"])

    def answer_probabilities_from_ids(self, prefix_ids: Sequence[Sequence[int]], answers: Sequence[str]) -> list[float]:
        return answer_probabilities_from_ids(self.model, self.tokenizer, prefix_ids, answers)


# ---------------------------------------------------------------- the methods


def score_ttrl(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    majority = majority_vote(group.answers)  # TTRL: y* = the most frequent answer among the n_votes rollouts
    return GroupScore(rewards=ttrl_rewards(group.answers, majority), majority_answer=majority)


def score_evol_rl(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
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


ANSWER_OPENER = "\\boxed{"  # where a final answer starts in a rollout (the papers' boxed-answer format)


def reasoning_prefix(text: str) -> str:
    """z: the rollout up to where its final answer starts (after the last `\\boxed{`), or all of it plus `\\boxed{`."""
    index = text.rfind(ANSWER_OPENER)
    return text[: index + len(ANSWER_OPENER)] if index >= 0 else text + " " + ANSWER_OPENER


def _reference_probabilities(group: Group, probe: PolicyProbe, reference: str) -> tuple[list[float], list[float]]:
    """r(y*, z, x) and r(y, z, x) for every rollout (r(y) = 0 without an answer), in one batched pass.

    x ⊕ z is scored as the exact generated ids (DESIGN §6), the prompt's BOS included.
    """
    prefixes = probe.reasoning_prefix_ids(group)
    answered = [j for j, a in enumerate(group.answers) if a is not None]
    probabilities = probe.answer_probabilities_from_ids(prefixes + [prefixes[j] for j in answered],
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
    r_ref, r_gen = _reference_probabilities(group, probe, group.reference)  # RLPR: r = (1/|y*|) Σ_i p_θ(y*_i | x, z, y*_<i)
    r_prime = None
    rewards = list(r_ref)
    if hp.get("use_debiasing", True):
        # RLPR reward debiasing: r′ = the same mean probability given x without z; r̂ = clip(r − r′, 0, 1)
        r_prime = probe.answer_probabilities_from_ids([probe.answer_prefix_ids(group)], [group.reference])[0]
        rewards = [rlpr_debiased_reward(r, r_prime) for r in r_ref]
    # RLPR standard deviation filtering: a group with std(r̂) < β is not trained on
    skip = rlpr_std_filter(rewards, hp.get("std_filter_threshold", 0.0))
    extras = [{"r_ref": a, "r_gen": b, "r_ref_without_reasoning": r_prime} for a, b in zip(r_ref, r_gen)]
    metrics = {"rlpr/r_ref_mean": float(np.mean(r_ref)), "rlpr/reward_std": float(np.std(rewards)),
               "rlpr/filtered_ratio": float(skip)}
    if r_prime is not None:
        metrics["rlpr/r_ref_without_reasoning_mean"] = float(r_prime)
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers), extras=extras, metrics=metrics,
                      skip_training=skip)


def score_em_token(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    stats = probe.token_statistics(group)
    aggregation = hp.get("aggregation", "sum")
    rewards = [em_token_reward(s.entropy, aggregation) for s in stats]  # EM-RL-Token (Agarwal et al.): r = −Σ_t H_t
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers),
                      extras=[{"mean_token_entropy": float(np.mean(s.entropy)) if s.entropy else 0.0,
                               "token_entropy_sum": float(np.sum(s.entropy))} for s in stats])


def score_em_sequence(group: Group, hp: dict, probe: PolicyProbe) -> GroupScore:
    stats = probe.token_statistics(group)
    aggregation = hp.get("aggregation", "sum")
    rewards = [em_sequence_reward(s.logprob, aggregation) for s in stats]  # EM-RL-Sequence: r = Σ_t log p(y_t) = log π(y|x)
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers),
                      extras=[{"mean_token_logprob": float(np.mean(s.logprob)) if s.logprob else 0.0,
                               "sequence_logprob": float(np.sum(s.logprob))} for s in stats])


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
