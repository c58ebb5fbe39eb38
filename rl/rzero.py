"""R-Zero (Huang et al. 2025): a challenger and a solver co-evolve from zero data, as one run.

Both start from the configured model. Each iteration k = 1..iterations runs three phases:

1. challenger: GRPO on the challenger, `challenger_steps` steps. Prompt: the paper's challenger
   prompt (App. B.2; a shortened one for the default policy, see rl.arithmetic.CHALLENGER_PROMPT).
   The question is what stands between <question> tags; its reward is max(0, r_unc − r_rep)
   with r_unc from `solver_samples` answers of the current solver (rl.rewards.rzero), 0 when
   the format check fails.
2. questions: the trained challenger writes `questions_per_iteration` candidates; the solver
   answers each `solver_samples` times; a question is kept when keep_low..keep_high answers
   agree with the majority, whose answer becomes its pseudo-label (paper §2.3).
3. solver: GRPO on the solver over the kept questions, `solver_steps` steps, reward 1 when the
   answer equals the pseudo-label (paper §2.4). Skipped, with a `log` event, when nothing was kept.

The prompt file of the config is not used: R-Zero needs no data. (`python -m rl.train` is always
given one; its labels are never read.) With `eval_prompts`, the solver is evaluated on them
before the first iteration and after each solver phase (`eval` events).

Files under RUN_DIR:

    rzero/state.json                       the last finished phase: {iteration, phase, step, challenger, solver}
    rzero/iteration-{k}/pool.jsonl         every candidate: {id, question|null, text, p_hat, pseudo_label,
                                           answers, kept}
    rzero/iteration-{k}/questions.jsonl    the kept ones: {id, question, p_hat, pseudo_label, answers}
    checkpoints/iteration-{k}/challenger/  the challenger after phase 1 (a Hugging Face model folder)
    checkpoints/iteration-{k}/solver/      the solver after phase 3 (absent when phase 3 was skipped)

Events: `stage` {iteration, phase, state, counts} at each phase's start and end: state is
started, finished, skipped (solver phase with nothing kept) or cancelled; counts are
challenger {steps}, questions {pool} then {pool, valid, kept}, solver {questions, steps}.
`metrics` share one step counter across phases (challenger steps, then solver steps; the
questions phase logs at the step it follows, so charts stay monotone):
  challenger steps: rzero/format_rate, rzero/uncertainty_mean, rzero/repetition_penalty_mean,
    rzero/p_hat_mean, and TRL's numbers as rzero/challenger_<name> (rzero/challenger_reward_mean, ...);
  questions phase:  rzero/pool_size, rzero/valid_questions, rzero/kept_questions,
    rzero/pool_p_hat_mean, rzero/kept_p_hat_mean;
  solver steps:     the DESIGN section 5 names (reward/mean, entropy, kl, majority_ratio, ...).
`group` events: one per GRPO group; a challenger group's prompt_id is challenger-{j} and its
rollouts' `answer` is the extracted question (extra: p_hat, uncertainty, repetition_penalty);
a solver group's prompt_id is the question id and its majority_answer the pseudo-label.
A `checkpoint` event follows each saved model.

Resume granularity is one phase: --resume continues after the last finished phase in
state.json. A SIGTERM stops a GRPO phase after the step in progress (the questions phase after
the batch in progress), writes `stage cancelled`, and returns; the partial phase is not kept and
runs again from its start on resume.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer, PrinterCallback
from transformers.utils import logging as hf_logging
from trl import GRPOConfig, GRPOTrainer

from rl.answers import majority_vote
from rl.callbacks import GracefulStop, PeriodicEval
from rl.events import EventWriter, read_events
from rl.rewards.rzero import extract_question, keep_for_solver, solver_agreement
from rl.rzero_phases import (ChallengerReward, PhaseEvents, SolverReward, StepOffsetEvents, StopAtStepEnd,
                             challenger_prompt, sample, solver_answers)

PHASES = ("challenger", "questions", "solver")
RZERO_DIR = "rzero"
STATE_FILE = "state.json"


@dataclass
class LoopState:
    """Where the loop stands after its last finished phase; rzero/state.json, rewritten after each phase."""

    iteration: int = 0  # 0 with phase "solver": nothing done yet
    phase: str = "solver"
    step: int = 0  # the shared step counter of the metrics events
    challenger: str = ""  # model folders the next phases start from, relative to RUN_DIR (or absolute)
    solver: str = ""

    def next_phase(self) -> tuple[int, str]:
        if self.phase == "solver":
            return self.iteration + 1, "challenger"
        return self.iteration, PHASES[PHASES.index(self.phase) + 1]


class Cancelled(Exception):
    """A SIGTERM stopped the phase in progress."""


class RZeroLoop:
    def __init__(self, config, run_dir: Path, events: EventWriter, stop: GracefulStop):
        self.config, self.hp = config, config.hyperparameters
        self.run_dir, self.events, self.stop = run_dir, events, stop
        self.tokenizer = AutoTokenizer.from_pretrained(config.model_path, local_files_only=True)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.prompt = challenger_prompt(config.model_path, self.tokenizer)
        self.state = LoopState(challenger=str(config.model_path), solver=str(config.model_path))

    # -- bookkeeping

    @property
    def state_path(self) -> Path:
        return self.run_dir / RZERO_DIR / STATE_FILE

    def iteration_dir(self, k: int) -> Path:
        return self.run_dir / RZERO_DIR / f"iteration-{k}"

    def finish_phase(self, iteration: int, phase: str) -> None:
        self.state.iteration, self.state.phase = iteration, phase
        _write_atomically(self.state_path, json.dumps(asdict(self.state), indent=1) + "\n")

    def load_model(self, path: str):
        on_gpu = torch.cuda.is_available()
        model = AutoModelForCausalLM.from_pretrained(self.run_dir / path, local_files_only=True,  # relative or absolute
                                                     dtype="auto" if on_gpu else torch.float32)
        return model.to("cuda" if on_gpu else "cpu")

    def save_model(self, model, k: int, role: str) -> str:
        path = self.run_dir / "checkpoints" / f"iteration-{k}" / role
        model.save_pretrained(path)
        self.tokenizer.save_pretrained(path)
        self.events.checkpoint(self.state.step, path.resolve())
        return str(path.relative_to(self.run_dir))  # relative: the run folder may be moved

    def grpo_args(self, steps: int, prompts_per_step: int, generations: int, seed: int) -> GRPOConfig:
        hp, on_gpu = self.hp, torch.cuda.is_available()
        return GRPOConfig(
            output_dir=str(self.run_dir / "checkpoints"), use_cpu=not on_gpu,
            bf16=on_gpu and torch.cuda.is_bf16_supported(), report_to="none", disable_tqdm=True, logging_steps=1,
            max_steps=steps, seed=seed, data_seed=seed,
            per_device_train_batch_size=prompts_per_step * generations,  # one generation batch per step
            gradient_accumulation_steps=1, steps_per_generation=1, num_generations=generations,
            temperature=hp["temperature"], top_p=hp["top_p"], max_completion_length=hp["max_completion_length"],
            learning_rate=hp["learning_rate"], lr_scheduler_type="constant", beta=hp["kl_coef"],
            epsilon=hp["epsilon"], epsilon_high=hp["epsilon_high"], entropy_coef=hp["entropy_coef"],
            save_strategy="no",  # the loop saves at phase ends; a phase cut short is run again on resume
            disable_dropout=True, dataloader_num_workers=0,
        )

    def seed(self, k: int, phase: str) -> int:
        return self.config.seed + 1000 * k + PHASES.index(phase)  # a fresh stream per phase, reproducible

    # -- phase 1: GRPO on the challenger, rewarded by the solver's uncertainty

    def challenger_phase(self, k: int) -> None:
        hp, steps = self.hp, self.hp["challenger_steps"]
        self.events.stage(k, "challenger", "started", {"steps": steps})
        challenger, solver = self.load_model(self.state.challenger), self.load_model(self.state.solver)
        reward = ChallengerReward(solver, self.tokenizer, hp, group_size=hp["challenger_rollouts"])
        # prompts_per_step copies of the one prompt p0: each copy is a GRPO group of challenger_rollouts questions
        dataset = Dataset.from_list([{"prompt": self.prompt, "prompt_id": f"challenger-{j}"}
                                     for j in range(hp["prompts_per_step"])])
        trainer = GRPOTrainer(
            model=challenger, reward_funcs=[reward], train_dataset=dataset, processing_class=self.tokenizer,
            args=self.grpo_args(steps, hp["prompts_per_step"], hp["challenger_rollouts"], self.seed(k, "challenger")),
            callbacks=[PhaseEvents(StepOffsetEvents(self.events, self.state.step), reward, prefix="rzero/challenger_"),
                       StopAtStepEnd(self.stop)])
        trainer.remove_callback(PrinterCallback)
        self.run_grpo(trainer, k, "challenger", steps)
        self.state.challenger = self.save_model(challenger, k, "challenger")
        self.events.stage(k, "challenger", "finished", {"steps": steps})

    # -- phase 2: the trained challenger writes a pool; the solver's agreement decides what is kept

    def questions_phase(self, k: int) -> None:
        hp, n = self.hp, self.hp["questions_per_iteration"]
        self.events.stage(k, "questions", "started", {"pool": n})
        challenger, solver = self.load_model(self.state.challenger), self.load_model(self.state.solver)
        texts = [t for (t,) in sample(challenger, self.tokenizer, [self.prompt] * n, 1, hp, stop=self.stop)]
        questions = [extract_question(t) for t in texts]
        valid = [i for i, q in enumerate(questions) if q is not None]
        answered = solver_answers(solver, self.tokenizer, [questions[i] for i in valid], hp, stop=self.stop)
        if self.stop.requested:
            self.events.stage(k, "questions", "cancelled", {"pool": len(texts)})
            raise Cancelled
        answers = {i: a for i, a in zip(valid, answered)}

        pool = []
        for i, (text, question) in enumerate(zip(texts, questions)):
            votes = answers.get(i, [])
            pool.append({
                "id": f"it{k}-q{i}", "question": question, "text": text,
                "p_hat": solver_agreement(votes) if question else None,  # p̂ = (1/m) Σ_j 1{y_j = ỹ}  (§2.2)
                "pseudo_label": majority_vote(votes) if question else None,  # ỹ: the majority of the m answers
                "answers": votes,
                # keep when |p̂ − ½| ≤ δ, i.e. keep_low..keep_high of the m answers agree  (§2.3)
                "kept": question is not None and keep_for_solver(votes, hp["keep_low"], hp["keep_high"]),
            })
        kept = [row for row in pool if row["kept"]]
        folder = self.iteration_dir(k)
        _write_atomically(folder / "pool.jsonl", "".join(json.dumps(row) + "\n" for row in pool))
        _write_atomically(folder / "questions.jsonl", "".join(
            json.dumps({key: row[key] for key in ("id", "question", "p_hat", "pseudo_label", "answers")}) + "\n"
            for row in kept))

        values = {"rzero/pool_size": len(pool), "rzero/valid_questions": len(valid), "rzero/kept_questions": len(kept)}
        if valid:
            values["rzero/pool_p_hat_mean"] = sum(pool[i]["p_hat"] for i in valid) / len(valid)
        if kept:
            values["rzero/kept_p_hat_mean"] = sum(row["p_hat"] for row in kept) / len(kept)
        self.events.metrics(self.state.step, values)  # at the step it follows: charts stay monotone
        self.events.stage(k, "questions", "finished", {"pool": len(pool), "valid": len(valid), "kept": len(kept)})

    # -- phase 3: GRPO on the solver over the kept questions, rewarded by agreement with the pseudo-label

    def solver_phase(self, k: int) -> None:
        hp, steps = self.hp, self.hp["solver_steps"]
        kept = [json.loads(line) for line in (self.iteration_dir(k) / "questions.jsonl").read_text().splitlines()
                if line.strip()]
        if not kept:
            pool = (self.iteration_dir(k) / "pool.jsonl").read_text().splitlines()
            valid = sum(json.loads(line)["question"] is not None for line in pool if line.strip())
            why = (f"{len(pool) - valid} of {len(pool)} challenger outputs failed the <question> format check and "
                   f"none of the other {valid} had {hp['keep_low']}..{hp['keep_high']} of {hp['solver_samples']} "
                   "solver answers agreeing")
            self.events.log("warning", f"R-Zero iteration {k}: no question was kept ({why}); the solver phase is "
                                       "skipped")
            self.events.stage(k, "solver", "skipped", {"questions": 0, "steps": 0})
            return
        self.events.stage(k, "solver", "started", {"questions": len(kept), "steps": steps})
        solver = self.load_model(self.state.solver)
        dataset = Dataset.from_list([{"prompt": row["question"], "prompt_id": row["id"]} for row in kept])
        prompts_per_step = min(hp["prompts_per_step"], len(kept))
        reward = SolverReward({row["id"]: row["pseudo_label"] for row in kept}, group_size=hp["n_votes"])
        trainer = GRPOTrainer(
            model=solver, reward_funcs=[reward], train_dataset=dataset, processing_class=self.tokenizer,
            args=self.grpo_args(steps, prompts_per_step, hp["n_votes"], self.seed(k, "solver")),
            callbacks=[PhaseEvents(StepOffsetEvents(self.events, self.state.step), reward), StopAtStepEnd(self.stop)])
        trainer.remove_callback(PrinterCallback)
        self.run_grpo(trainer, k, "solver", steps)
        self.state.solver = self.save_model(solver, k, "solver")
        self.evaluate(solver)
        self.events.stage(k, "solver", "finished", {"questions": len(kept), "steps": steps})

    def run_grpo(self, trainer, k: int, phase: str, steps: int) -> None:
        trainer.train()
        done = trainer.state.global_step
        if self.stop.requested and done < steps:
            self.events.stage(k, phase, "cancelled", {"steps": done})
            raise Cancelled
        self.state.step += done

    def evaluate(self, solver) -> None:
        """`eval` events for the solver on eval_prompts (labels used here only), as the other methods do."""
        if not self.config.eval_prompts or self.hp["eval_every"] <= 0:
            return
        hp = self.hp
        evaluator = PeriodicEval(self.events, self.config.eval_prompts, self.config.eval_prompt_set, every=0,
                                 samples=hp["eval_samples"], temperature=hp["eval_temperature"], top_p=hp["top_p"],
                                 max_new_tokens=hp["max_completion_length"])
        evaluator.trainer = SimpleNamespace(model=solver, processing_class=self.tokenizer)
        evaluator.evaluate(SimpleNamespace(global_step=self.state.step, is_world_process_zero=True))

    # -- the loop

    def resume(self) -> None:
        if not self.state_path.exists():
            self.events.log("warning", "--resume found no finished R-Zero phase; starting from iteration 1")
            return
        self.state = LoopState(**json.loads(self.state_path.read_text()))
        logged = [e["step"] for e in read_events(self.events.path) if e["type"] == "metrics"]
        if logged and max(logged) > self.state.step:
            self.events.log("warning", f"steps {self.state.step + 1}..{max(logged)} belong to a phase that was cut "
                                       "short and runs again; their earlier events are superseded")

    def run(self, resume: bool) -> tuple[str, str]:
        hp = self.hp
        if resume:
            self.resume()
        else:
            self.evaluate(self.load_model(self.state.solver))  # the starting point
        k, phase = self.state.next_phase()
        total = hp["iterations"] * (hp["challenger_steps"] + hp["solver_steps"])
        where = "from the start" if (k, phase) == (1, "challenger") else f"at iteration {k}, {phase} phase"
        self.events.status("running", f"R-Zero: {hp['iterations']} iterations of {hp['challenger_steps']} challenger "
                                      f"+ {hp['solver_steps']} solver steps (at most {total} steps), {where}")
        self.events.log("info", "R-Zero uses no data: the prompt file is not read for training, max_steps is "
                                "replaced by iterations x (challenger_steps + solver_steps), and the solver trains "
                                "on all n_votes rollouts of a question (n_train is not used)")
        while k <= hp["iterations"]:
            if self.stop.requested:
                return "cancelled", self.cancelled_message()
            try:
                getattr(self, f"{phase}_phase")(k)
            except Cancelled:
                return "cancelled", self.cancelled_message()
            self.finish_phase(k, phase)
            k, phase = self.state.next_phase()
        return "succeeded", f"R-Zero: {hp['iterations']} iterations, {self.state.step} steps"

    def cancelled_message(self) -> str:
        k, phase = self.state.next_phase()
        return (f"cancelled by {self.stop.signal_name}; resume continues at iteration {k}, {phase} phase "
                f"(the models of the last finished phase are in checkpoints/)")


def train_rzero(config, run_dir: Path, events: EventWriter, resume: bool) -> tuple[str, str]:
    """rl.train's entry point for method r_zero: returns the final status (state, message)."""
    stop = GracefulStop()
    stop.install()  # early: a cancel while the models load still ends cleanly
    hf_logging.disable_progress_bar()
    torch.manual_seed(config.seed)
    return RZeroLoop(config, Path(run_dir), events, stop).run(resume)


def _write_atomically(path: Path, text: str) -> None:
    """Readers (the dashboard) see the old file or the new one, never half of it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
