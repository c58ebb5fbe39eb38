"""Trainer callbacks that turn a TRL run into the event log of DESIGN section 4.2.

- EventLogCallback: `group` events at the end of each step, one `metrics` event
  per step with TRL's names mapped to DESIGN section 5, `checkpoint` events.
- GracefulStop: SIGTERM/SIGINT set a flag; the step in progress finishes, a
  checkpoint is saved and training stops (rl.train then writes `cancelled`).
- PeriodicEval: `eval` events on the held-out prompt set every eval_every steps.

A step here is a rollout batch (DESIGN section 4.7): TRL's global_step counts optimizer
updates, `updates_per_step(args)` of them per rollout batch, so every callback acts at
rollout-batch boundaries only and reports `rollout_step(args, state)`.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import torch
from transformers import TrainerCallback

from rl.answers import answers_equal, extract_boxed, majority_vote
from rl.events import EventWriter
from rl.methods import metric_prefixes
from rl.metric_catalogue import RECORDS
from rl.metrics import maj_at_k, majority_ratio, pass_at_k, unique_answers
from rl.trainer import updates_per_step

def rollout_step(args, state) -> int:
    """The event-log step: rollout batches done (TRL's global_step counts optimizer updates)."""
    return state.global_step // updates_per_step(args)


def at_step_boundary(args, state) -> bool:
    """Whether the optimizer update that just ended (or is about to begin) closes a rollout batch."""
    return state.global_step % updates_per_step(args) == 0


def evolab_metrics(logs: dict) -> dict[str, float]:
    """The DESIGN section 5 subset of one TRL log record, renamed (TRL 1.16's names, rl.trainer's own)."""
    values = {r.name: logs[r.trainer] for r in RECORDS if r.trainer and logs.get(r.trainer) is not None}
    values.update({name: v for name, v in logs.items() if "/" in name and name.split("/")[0] in _METHOD_PREFIXES
                   and v is not None})
    return values


_METHOD_PREFIXES = metric_prefixes()


class EventLogCallback(TrainerCallback):
    """Writes what LabelFreeGRPOTrainer recorded during a step to the event log."""

    def __init__(self, events: EventWriter, run_dir: Path):
        self.events = events
        self.run_dir = Path(run_dir)
        self.trainer = None  # set by the driver (rl/driver.py) once the trainer exists (callbacks are built first)
        self._step_started: float | None = None
        self._step_seconds: float | None = None

    def on_step_begin(self, args, state, control, **kwargs):
        if at_step_boundary(args, state):  # the first update of a rollout batch: generation happens in it
            self._step_started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        if not at_step_boundary(args, state):
            return  # an update inside the rollout batch: the step is not over
        if self._step_started is not None:  # generation + every update of the batch, unlike TRL's step_time
            self._step_seconds = time.perf_counter() - self._step_started
        groups = self.trainer.pop_groups()  # collective with several processes: every rank calls it
        if state.is_world_process_zero:
            for group in groups:
                self.events.group(rollout_step(args, state), **group)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs or "train_runtime" in logs:
            return  # the end-of-training summary is not a step
        values = evolab_metrics(logs)
        if self._step_seconds is not None:
            values["time/step"] = self._step_seconds
            # the rest of the step: old/reference log-probs, loss, backward and the optimizer step
            spent = values.get("time/generation", 0.0) + values.get("time/reward", 0.0)
            values["time/update"] = max(0.0, self._step_seconds - spent)
        if values:  # logged once per rollout batch (logging_steps = updates_per_step), TRL's values averaged
            self.events.metrics(rollout_step(args, state), values)
            self.events.sync()  # flushed to disk at least once per step (DESIGN section 4.2)

    def on_save(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            step = rollout_step(args, state)  # LabelFreeGRPOTrainer names the folder by rollout-batch step
            path = Path(args.output_dir) / f"checkpoint-{step}"
            self.events.checkpoint(step, path.resolve())
            self.events.sync()


class GracefulStop(TrainerCallback):
    """SIGTERM (the supervisor's cancel) and SIGINT: finish the step, checkpoint, stop."""

    def __init__(self):
        self.requested = False
        self.signal_name: str | None = None

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._handle)

    def _handle(self, signum, frame) -> None:
        # only a flag: interrupting a CUDA kernel or an optimizer step would leave a torn checkpoint
        self.requested = True
        self.signal_name = signal.Signals(signum).name

    def on_step_end(self, args, state, control, **kwargs):
        # only between rollout batches: a checkpoint inside one would lose its buffered rollouts on resume
        if at_step_boundary(args, state) and self._anyone_requested():
            control.should_save = True
            control.should_training_stop = True
        return control


    def _anyone_requested(self) -> bool:
        """With several processes, stop when any rank was signalled: ranks that stopped at different steps
        would hang in the next collective. A signal reaches every rank of `accelerate launch` anyway (torchrun
        forwards it), but not necessarily before the same step ends."""
        import torch.distributed as dist
        if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
            return self.requested
        from accelerate import PartialState
        flag = torch.tensor([1.0 if self.requested else 0.0], device=PartialState().device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() and not self.requested:
            self.requested, self.signal_name = True, self.signal_name or "SIGTERM"  # another rank's signal
        return self.requested


class PeriodicEval(TrainerCallback):
    """`eval` events: eval_samples completions per held-out prompt at eval_temperature and eval_top_p.

    pass@1 and pass@16 are the unbiased estimates from all eval_samples completions (EVOL-RL Table 1: pass@16
    from 32), maj@16 the vote of the first 16; pass@n and maj@n use all n when n is not 16. Answers are read
    with the method's own rule.
    """

    def __init__(self, events: EventWriter, prompts: list[dict], prompt_set: str, every: int, samples: int,
                 temperature: float, top_p: float, max_new_tokens: int, at_start: bool = True, batch_size: int = 64,
                 answer_rule=extract_boxed):
        self.events = events
        self.answer_rule = answer_rule
        self.prompts = prompts
        self.prompt_set = prompt_set
        self.every = every
        self.samples = samples
        self.temperature = temperature
        self.top_p = top_p
        self.max_new_tokens = max_new_tokens
        self.at_start = at_start
        self.batch_size = batch_size
        self.trainer = None  # set by the driver (rl/driver.py)

    def on_train_begin(self, args, state, control, **kwargs):
        # the starting point, to compare every later evaluation against; not again on resume (HF calls
        # on_train_begin before it restores global_step from the checkpoint, so the step cannot tell)
        if self.at_start:
            self.evaluate(state)

    def on_step_end(self, args, state, control, **kwargs):
        if not at_step_boundary(args, state):
            return
        step = rollout_step(args, state)
        if (self.every and step % self.every == 0) or state.global_step >= state.max_steps:
            self.evaluate(state, step)

    @torch.no_grad()
    def evaluate(self, state, step: int | None = None) -> dict:
        """Evaluate now; `step` is the event-log step (state.global_step when not given)."""
        model, tokenizer = self.trainer.model, self.trainer.processing_class
        was_training = model.training
        model.eval()
        try:
            texts = self._sample([row["prompt"] for row in self.prompts])
        finally:
            model.train(was_training)
        k = self.samples
        per_prompt: dict[str, list[float]] = {}
        lengths = []
        for i, row in enumerate(self.prompts):
            group = texts[i * k:(i + 1) * k]
            answers = [self.answer_rule(t) for t in group]
            lengths += [len(tokenizer(t, add_special_tokens=False)["input_ids"]) for t in group]
            majority = majority_vote(answers)
            values = {"majority_ratio": majority_ratio(answers, majority), "unique_answers": unique_answers(answers)}
            label = row.get("label")
            if label is not None:
                correct = sum(answers_equal(a, label) for a in answers)
                values["pass@1"] = pass_at_k(k, correct, 1)  # Codex Eq. (1) with k = 1: mean accuracy
                for kk in sorted({16, k} if k >= 16 else {k}):  # Codex Eq. (1): unbiased pass@k from n ≥ k samples
                    values[f"pass@{kk}"] = pass_at_k(k, correct, kk)
                    values[f"maj@{kk}"] = maj_at_k(answers, label, kk)
            for name, value in values.items():
                per_prompt.setdefault(name, []).append(value)
        summary = {name: sum(v) / len(v) for name, v in per_prompt.items()}
        summary["response_length/mean"] = sum(lengths) / max(1, len(lengths))
        if state.is_world_process_zero:
            self.events.eval(state.global_step if step is None else step, self.prompt_set, summary)
        return summary

    def _sample(self, prompts: list[str]) -> list[str]:
        model, tokenizer = self.trainer.model, self.trainer.processing_class
        expanded = [p for p in prompts for _ in range(self.samples)]
        sampling = ({"do_sample": True, "temperature": self.temperature, "top_p": self.top_p, "top_k": 0}
                    if self.temperature > 0 else {"do_sample": False})
        texts = []
        for start in range(0, len(expanded), self.batch_size):
            batch = tokenizer(expanded[start:start + self.batch_size], return_tensors="pt", padding=True,
                              padding_side="left").to(model.device)
            out = model.generate(**batch, max_new_tokens=self.max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                                 eos_token_id=tokenizer.eos_token_id, **sampling)
            texts += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
        return texts
