"""The pieces of the R-Zero loop (rl/rzero.py): sampling, the challenger reward, the solver trainer,
and event callbacks that keep one step counter across phases."""

from __future__ import annotations

import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from rl.answers import extract_boxed, majority_vote
from rl.arithmetic import CHALLENGER_PROMPT as SHORT_CHALLENGER_PROMPT
from rl.callbacks import GracefulStop, evolab_metrics
from rl.events import EventWriter
from rl.policy import DEFAULT_POLICY_DIR
from rl.rewards.rzero import (challenger_rewards, extract_question, repetition_penalties,
                              solver_agreement, uncertainty_reward)
from rl.metrics import majority_ratio, unique_answers
from rl.rewards.ttrl import ttrl_rewards

# R-Zero App. B.2, the challenger prompt (system and user message), for models that can follow it
PAPER_CHALLENGER_SYSTEM = (
    "You are an expert competition-math problem setter. FIRST, in your private scratch-pad, think step-by-step "
    "to design a brand-new, non-trivial problem. The problem could come from any field of mathematics, including "
    "but not limited to algebra, geometry, number theory, combinatorics, prealgebra, probability, statistics, and "
    "calculus. Aim for a difficulty such that fewer than 30% of advanced high-school students could solve it. "
    "Avoid re-using textbook clichés or famous contest problems. THEN, without revealing any of your private "
    "thoughts, output exactly the following two blocks: <question> {The full problem statement on one or more "
    "lines} </question> \\boxed{final_answer} Do NOT output anything else—no explanations, no extra markup.")
PAPER_CHALLENGER_USER = ("Generate one new, challenging reasoning question now. Remember to format the output "
                         "exactly as instructed.")


# ---------------------------------------------------------------- sampling


def challenger_prompt(model_path: Path, tokenizer) -> str:
    """The prompt p0 as text: the short one for the default policy, else the paper's, chat-formatted if possible."""
    if model_path.resolve() == DEFAULT_POLICY_DIR.resolve():
        return SHORT_CHALLENGER_PROMPT
    if tokenizer.chat_template:
        messages = [{"role": "system", "content": PAPER_CHALLENGER_SYSTEM},
                    {"role": "user", "content": PAPER_CHALLENGER_USER}]
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return f"{PAPER_CHALLENGER_SYSTEM}\n\n{PAPER_CHALLENGER_USER}\n"


@torch.no_grad()
def sample(model, tokenizer, prompts: list[str], n: int, hp: dict, batch_size: int = 64, stop=None) -> list[list[str]]:
    """`n` completions per prompt at the run's temperature and top_p; stops early (fewer rows) on a cancel."""
    was_training = model.training
    model.eval()
    expanded = [p for p in prompts for _ in range(n)]
    texts: list[str] = []
    try:
        for start in range(0, len(expanded), batch_size):
            if stop is not None and stop.requested:
                break
            batch = tokenizer(expanded[start:start + batch_size], return_tensors="pt", padding=True,
                              padding_side="left").to(model.device)
            out = model.generate(**batch, do_sample=True, temperature=hp["temperature"], top_p=hp["top_p"], top_k=0,
                                 max_new_tokens=hp["max_completion_length"], pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=tokenizer.eos_token_id)
            texts += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        model.train(was_training)
    return [texts[i * n:(i + 1) * n] for i in range(len(texts) // n)]


def solver_answers(solver, tokenizer, questions: list[str], hp: dict, stop=None) -> list[list[str | None]]:
    """The solver's m = solver_samples boxed answers to each question."""
    sampled = sample(solver, tokenizer, questions, hp["solver_samples"], hp, stop=stop)
    return [[extract_boxed(t) for t in texts] for texts in sampled]


# ---------------------------------------------------------------- phase 1: the challenger's reward


class ChallengerReward:
    """TRL reward function for the challenger: one batch of questions in, max(0, r_unc − r_rep) out.

    The repetition penalty is over the whole step's batch (all groups), as in the paper; the
    `group` records it builds are written by PhaseEvents at the end of the step.
    """

    def __init__(self, solver, tokenizer, hp: dict, group_size: int):
        self.solver, self.tokenizer, self.hp, self.group_size = solver, tokenizer, hp, group_size
        self.pending_groups: list[dict] = []
        self.__name__ = "rzero_challenger"  # TRL names reward functions by __name__

    def __call__(self, prompts, completions, completion_ids, prompt_id, log_metric, **_unused) -> list[float]:
        hp = self.hp
        questions = [extract_question(text) for text in completions]  # format check: None when it fails
        valid = [i for i, q in enumerate(questions) if q is not None]
        answered = solver_answers(self.solver, self.tokenizer, [questions[i] for i in valid], hp)
        answers: list[list[str | None]] = [[] for _ in questions]
        for i, a in zip(valid, answered):
            answers[i] = a
        # r_i = max(0, r_uncertainty − r_rep), 0 on a format failure  (R-Zero §2.2)
        rewards = challenger_rewards(questions, answers, hp["bleu_threshold"], hp["repetition_weight"])
        penalties = dict(zip(valid, repetition_penalties([questions[i] for i in valid], hp["bleu_threshold"],
                                                         hp["repetition_weight"])))
        uncertainty = {i: uncertainty_reward(answers[i]) for i in valid}
        p_hat = {i: solver_agreement(answers[i]) for i in valid}

        log_metric("rzero/format_rate", len(valid) / len(questions))
        if valid:
            log_metric("rzero/uncertainty_mean", sum(uncertainty.values()) / len(valid))
            log_metric("rzero/repetition_penalty_mean", sum(penalties.values()) / len(valid))
            log_metric("rzero/p_hat_mean", sum(p_hat.values()) / len(valid))
        self.pending_groups = self._groups(prompt_id, completions, completion_ids, questions, answers, rewards,
                                           uncertainty, penalties, p_hat)
        return rewards

    def _groups(self, prompt_id, completions, completion_ids, questions, answers, rewards, uncertainty, penalties,
                p_hat) -> list[dict]:
        """One `group` event per GRPO group; a rollout's `answer` is its question (None: format failure)."""
        g, groups = self.group_size, []
        for start in range(0, len(completions), g):
            advantages = _group_advantages(rewards[start:start + g])
            rollouts = []
            for j, i in enumerate(range(start, start + g)):
                extra = ({"p_hat": p_hat[i], "uncertainty": uncertainty[i], "repetition_penalty": penalties[i],
                          "solver_majority": majority_vote(answers[i])} if questions[i] is not None else {})
                rollouts.append(_rollout(j, completions[i], questions[i], False, rewards[i], advantages[j],
                                         len(completion_ids[i]), extra))
            groups.append({"prompt_id": prompt_id[start], "majority_answer": None, "similarity": None,
                           "rollouts": rollouts})
        return groups

    def pop_groups(self) -> list[dict]:
        groups, self.pending_groups = self.pending_groups, []
        return groups


# ---------------------------------------------------------------- phase 3: the solver's reward


class SolverReward:
    """TRL reward function for the solver: r_j = 1 if the answer equals ỹ_i else 0  (R-Zero §2.4).

    ỹ_i is the pseudo-label voted by the solver in the questions phase over solver_samples answers;
    it is not re-voted from these rollouts. Every rollout is trained on (the paper has no n_train).
    """

    def __init__(self, pseudo_labels: dict[str, str], group_size: int):
        self.pseudo_labels, self.group_size = pseudo_labels, group_size
        self.pending_groups: list[dict] = []
        self.__name__ = "rzero_solver"

    def __call__(self, prompts, completions, completion_ids, prompt_id, log_metric, **_unused) -> list[float]:
        started, g = time.perf_counter(), self.group_size
        answers = [extract_boxed(text) for text in completions]
        rewards, ratios, uniques, self.pending_groups = [], [], [], []
        for start in range(0, len(completions), g):
            rows = range(start, start + g)
            label = self.pseudo_labels[prompt_id[start]]
            group = ttrl_rewards([answers[i] for i in rows], label)  # agreement with the pseudo-label
            rewards += group
            own_majority = majority_vote([answers[i] for i in rows])
            ratios.append(majority_ratio([answers[i] for i in rows], own_majority))
            uniques.append(unique_answers([answers[i] for i in rows]))
            advantages = _group_advantages(group)
            self.pending_groups.append({"prompt_id": prompt_id[start], "majority_answer": label, "similarity": None,
                                        "rollouts": [_rollout(j, completions[i], answers[i], group[j] > 0, group[j],
                                                              advantages[j], len(completion_ids[i]), {})
                                                     for j, i in enumerate(rows)]})
        log_metric("majority_ratio", sum(ratios) / len(ratios))
        log_metric("unique_answers", sum(uniques) / len(uniques))
        log_metric("time/reward", time.perf_counter() - started)
        return rewards

    def pop_groups(self) -> list[dict]:
        groups, self.pending_groups = self.pending_groups, []
        return groups


def _group_advantages(rewards: list[float]) -> list[float]:
    """A = (r − mean) / (std + 1e-4) over the group, TRL's scale_rewards="group" (Bessel-corrected std)."""
    g = len(rewards)
    mean = sum(rewards) / g
    std = (sum((r - mean) ** 2 for r in rewards) / max(1, g - 1)) ** 0.5
    return [(r - mean) / (std + 1e-4) for r in rewards]


def _rollout(index, text, answer, in_majority, reward, advantage, length, extra) -> dict:
    """One rollout of a `group` event (DESIGN section 4.2); entropies are not captured in R-Zero phases."""
    return {"index": index, "text": text, "answer": answer, "valid": answer is not None, "in_majority": in_majority,
            "reward": float(reward), "advantage": float(advantage), "length": length, "used_for_training": True,
            "entropy": None, "extra": extra}


# ---------------------------------------------------------------- events with one step counter across phases


class StepOffsetEvents:
    """An EventWriter whose step-carrying events are shifted by the steps of the earlier phases."""

    def __init__(self, events: EventWriter, offset: int):
        self.events, self.offset = events, offset

    def metrics(self, step, values):
        return self.events.metrics(step + self.offset, values)

    def group(self, step, **fields):
        return self.events.group(step + self.offset, **fields)

    def eval(self, step, prompt_set, values):
        return self.events.eval(step + self.offset, prompt_set, values)

    def __getattr__(self, name):  # sync, log, ...
        return getattr(self.events, name)


class PhaseEvents(TrainerCallback):
    """`group` and `metrics` events of a GRPO phase. The solver logs DESIGN section 5 names; the challenger
    logs them as rzero/challenger_* so that the solver's charts (reward/mean, entropy, ...) stay the solver's."""

    def __init__(self, events: StepOffsetEvents, reward, prefix: str | None = None):
        self.events, self.reward, self.prefix = events, reward, prefix
        self._started = None

    def on_step_begin(self, args, state, control, **kwargs):
        self._started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        for group in self.reward.pop_groups():
            self.events.group(state.global_step, **group)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "train_runtime" in logs:  # the end-of-training summary is not a step
            return
        values = evolab_metrics(logs)
        if self._started is not None:
            values["time/step"] = time.perf_counter() - self._started
        if self.prefix:
            values = {name if name.startswith("rzero/") else f"{self.prefix}{name.replace('/', '_')}": value
                      for name, value in values.items()}
        self.events.metrics(state.global_step, values)
        self.events.sync()


class StopAtStepEnd(TrainerCallback):
    """On a cancel, end the phase after the step in progress (no TRL checkpoint: resume is per phase)."""

    def __init__(self, stop: GracefulStop):
        self.stop = stop

    def on_step_end(self, args, state, control, **kwargs):
        if self.stop.requested:
            control.should_training_stop = True
        return control
