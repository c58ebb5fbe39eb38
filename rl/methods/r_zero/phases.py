"""The pieces of the R-Zero plan (rl/methods/r_zero/training.py): its prompts, sampling from a model that is not being trained
(the solver answering the challenger's questions), the challenger's batch scorer, and the event writer that
keeps one step counter across phases."""

from __future__ import annotations

from pathlib import Path

from rl.answers import extract_boxed
from rl.arithmetic import CHALLENGER_PROMPT as SHORT_CHALLENGER_PROMPT
from rl.methods.r_zero import (METHOD, PAPER_CHALLENGER_SYSTEM, PAPER_CHALLENGER_USER, challenger_questions,
                               score_challenger_batch)
from rl.events import EventWriter
from rl.groups import Group, GroupScore
from rl.policy import DEFAULT_POLICY_DIR
from rl.prompts import format_messages, format_prompt

# ---------------------------------------------------------------- prompts


def challenger_prompt(model_path: Path, tokenizer) -> str:
    """The prompt p0 as text: for the default policy the short task it learned (rl.arithmetic.CHALLENGER_PROMPT as
    the user turn, no system prompt, as scripts/train_default_policy.py trains it), else the paper's system and
    user messages; both through the policy's chat template."""
    if model_path.resolve() == DEFAULT_POLICY_DIR.resolve():
        return format_prompt(tokenizer, SHORT_CHALLENGER_PROMPT, None)
    return format_messages(tokenizer, [{"role": "user", "content": PAPER_CHALLENGER_USER}], PAPER_CHALLENGER_SYSTEM)


def solver_prompt(tokenizer, question: str) -> str:
    """A question as the solver sees it: R-Zero App. B.2's solver system message, through the chat template."""
    return format_prompt(tokenizer, question, METHOD.system_prompt)


def solver_rows(tokenizer, kept: list[dict]) -> list[dict]:
    """The solver phase's dataset: the kept questions, formatted, under their ids (nothing else reaches TRL)."""
    return [{"prompt": solver_prompt(tokenizer, row["question"]), "prompt_id": row["id"]} for row in kept]


# ---------------------------------------------------------------- sampling


def sample(model, tokenizer, prompts: list[str], n: int, hp: dict, batch_size: int = 64, stop=None,
           top_k: int = 0) -> list[list[str]]:
    """`n` completions per prompt at the run's temperature and top_p; stops early (fewer rows) on a cancel."""
    import torch  # here: rl.train imports this module (through rl.methods.r_zero.training) before it has checked the config

    was_training = model.training
    model.eval()
    expanded = [p for p in prompts for _ in range(n)]
    texts: list[str] = []
    try:
        with torch.no_grad():
            for start in range(0, len(expanded), batch_size):
                if stop is not None and stop.requested:
                    break
                batch = tokenizer(expanded[start:start + batch_size], return_tensors="pt", padding=True,
                                  padding_side="left").to(model.device)
                out = model.generate(**batch, do_sample=True, temperature=hp["temperature"], top_p=hp["top_p"],
                                     top_k=top_k, max_new_tokens=hp["max_completion_length"],
                                     pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id)
                texts += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    finally:
        model.train(was_training)
    return [texts[i * n:(i + 1) * n] for i in range(len(texts) // n)]


def solver_answers(solver, tokenizer, questions: list[str], hp: dict, stop=None) -> list[list[str | None]]:
    """The solver's m = solver_samples boxed answers to each question, asked as it is trained (solver_prompt)."""
    prompts = [solver_prompt(tokenizer, question) for question in questions]
    if hp.get("variant") == "release":
        # question_evaluate/evaluate.py: SamplingParams(temperature=1.0, top_p=1.0, top_k=40, max_tokens=4096); the
        # temperature and length stay the run's (R-Zero's defaults are those)
        sampled = sample(solver, tokenizer, prompts, hp["solver_samples"], {**hp, "top_p": 1.0}, stop=stop, top_k=40)
    else:
        sampled = sample(solver, tokenizer, prompts, hp["solver_samples"], hp, stop=stop)
    return [[extract_boxed(t) for t in texts] for texts in sampled]


# ---------------------------------------------------------------- phase 1: the challenger's batch scorer


class ChallengerScorer:
    """LabelFreeGRPOTrainer's `score_batch` for the challenger: the solver answers every well-formed question of
    the step m times, then rl.methods.r_zero scores the batch as a whole (the repetition penalty's clusters and
    its B span all groups). `probe` (the challenger's own forward passes) is not needed."""

    def __init__(self, solver, tokenizer):
        self.solver, self.tokenizer = solver, tokenizer

    def __call__(self, groups: list[Group], hp: dict, probe) -> list[GroupScore]:
        questions = challenger_questions(groups, hp.get("variant", "paper"))
        valid = [i for i, q in enumerate(questions) if q is not None]
        answered = iter(solver_answers(self.solver, self.tokenizer, [questions[i] for i in valid], hp))
        flat = [next(answered) if q is not None else [] for q in questions]
        per_group, start = [], 0
        for group in groups:
            per_group.append(flat[start:start + len(group.answers)])
            start += len(group.answers)
        return score_challenger_batch(groups, per_group, hp)


# ---------------------------------------------------------------- events with one step counter across phases


class PhaseEvents:
    """The run's EventWriter as one GRPO phase's EventLogCallback sees it: step-carrying events are shifted by the
    steps of the earlier phases, and with `metric_prefix` the phase's metrics are renamed so that they do not mix
    with the solver's DESIGN §5 series (the challenger's reward/mean becomes rzero/challenger_reward_mean; names
    already under rzero/ are kept)."""

    def __init__(self, events: EventWriter, offset: int, metric_prefix: str | None = None):
        self.events, self.offset, self.metric_prefix = events, offset, metric_prefix

    def metrics(self, step, values):
        if self.metric_prefix:
            values = {name if name.startswith("rzero/") else self.metric_prefix + name.replace("/", "_"): value
                      for name, value in values.items()}
        return self.events.metrics(step + self.offset, values)

    def group(self, step, **fields):
        return self.events.group(step + self.offset, **fields)

    def eval(self, step, prompt_set, values):
        return self.events.eval(step + self.offset, prompt_set, values)

    def checkpoint(self, step, path):
        return self.events.checkpoint(step + self.offset, path)

    def __getattr__(self, name):  # sync, log, ...
        return getattr(self.events, name)
