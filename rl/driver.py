"""The training driver: one run, from a checked config (rl/run_config.py) to its final status, whatever the method.

A run follows a plan, a function of the driver that returns the final status event's (state, message):

- `train_grpo` (below), for every method with a group scorer: one GRPO phase of max_steps steps on the config's
  prompts, checkpointed into RUN_DIR/checkpoints;
- `rl.methods.r_zero.training.train_rzero`, for a method that trains in phases (`Method.trains_in_phases`: R-Zero): challenger,
  questions and solver phases per iteration, each GRPO phase checkpointed into a folder of its own.

The command line (rl/train.py) picks the plan from the method and hands it to `run`. What every plan needs is
written here once, on `Driver`:

- stopping: SIGTERM and SIGINT (the supervisor's cancel, or `stop_when_supervisor_is_gone` below once the
  supervisor is gone) set GracefulStop's flag; a GRPO phase finishes its rollout batch, checkpoints and stops
  (`Driver.train` raises Cancelled), and the run ends `cancelled`, exit status 0;
- assembly: `Driver.trainer` is the one place LabelFreeGRPOTrainer is put together, with the event callbacks,
  the stop and the evaluator;
- checkpoints and resume: a GRPO phase checkpoints into its folder as TRL's checkpoint-<step> (named by
  rollout-batch step), `--resume` continues from the last complete one (rl.policy.last_checkpoint), and
  `Driver.note_resume` says in the log which logged steps run again;
- evaluation: `Driver.evaluator` (PeriodicEval on eval_prompts), run as a callback inside a phase or, between
  phases, by `Driver.evaluate`.

Torch, TRL and the trainer are imported inside the functions that need them, so that the command line checks a
config in well under a second before any of them is loaded.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from rl.events import EventWriter, read_events
from rl.grpo_config import grpo_config
from rl.methods import Method, get_method
from rl.policy import CHECKPOINTS_DIR, last_checkpoint, load_tokenizer, load_trainable_model
from rl.run_config import RunConfig, formatted_prompt


def run(config: RunConfig, run_dir: Path, events: EventWriter, resume: bool,
        plan: Callable[[Driver], tuple[str, str]]) -> tuple[str, str]:
    """Train the run by `plan` (train_grpo, or rl.methods.r_zero.training.train_rzero); the final status event's (state, message):
    succeeded or cancelled. An exception is a failure, which the command line reports."""
    return plan(Driver(config, run_dir, events, resume))


class Cancelled(Exception):
    """A stop (SIGTERM, SIGINT) cut a phase short: a GRPO phase after `steps` rollout batches, checkpointed."""

    def __init__(self, steps: int):
        super().__init__(f"cancelled after step {steps}")
        self.steps = steps


def checkpoint_step(checkpoint: Path | None) -> int:
    """The rollout-batch step a checkpoint-<step> folder was written at (0 for none)."""
    return int(checkpoint.name.split("-")[-1]) if checkpoint else 0


class Driver:
    """What every plan shares: the stop, the tokenizer, the embedder, trainer assembly, resume and evaluation."""

    def __init__(self, config: RunConfig, run_dir: Path, events: EventWriter, resume: bool):
        from transformers.utils import logging as hf_logging

        from rl.callbacks import GracefulStop

        self.stop = GracefulStop()
        self.stop.install()  # first: a cancel while the models load still ends cleanly
        hf_logging.disable_progress_bar()  # progress bars in a log file are noise
        self.config, self.hp, self.method = config, config.hyperparameters, get_method(config.method)
        self.run_dir, self.events, self.resuming = Path(run_dir), events, resume
        self.tokenizer = load_tokenizer(config.model_path)  # every model of a run shares the configured one's
        self._embedder = None

    @property
    def device(self) -> str:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"

    @property
    def embedder(self):
        """The run's sentence embedder, loaded once: every group event carries the similarity matrix of its rollouts."""
        if self._embedder is None:
            from rl.similarity import Embedder

            self._embedder = Embedder.for_run(self.config.embedding_model, self.hp, device=self.device)
            self.events.log("info", self._embedder.summary())  # the run's record of what embedded its rollouts
        return self._embedder

    # -- resume

    def checkpoint_to_resume(self, folder: Path) -> Path | None:
        """The checkpoint a GRPO phase checkpointing into `folder` continues from: with --resume, its last one."""
        return last_checkpoint(folder) if self.resuming else None

    def note_resume(self, resumed_at: int, nothing_found: str | None = None) -> None:
        """After a hard kill, the steps logged past the step the run resumes at are run again: say so in the log,
        after `nothing_found` (a warning that --resume found nothing to continue from), when given."""
        if nothing_found:
            self.events.log("warning", nothing_found)
        logged = [e["step"] for e in read_events(self.events.path) if e["type"] == "metrics"]
        if logged and max(logged) > resumed_at:
            self.events.log("warning", f"steps {resumed_at + 1}..{max(logged)} ran after the last checkpoint and are "
                                       "run again; their earlier events are superseded by the ones that follow")

    # -- evaluation

    def evaluator(self, ask: Callable[[dict], str], answer_rule, every: int, at_start: bool = True):
        """PeriodicEval on the config's eval_prompts, each asked as `ask(row)` formats it (the labels are used here
        only), evaluating every `every` steps of a phase it is the callback of; None without eval_prompts or with
        eval_every 0."""
        if not self.config.eval_prompts or self.hp["eval_every"] <= 0:
            return None
        from rl.callbacks import PeriodicEval

        hp = self.hp
        prompts = [dict(row, prompt=ask(row)) for row in self.config.eval_prompts]
        return PeriodicEval(self.events, prompts, self.config.eval_prompt_set, every=every, samples=hp["eval_samples"],
                            temperature=hp["eval_temperature"], top_p=hp["eval_top_p"],
                            max_new_tokens=hp["max_completion_length"], answer_rule=answer_rule, at_start=at_start)

    def evaluate(self, evaluator, model, step: int) -> None:
        """Evaluate `model` now, outside a GRPO phase (R-Zero's solver between phases), as of event-log `step`."""
        if evaluator is None:
            return
        evaluator.trainer = SimpleNamespace(model=model, processing_class=self.tokenizer)
        evaluator.evaluate(SimpleNamespace(global_step=step, is_world_process_zero=True))

    # -- one GRPO phase

    def trainer(self, model, rows: list[dict], method: Method, hp: dict, steps: int, seed: int, checkpoints: Path,
                events=None, labels: dict | None = None, references: dict | None = None, score_batch=None,
                evaluator=None):
        """LabelFreeGRPOTrainer for `steps` rollout-batch steps of `method` on `rows` ({prompt, prompt_id}: TRL hands
        every dataset column to the reward function, so held-out labels go to `labels`, the trainer's LabelMonitor,
        and y* to `references`), checkpointing into `checkpoints`, its events through `events` (the run's writer
        by default; R-Zero shifts each phase's steps), stopped by the run's stop."""
        from datasets import Dataset
        from transformers import PrinterCallback

        from rl.callbacks import EventLogCallback
        from rl.trainer import LabelFreeGRPOTrainer

        event_log = EventLogCallback(events or self.events, self.run_dir)
        callbacks = [event_log, self.stop] + ([evaluator] if evaluator is not None else [])
        trainer = LabelFreeGRPOTrainer(
            model=model, args=grpo_config(hp, max_steps=steps, seed=seed, output_dir=checkpoints),
            train_dataset=Dataset.from_list(rows), processing_class=self.tokenizer, callbacks=callbacks, method=method,
            n_train=hp["n_train"], hyperparameters=hp, labels=labels, references=references, embedder=self.embedder,
            score_batch=score_batch)
        trainer.remove_callback(PrinterCallback)  # the event log is the record; keep stdout quiet
        event_log.trainer = trainer  # the callbacks exist before the trainer they read
        if evaluator is not None:
            evaluator.trainer = trainer
        return trainer

    def train(self, trainer, steps: int, checkpoint: Path | None) -> int:
        """Train to `steps` rollout-batch steps, continuing from `checkpoint` when there is one; the steps done.
        Cancelled when the stop cut the phase short (its step in progress finished and was checkpointed)."""
        trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
        done = trainer.rollout_step()  # rollout batches, the event log's steps (TRL counts optimizer updates)
        if self.stop.requested and done < steps:
            raise Cancelled(done)
        return done


# ---------------------------------------------------------------- the plan of a method with a group scorer


def train_grpo(driver: Driver) -> tuple[str, str]:
    """One GRPO phase of max_steps steps on the config's prompts, checkpointed into RUN_DIR/checkpoints."""
    config, hp, method, events, stop = driver.config, driver.hp, driver.method, driver.events, driver.stop
    folder = driver.run_dir / CHECKPOINTS_DIR
    checkpoint = driver.checkpoint_to_resume(folder)
    if driver.resuming:
        driver.note_resume(checkpoint_step(checkpoint),
                           None if checkpoint else "--resume found no checkpoint; starting again from step 0")
    model = load_trainable_model(config.model_path)  # fp32 weights; bf16 only as the GPU's compute type

    # DESIGN §6: the policy sees each prompt as its paper gives it, through its chat template with the paper's
    # system prompt (or the row's own system message)
    def ask(row: dict) -> str:
        return formatted_prompt(driver.tokenizer, method, row)

    rows = [{"prompt": ask(row), "prompt_id": row["id"]} for row in config.prompts]
    labels = {row["id"]: row["label"] for row in config.prompts if row["label"] is not None}
    field = method.reference_field_for(hp)  # None for the label-free methods: they get no references at all
    references = {row["id"]: row[field] for row in config.prompts} if field else {}
    evaluator = driver.evaluator(ask, method.answer_rule, every=hp["eval_every"], at_start=checkpoint is None)
    trainer = driver.trainer(model, rows, method, hp, config.max_steps, config.seed, folder, labels=labels,
                             references=references, evaluator=evaluator)
    if stop.requested:
        return "cancelled", f"cancelled by {stop.signal_name} before the first step"
    if checkpoint is not None:
        events.status("running", f"resumed from {CHECKPOINTS_DIR}/{checkpoint.name} at step "
                                 f"{checkpoint_step(checkpoint)}")
    else:
        events.status("running", f"training {config.method} on {len(config.prompts)} prompts for "
                                 f"{config.max_steps} steps")
    try:
        done = driver.train(trainer, config.max_steps, checkpoint)
    except Cancelled as cancel:
        return "cancelled", (f"cancelled by {stop.signal_name} after step {cancel.steps}; checkpoint written, resume "
                             "continues")
    return "succeeded", f"{done} steps"


# ---------------------------------------------------------------- the watchdog

# How often a trainer checks that its supervisor's process is still there.
SUPERVISOR_CHECK_SECONDS = 2.0


def stop_when_supervisor_is_gone(pid: int | None, every: float = SUPERVISOR_CHECK_SECONDS) -> threading.Thread | None:
    """A trainer whose supervisor died (its worker SIGKILLed, OOM-killed) would train on unwatched, its
    events never read: once process `pid` is gone it signals itself SIGTERM, as a cancel does, so it
    stops after its step with a checkpoint (GracefulStop), from which the run's next supervisor resumes
    it. Every rank checks, since a rank's parent is `accelerate launch`, not the supervisor."""
    if not pid:
        return None

    def watch() -> None:
        while True:
            time.sleep(every)
            if not process_is_alive(pid):
                print(f"rl.train: the run's supervisor (process {pid}) is gone; stopping after this step",
                      file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    thread = threading.Thread(target=watch, name="supervisor-watch", daemon=True)
    thread.start()
    return thread


def process_is_alive(pid: int) -> bool:
    """Whether process `pid` runs; a zombie (dead, not yet reaped by its parent) does not."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass  # alive, another user's
        return True
