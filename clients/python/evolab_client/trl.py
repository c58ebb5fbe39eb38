"""`EvolabCallback`: an unmodified TRL `GRPOTrainer` reports its run to Evolab.

    trainer = GRPOTrainer(...)
    trainer.add_callback(EvolabCallback(name="qwen-ttrl"))
    trainer.train()

At each log the callback sends the step's metrics (unless Transformers' own MLflow callback already sends
them to this run: `report_to="mlflow"` with MLFLOW_TRACKING_URI pointing at Evolab) and every completion
of the latest generation batch with its prompt, each reward function's reward, their weighted total and
its advantage. The completions are what GRPOTrainer keeps for its completions table (`_logs`: the last
`generation_batch_size` completions); a batch is sent once however many logs it stays for.

The run: `run=` names an existing one (Evolab id, MLflow run id or EXPERIMENT/NAME); else the run that
Transformers' MLflow callback started, when there is one; else a new run named `name` (or the trainer's
run_name) in `experiment`. A run the callback created is ended FINISHED with the training.
"""
from __future__ import annotations

import inspect
import sys

from transformers import TrainerCallback

from .client import Evolab, RunRef
from .completions import completion_text, prompt_text, rollout


class EvolabCallback(TrainerCallback):
    def __init__(self, run: str | None = None, *, name: str | None = None, experiment: str | None = None,
                 answer_rule: str | None = None, trainer=None, client: Evolab | None = None,
                 url: str | None = None, token: str | None = None):
        self.run_ref, self.name, self.experiment, self.answer_rule = run, name, experiment, answer_rule
        self.trainer = trainer
        self.client = client or Evolab(url=url, token=token)
        self.run: RunRef | None = None
        self.created = False
        self.send_metrics = True
        self._last_batch = None  # the advantages of the batch sent last (its float objects)

    # --- the run ---------------------------------------------------------------------------------

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        if self.trainer is None:
            self.trainer = _calling_trainer(self)
        self.run, self.created, self.send_metrics = self._resolve_run(args)
        tags = {"evolab.trainer": "trl"}
        if self.answer_rule:
            tags["evolab.answer_rule"] = self.answer_rule
        self.client.set_tags(self.run.mlflow_run_id, tags)

    def _resolve_run(self, args):
        if self.run_ref:
            run = self.client.find_run(self.run_ref)
            if run is None:
                raise ValueError(f"Evolab has no run {self.run_ref!r}")
            return run, False, True
        mlflow = sys.modules.get("mlflow")
        active = mlflow.active_run() if mlflow is not None else None
        if active is not None and _same_server(mlflow.get_tracking_uri(), self.client.url):
            # report_to="mlflow" started this run on Evolab: its callback sends the metrics
            return self.client.find_run(active.info.run_id), False, False
        return self.client.create_run(self.name or args.run_name, experiment=self.experiment), True, True

    def on_train_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero and self.run is not None:
            self._send_completions(state)
            if self.created:
                self.client.finish(self.run.mlflow_run_id, "FINISHED")

    # --- what a log carries ----------------------------------------------------------------------

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or self.run is None:
            return
        if self.send_metrics and logs:
            self.client.log_metrics(self.run.mlflow_run_id, state.global_step, logs)
        self._send_completions(state, kwargs.get("processing_class"))

    def _send_completions(self, state, tokenizer=None):
        kept = getattr(self.trainer, "_logs", None)
        if not kept or not kept["completion"]:
            return
        completions, advantages = list(kept["completion"]), list(kept["advantages"])
        if self._last_batch is not None and len(advantages) == len(self._last_batch) and all(
                a is b for a, b in zip(advantages, self._last_batch)):
            return  # the batch this log still shows was sent at an earlier log (its advantages are the same objects)
        prompts = list(kept["prompt"])
        rewards = {name: list(values) for name, values in kept["rewards"].items()}
        weights = dict(zip(getattr(self.trainer, "reward_func_names", []),
                           [float(w) for w in getattr(self.trainer, "reward_weights", [])]))
        seen: dict[str, int] = {}
        lines = []
        for i, (prompt, completion) in enumerate(zip(prompts, completions)):
            text = prompt_text(prompt)
            index = seen.get(text, 0)
            seen[text] = index + 1
            line = rollout(state.global_step, text, completion_text(completion), index,
                           {name: values[i] for name, values in rewards.items() if i < len(values)}, weights,
                           advantages[i] if i < len(advantages) else None)
            if tokenizer is not None and hasattr(tokenizer, "__call__"):
                line["length"] = len(tokenizer(line["completion"], add_special_tokens=False)["input_ids"])
            lines.append(line)
        for start in range(0, len(lines), 1000):  # the last request says the step is whole
            whole = start + 1000 >= len(lines)
            self.client.post_rollouts(self.run.id, lines[start:start + 1000],
                                      complete_through=state.global_step if whole else None)
        self._last_batch = advantages  # held, so no new batch's values can reuse their ids


def _same_server(tracking_uri: str | None, url: str) -> bool:
    return bool(tracking_uri) and tracking_uri.rstrip("/").removesuffix("/mlflow") == url.rstrip("/")


def _calling_trainer(callback):
    """The Trainer whose train() is running this callback: the caller's frames hold it as `self`. Pass
    `trainer=` to the callback to skip this look."""
    frame = inspect.currentframe()
    while frame is not None:
        candidate = frame.f_locals.get("self")
        handler = getattr(candidate, "callback_handler", None)
        if handler is not None and callback in getattr(handler, "callbacks", []):
            return candidate
        frame = frame.f_back
    raise RuntimeError("EvolabCallback could not find its trainer: pass EvolabCallback(trainer=trainer)")
