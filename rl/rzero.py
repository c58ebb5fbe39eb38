"""R-Zero (Huang et al. 2025): a challenger and a solver co-evolve from zero data, as one run.

Both start from the configured model. Each iteration k = 1..iterations runs three phases:

1. challenger: GRPO on the challenger, `challenger_steps` steps. Prompt: the paper's challenger
   prompt (App. B.2; a shortened one for the default policy, see rl.arithmetic.CHALLENGER_PROMPT).
   The question is what stands between <question> tags; its reward is max(0, r_unc − r_rep)
   with r_unc from `solver_samples` answers of the current solver and r_rep from BLEU clusters
   over all B questions of the step (rl.rewards.rzero), 0 when the format check fails. With
   `challenger_steps: 0` the phase is skipped and the untrained model writes the pool (the
   "Base Challenger" baseline of R-Zero Table 3).
2. questions: the challenger writes `questions_per_iteration` candidates; the solver answers each
   `solver_samples` times; a question is kept when keep_low..keep_high answers agree with the
   majority, whose answer becomes its pseudo-label (paper §2.3).
3. solver: GRPO on the solver over the kept questions, `solver_steps` steps, reward 1 when the
   answer equals the pseudo-label voted in phase 2, never re-voted (paper §2.4). Skipped, with a
   `log` event, when nothing was kept.

Both GRPO phases run on LabelFreeGRPOTrainer (rl/trainer.py), the trainer of every other method:
rollout-batch steps of prompts_per_step prompts trained in prompts_per_step / prompts_per_update
updates × ppo_epochs (DESIGN §4.7), per-rollout entropy, `generation_backend`, its advantages and
its event callbacks (rl/callbacks.py). The challenger's prompts are prompts_per_step copies of p0,
each a GRPO group of challenger_rollouts questions, scored together by a batch scorer
(rl.rzero_phases.ChallengerScorer); the solver's are the kept questions with R-Zero App. B.2's solver
system prompt through the policy's chat template (rl.prompts.format_prompt), the pseudo-labels as
the trainer's references (rl.methods.r_zero.SOLVER_PHASE). The solver answers the challenger's
questions with the same prompt. n_train applies to the solver (default n_votes: the paper trains on
all its rollouts); the challenger trains on all challenger_rollouts.

The prompt file of the config is not used: R-Zero needs no data. (`python -m rl.train` is always
given one; its labels are never read.) With `eval_prompts`, the solver is evaluated on them
before the first iteration and after each solver phase (`eval` events).

Files under RUN_DIR (the trainer's own, for resume; the dashboard reads the events):

    rzero/state.json                       the last finished phase: {iteration, phase, step, challenger, solver}
    rzero/iteration-{k}/pool.jsonl         every candidate: {id, question|null, text, p_hat, pseudo_label,
                                           answers, kept}
    rzero/iteration-{k}/questions.jsonl    the kept ones: {id, question, p_hat, pseudo_label, answers}
    checkpoints/iteration-{k}/challenger/  the challenger after phase 1 (a Hugging Face model folder)
    checkpoints/iteration-{k}/solver/      the solver after phase 3 (absent when phase 3 was skipped)
    checkpoints/iteration-{k}/{phase}-checkpoints/checkpoint-{n}
                                           TRL checkpoints inside a GRPO phase, every save_every steps and
                                           on a cancel, named by the phase's rollout-batch step n; removed
                                           once the phase has finished

Events: `stage` {iteration, phase, state, counts} at each phase's start and end: state is
started, finished, skipped (challenger phase with challenger_steps 0, solver phase with nothing
kept) or cancelled; counts are challenger {steps}, questions {pool} then {pool, valid, kept},
solver {questions, steps}. `questions` events carry the pool (every candidate, in pool order,
with `kept`), written before the questions phase's `stage finished`. `metrics` share one step
counter across phases (challenger steps, then solver steps; the questions phase logs at the
step it follows, so charts stay monotone):
  challenger steps: rzero/format_rate, rzero/uncertainty_mean, rzero/repetition_penalty_mean,
    rzero/p_hat_mean, and the trainer's numbers as rzero/challenger_<name> (rzero/challenger_reward_mean,
    rzero/challenger_entropy, ...);
  questions phase:  rzero/pool_size, rzero/valid_questions, rzero/kept_questions,
    rzero/pool_p_hat_mean, rzero/kept_p_hat_mean;
  solver steps:     the DESIGN section 5 names (reward/mean, entropy, kl, majority_ratio, ...); the
    "majority" of a solver group is its pseudo-label.
`group` events: one per GRPO group; a challenger group's prompt_id is challenger-{j} and its
rollouts' `answer` is the extracted question (extra: p_hat, uncertainty, repetition_penalty,
solver_majority); a solver group's prompt_id is the question id and its majority_answer the
pseudo-label. A `checkpoint` event follows each saved model and each TRL checkpoint.

Resume: --resume continues after the last finished phase in state.json and, inside a GRPO phase,
from the phase's last TRL checkpoint. A SIGTERM stops a GRPO phase after the step in progress and
checkpoints it (the questions phase after the batch in progress, which then runs again from its
start), writes `stage cancelled`, and returns.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from types import SimpleNamespace

import torch
from datasets import Dataset
from transformers import PrinterCallback
from transformers.utils import logging as hf_logging

from rl.callbacks import EventLogCallback, GracefulStop, PeriodicEval
from rl.events import EventWriter, read_events
from rl.grpo_config import grpo_config
from rl.methods.r_zero import CHALLENGER_PHASE, SOLVER_PHASE
from rl.policy import load_tokenizer, load_trainable_model
from rl.methods.r_zero import challenger_question, keep_for_solver, solver_agreement, solver_majority
from rl.rzero_phases import (ChallengerScorer, PhaseEvents, challenger_prompt, sample, solver_answers, solver_prompt,
                             solver_rows)

PHASES = ("challenger", "questions", "solver")
RZERO_DIR = "rzero"
STATE_FILE = "state.json"
CHALLENGER_METRIC_PREFIX = "rzero/challenger_"


@dataclass
class LoopState:
    """Where the loop stands after its last finished phase; rzero/state.json, rewritten after each phase."""

    iteration: int = 0  # 0 with phase "solver": nothing done yet
    phase: str = "solver"
    step: int = 0  # the shared step counter of the metrics events: steps of the finished phases
    challenger: str = ""  # model folders the next phases start from, relative to RUN_DIR (or absolute)
    solver: str = ""

    def next_phase(self) -> tuple[int, str]:
        if self.phase == "solver":
            return self.iteration + 1, "challenger"
        return self.iteration, PHASES[PHASES.index(self.phase) + 1]


class Cancelled(Exception):
    """A SIGTERM stopped the phase in progress."""


def challenger_hyperparameters(hp: dict) -> dict:
    """The challenger phase's: each p0 copy is a GRPO group of challenger_rollouts questions, all trained on."""
    return {**hp, "n_votes": hp["challenger_rollouts"], "n_train": hp["challenger_rollouts"]}


def solver_hyperparameters(hp: dict, kept: int) -> dict:
    """The solver phase's: a rollout batch cannot hold more distinct questions than were kept, and it must split
    into whole updates (prompts_per_update, itself at most the batch)."""
    per_step = min(hp["prompts_per_step"], kept)
    per_update = min(hp["prompts_per_update"], per_step)
    return {**hp, "prompts_per_step": per_step - per_step % per_update, "prompts_per_update": per_update}


def last_phase_checkpoint(folder: Path) -> Path | None:
    """The highest-step complete TRL checkpoint of a GRPO phase, or None."""
    folders = [p for p in folder.glob("checkpoint-*")
               if p.name.split("-")[-1].isdigit() and (p / "trainer_state.json").exists()]
    return max(folders, key=lambda p: int(p.name.split("-")[-1]), default=None)


class RZeroLoop:
    def __init__(self, config, run_dir: Path, events: EventWriter, stop: GracefulStop):
        self.config, self.hp = config, config.hyperparameters
        self.run_dir, self.events, self.stop = run_dir, events, stop
        self.tokenizer = load_tokenizer(config.model_path)
        self.prompt = challenger_prompt(config.model_path, self.tokenizer)
        self.state = LoopState(challenger=str(config.model_path), solver=str(config.model_path))
        self.resuming = False  # --resume: a GRPO phase continues from its last checkpoint
        self._embedder = None

    # -- bookkeeping

    @property
    def state_path(self) -> Path:
        return self.run_dir / RZERO_DIR / STATE_FILE

    def iteration_dir(self, k: int) -> Path:
        return self.run_dir / RZERO_DIR / f"iteration-{k}"

    def phase_checkpoints(self, k: int, phase: str) -> Path:
        return self.run_dir / "checkpoints" / f"iteration-{k}" / f"{phase}-checkpoints"

    def finish_phase(self, iteration: int, phase: str) -> None:
        self.state.iteration, self.state.phase = iteration, phase
        _write_atomically(self.state_path, json.dumps(asdict(self.state), indent=1) + "\n")
        # the phase's output is its saved model now: its TRL checkpoints (optimizer state included) are not needed
        shutil.rmtree(self.phase_checkpoints(iteration, phase), ignore_errors=True)

    def load_model(self, path: str):
        on_gpu = torch.cuda.is_available()
        model = load_trainable_model(self.run_dir / path)  # relative or absolute; fp32 weights, as rl.train's
        return model.to("cuda" if on_gpu else "cpu")

    def save_model(self, trainer, k: int, role: str) -> str:
        path = self.run_dir / "checkpoints" / f"iteration-{k}" / role
        trainer.save_model(str(path))  # the trained weights and the tokenizer (processing_class)
        self.events.checkpoint(self.state.step, path.resolve())
        return str(path.relative_to(self.run_dir))  # relative: the run folder may be moved

    @property
    def embedder(self):
        """The run's sentence embedder, loaded once: the trainer's group events carry similarity matrices."""
        if self._embedder is None:
            from rl.similarity import Embedder
            device = "cuda" if torch.cuda.is_available() else "cpu"
            self._embedder = Embedder.for_run(self.config.embedding_model, self.hp, device=device)
            self.events.log("info", self._embedder.summary())  # the run's record of its embedder
        return self._embedder

    def seed(self, k: int, phase: str) -> int:
        return self.config.seed + 1000 * k + PHASES.index(phase)  # a fresh stream per phase, reproducible

    # -- a GRPO phase on the shared trainer

    def train_phase(self, k: int, phase: str, model, rows: list[dict], hp: dict, steps: int, method,
                    score_batch=None, references: dict[str, str] | None = None, metric_prefix: str | None = None):
        """Train `model` for `steps` rollout-batch steps on `rows`; returns the trainer. Continues from the phase's
        last TRL checkpoint when there is one (a resumed run); raises Cancelled when a SIGTERM cut it short."""
        from rl.trainer import LabelFreeGRPOTrainer

        output_dir = self.phase_checkpoints(k, phase)
        checkpoint = last_phase_checkpoint(output_dir) if self.resuming else None
        event_log = EventLogCallback(PhaseEvents(self.events, self.state.step, metric_prefix), self.run_dir)
        trainer = LabelFreeGRPOTrainer(
            model=model, args=grpo_config(hp, max_steps=steps, seed=self.seed(k, phase), output_dir=output_dir),
            train_dataset=Dataset.from_list(rows), processing_class=self.tokenizer, callbacks=[event_log, self.stop],
            method=method, n_train=hp["n_train"], hyperparameters=hp, references=references, embedder=self.embedder,
            score_batch=score_batch)
        trainer.remove_callback(PrinterCallback)  # the event log is the record
        event_log.trainer = trainer
        if checkpoint is not None:
            self.events.log("info", f"R-Zero iteration {k}: the {phase} phase continues from "
                                    f"{checkpoint.relative_to(self.run_dir)}")
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        done = trainer.rollout_step()
        if self.stop.requested and done < steps:
            self.events.stage(k, phase, "cancelled", {"steps": done})
            raise Cancelled
        self.state.step += done
        return trainer

    # -- phase 1: GRPO on the challenger, rewarded by the solver's uncertainty

    def challenger_phase(self, k: int) -> None:
        hp, steps = challenger_hyperparameters(self.hp), self.hp["challenger_steps"]
        if steps == 0:  # R-Zero Table 3's "Base Challenger": the pool comes from the untrained model
            self.events.log("info", f"R-Zero iteration {k}: challenger_steps is 0, so the challenger is not "
                                    f"trained and {self.state.challenger} writes the questions")
            self.events.stage(k, "challenger", "skipped", {"steps": 0})
            return
        self.events.stage(k, "challenger", "started", {"steps": steps})
        challenger, solver = self.load_model(self.state.challenger), self.load_model(self.state.solver)
        # prompts_per_step copies of the one prompt p0: each copy is a GRPO group of challenger_rollouts questions
        rows = [{"prompt": self.prompt, "prompt_id": f"challenger-{j}"} for j in range(hp["prompts_per_step"])]
        trainer = self.train_phase(k, "challenger", challenger, rows, hp, steps, CHALLENGER_PHASE,
                                   score_batch=ChallengerScorer(solver, self.tokenizer),
                                   metric_prefix=CHALLENGER_METRIC_PREFIX)
        self.state.challenger = self.save_model(trainer, k, "challenger")
        self.events.stage(k, "challenger", "finished", {"steps": steps})

    # -- phase 2: the challenger writes a pool; the solver's agreement decides what is kept

    def questions_phase(self, k: int) -> None:
        hp, n = self.hp, self.hp["questions_per_iteration"]
        self.events.stage(k, "questions", "started", {"pool": n})
        challenger, solver = self.load_model(self.state.challenger), self.load_model(self.state.solver)
        texts = [t for (t,) in sample(challenger, self.tokenizer, [self.prompt] * n, 1, hp, stop=self.stop)]
        variant = hp["variant"]
        questions = [challenger_question(t, variant) for t in texts]
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
                "p_hat": solver_agreement(votes, variant) if question else None,  # p̂ = (1/m) Σ_j 1{y_j = ỹ}  (§2.2)
                "pseudo_label": solver_majority(votes) if question else None,  # ỹ: the majority of the m answers
                "answers": votes,
                # keep when |p̂ − ½| ≤ δ, i.e. keep_low..keep_high of the m answers agree  (§2.3)
                "kept": question is not None and keep_for_solver(votes, hp["keep_low"], hp["keep_high"], variant,
                                                                 hp["solver_samples"]),
            })
        kept = [row for row in pool if row["kept"]]
        folder = self.iteration_dir(k)
        _write_atomically(folder / "pool.jsonl", "".join(json.dumps(row) + "\n" for row in pool))
        _write_atomically(folder / "questions.jsonl", "".join(
            json.dumps({key: row[key] for key in ("id", "question", "p_hat", "pseudo_label", "answers")}) + "\n"
            for row in kept))
        self.events.questions(k, pool)  # the dashboard's copy (DESIGN §3: the web never reads RUN_DIR)

        values = {"rzero/pool_size": len(pool), "rzero/valid_questions": len(valid), "rzero/kept_questions": len(kept)}
        if valid:
            values["rzero/pool_p_hat_mean"] = sum(pool[i]["p_hat"] for i in valid) / len(valid)
        if kept:
            values["rzero/kept_p_hat_mean"] = sum(row["p_hat"] for row in kept) / len(kept)
        self.events.metrics(self.state.step, values)  # at the step it follows: charts stay monotone
        self.events.stage(k, "questions", "finished", {"pool": len(pool), "valid": len(valid), "kept": len(kept)})

    # -- phase 3: GRPO on the solver over the kept questions, rewarded by agreement with the pseudo-label

    def solver_phase(self, k: int) -> None:
        steps = self.hp["solver_steps"]
        kept = [json.loads(line) for line in (self.iteration_dir(k) / "questions.jsonl").read_text().splitlines()
                if line.strip()]
        if not kept:
            self.skip_solver(k)
            return
        hp = solver_hyperparameters(self.hp, len(kept))
        if hp["prompts_per_step"] < self.hp["prompts_per_step"]:
            self.events.log("info", f"R-Zero iteration {k}: {len(kept)} questions were kept, so each solver step "
                                    f"trains on {hp['prompts_per_step']} of them in updates of "
                                    f"{hp['prompts_per_update']}")
        self.events.stage(k, "solver", "started", {"questions": len(kept), "steps": steps})
        trainer = self.train_phase(k, "solver", self.load_model(self.state.solver), solver_rows(self.tokenizer, kept),
                                   hp, steps, SOLVER_PHASE,
                                   references={row["id"]: row["pseudo_label"] for row in kept})  # ỹ_i, never re-voted
        self.state.solver = self.save_model(trainer, k, "solver")
        self.evaluate(trainer.model)
        self.events.stage(k, "solver", "finished", {"questions": len(kept), "steps": steps})

    def skip_solver(self, k: int) -> None:
        hp = self.hp
        pool = (self.iteration_dir(k) / "pool.jsonl").read_text().splitlines()
        valid = sum(json.loads(line)["question"] is not None for line in pool if line.strip())
        why = (f"{len(pool) - valid} of {len(pool)} challenger outputs failed the <question> format check and "
               f"none of the other {valid} had {hp['keep_low']}..{hp['keep_high']} of {hp['solver_samples']} "
               "solver answers agreeing")
        self.events.log("warning", f"R-Zero iteration {k}: no question was kept ({why}); the solver phase is skipped")
        self.events.stage(k, "solver", "skipped", {"questions": 0, "steps": 0})

    def evaluate(self, solver) -> None:
        """`eval` events for the solver on eval_prompts (labels used here only), asked as it is trained."""
        if not self.config.eval_prompts or self.hp["eval_every"] <= 0:
            return
        hp = self.hp
        prompts = [{**row, "prompt": solver_prompt(self.tokenizer, row["prompt"])} for row in self.config.eval_prompts]
        evaluator = PeriodicEval(self.events, prompts, self.config.eval_prompt_set, every=0,
                                 samples=hp["eval_samples"], temperature=hp["eval_temperature"], top_p=hp["eval_top_p"],
                                 max_new_tokens=hp["max_completion_length"], answer_rule=SOLVER_PHASE.answer_rule)
        evaluator.trainer = SimpleNamespace(model=solver, processing_class=self.tokenizer)
        evaluator.evaluate(SimpleNamespace(global_step=self.state.step, is_world_process_zero=True))

    # -- the loop

    def resume(self) -> None:
        if self.state_path.exists():
            self.state = LoopState(**json.loads(self.state_path.read_text()))
        k, phase = self.state.next_phase()
        checkpoint = last_phase_checkpoint(self.phase_checkpoints(k, phase))
        resumed_at = self.state.step + (int(checkpoint.name.split("-")[-1]) if checkpoint else 0)
        if not self.state_path.exists() and checkpoint is None:
            self.events.log("warning", "--resume found no finished R-Zero phase and no checkpoint; starting from "
                                       "iteration 1")
        logged = [e["step"] for e in read_events(self.events.path) if e["type"] == "metrics"]
        if logged and max(logged) > resumed_at:
            self.events.log("warning", f"steps {resumed_at + 1}..{max(logged)} ran after the last checkpoint and run "
                                       "again; their earlier events are superseded by the ones that follow")

    def run(self, resume: bool) -> tuple[str, str]:
        hp = self.hp
        self.resuming = resume
        if resume:
            self.resume()
        else:
            self.evaluate(self.load_model(self.state.solver))  # the starting point
        k, phase = self.state.next_phase()
        total = hp["iterations"] * (hp["challenger_steps"] + hp["solver_steps"])
        where = "from the start" if (k, phase) == (1, "challenger") else f"at iteration {k}, {phase} phase"
        self.events.status("running", f"R-Zero: {hp['iterations']} iterations of {hp['challenger_steps']} challenger "
                                      f"+ {hp['solver_steps']} solver steps (at most {total} steps), {where}")
        self.events.log("info", "R-Zero uses no data: the prompt file is not read for training, and max_steps is "
                                "replaced by iterations x (challenger_steps + solver_steps)")
        while k <= hp["iterations"]:
            if self.stop.requested:
                return "cancelled", self.cancelled_message()
            try:
                getattr(self, f"{phase}_phase")(k)
            except Cancelled:
                return "cancelled", self.cancelled_message()
            self.finish_phase(k, phase)
            _release_memory()  # the phase's models and trainer: the next phase loads its own
            k, phase = self.state.next_phase()
        return "succeeded", f"R-Zero: {hp['iterations']} iterations, {self.state.step} steps"

    def cancelled_message(self) -> str:
        k, phase = self.state.next_phase()
        inside = " from its last checkpoint" if phase != "questions" and last_phase_checkpoint(
            self.phase_checkpoints(k, phase)) else ""
        return (f"cancelled by {self.stop.signal_name}; resume continues at iteration {k}, {phase} phase{inside} "
                f"(the models of the last finished phase are in checkpoints/)")


def train_rzero(config, run_dir: Path, events: EventWriter, resume: bool) -> tuple[str, str]:
    """rl.train's entry point for method r_zero: returns the final status (state, message)."""
    stop = GracefulStop()
    stop.install()  # early: a cancel while the models load still ends cleanly
    hf_logging.disable_progress_bar()
    torch.manual_seed(config.seed)
    return RZeroLoop(config, Path(run_dir), events, stop).run(resume)


def _release_memory() -> None:
    gc.collect()  # trainers hold reference cycles (callbacks ↔ trainer): free their tensors now, not later
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _write_atomically(path: Path, text: str) -> None:
    """A reader sees the old file or the new one, never half of it (resume reads these files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
