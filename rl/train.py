"""`python -m rl.train --config CONFIG.json --out RUN_DIR [--resume]` (DESIGN section 4.1).

Reads the run config, checks all of it before anything heavy is imported (a bad
config fails in well under a second with one message naming the field), then
trains with LabelFreeGRPOTrainer and appends events to RUN_DIR/events.jsonl.

Exit status: 0 on success or on a graceful cancel (SIGTERM: the step in progress
finishes, a checkpoint is written, `status: cancelled`); 2 for a bad config and
1 for a failure during training, both after a `status: failed` event.

Under `accelerate launch --num_processes N` (rl.launch) every rank runs this; the
prompts_per_step × n_votes rollouts of a step are split evenly over the ranks, and
rank 0 alone writes events.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no code path downloads from a hub (DESIGN section 3)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# TRL 1.16 calls transformers APIs that transformers 5 renamed; the rename notices would bury real errors
# in the stderr tail the supervisor keeps
warnings.filterwarnings("ignore", category=FutureWarning, module=r"(transformers|trl)(\.|$)")

from rl.events import EventWriter  # noqa: E402
from rl.grpo_config import grpo_config, world_size  # noqa: E402
from rl.methods import Method, get_method, validate_hyperparameters  # noqa: E402
from rl.params import FieldError  # noqa: E402
from rl.policy import (CHECKPOINTS_DIR, ModelPathError, last_checkpoint, load_tokenizer,  # noqa: E402
                       load_trainable_model, resolve_model_path)
from rl.prompts import format_prompt  # noqa: E402

class ConfigError(ValueError):
    """A config that cannot run; `field` names the culprit (a top-level key or a hyperparameter)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


@dataclass
class RunConfig:
    method: str
    model_path: Path
    prompts: list[dict]
    eval_prompts: list[dict] | None
    eval_prompt_set: str | None
    embedding_model: str | None
    max_steps: int
    seed: int
    hyperparameters: dict


# ---------------------------------------------------------------- config checks (no torch yet)


def load_config(path: str | os.PathLike) -> RunConfig:
    """The validated run config, or ConfigError naming the first thing wrong with it."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError("config", f"config file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError("config", f"config file {str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise ConfigError("config", "the config must be a JSON object")
    unknown = set(raw) - {"method", "model", "prompts", "eval_prompts", "embedding_model", "max_steps", "seed",
                          "hyperparameters"}
    if unknown:
        raise ConfigError(sorted(unknown)[0], f"unknown config key(s): {', '.join(sorted(unknown))}")

    method = raw.get("method")
    values = raw.get("hyperparameters") or {}
    if not isinstance(values, dict):
        raise ConfigError("hyperparameters", "hyperparameters must be a JSON object of name -> value")
    try:
        hyperparameters = validate_hyperparameters(method, values)
    except FieldError as e:
        raise ConfigError(e.field, str(e)) from None
    if hyperparameters["n_votes"] < 2:  # GRPO needs a group to compute an advantage
        raise ConfigError("n_votes", f"n_votes={hyperparameters['n_votes']} is invalid: GRPO needs at least 2 "
                                     "rollouts per prompt")

    if hyperparameters["temperature"] <= 0:  # greedy rollouts are all alike: nothing to vote on or to learn from
        raise ConfigError("temperature", f"temperature={hyperparameters['temperature']} is invalid: training "
                                         "samples its rollouts, expected a number in (0, 2]")

    max_steps = _integer(raw, "max_steps", minimum=1)
    seed = _integer(raw, "seed", minimum=0, default=0)
    try:
        model_path = resolve_model_path(raw.get("model", "default"))
    except ModelPathError as e:
        raise ConfigError("model", str(e)) from None

    prompts = read_prompts(raw.get("prompts"), "prompts")
    spec = get_method(method)
    if spec.reads_prompts and len(prompts) < hyperparameters["prompts_per_step"]:
        raise ConfigError("prompts_per_step", f"prompts_per_step={hyperparameters['prompts_per_step']} is invalid: "
                                              f"the prompt file has only {len(prompts)} prompt(s)")
    check_references(spec, hyperparameters, prompts)
    eval_path = raw.get("eval_prompts")
    eval_prompts = read_prompts(eval_path, "eval_prompts") if eval_path is not None else None
    embedding_model = raw.get("embedding_model")
    if embedding_model is not None and not (isinstance(embedding_model, str) and Path(embedding_model).is_dir()):
        raise ConfigError("embedding_model", f"embedding_model={embedding_model!r} is not a local "
                                             "sentence-transformers directory (null uses the default MiniLM)")
    check_generation_backend(hyperparameters["generation_backend"])

    return RunConfig(method=method, model_path=model_path, prompts=prompts, eval_prompts=eval_prompts,
                     eval_prompt_set=Path(eval_path).stem if eval_path is not None else None,
                     embedding_model=embedding_model, max_steps=max_steps, seed=seed,
                     hyperparameters=hyperparameters)


def _integer(raw: dict, key: str, minimum: int, default: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(key, f"{key}={value!r} is invalid: expected an integer >= {minimum}")
    return value


def check_references(spec: Method, hyperparameters: dict, prompts: list[dict]) -> None:
    """A method that reads y* (Method.reference_field_for: DARL and RLPR a row's `reference`, RLVR its `label`)
    needs it on every prompt."""
    field = spec.reference_field_for(hyperparameters)
    if field is None:
        return
    for number, row in enumerate(prompts, start=1):
        if row.get(field) is None:
            hint = (f"; set {spec.own_reference_switch} to run label-free" if spec.own_reference_switch else
                    " (a held-out label is never used as a reference)" if field == "reference" else
                    f": {spec.name} is supervised and rewards agreement with the label")
            raise ConfigError("prompts", f"{spec.name} needs a {field!r} for every prompt (row {number} "
                                         f"{row['id']!r} has none){hint}")


def check_generation_backend(backend: str) -> None:
    """vLLM needs its package and a GPU; say so before any model is loaded."""
    if backend != "vllm":
        return
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise ConfigError("generation_backend", "generation_backend='vllm' needs the vllm package "
                                                "(requirements-gpu.txt); use 'hf' on this machine")
    import torch

    if not torch.cuda.is_available():
        raise ConfigError("generation_backend", "generation_backend='vllm' needs a CUDA GPU and none is "
                                                "visible; use 'hf'")


def read_prompts(path, field: str) -> list[dict]:
    """Rows {id, prompt, label?, reference?, system?} from JSONL (or a JSON array); ids are strings."""
    if not isinstance(path, str) or not path:
        raise ConfigError(field, f"{field} must be the path of a JSONL prompt file, got {path!r}")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(field, f"{field}: prompt file {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(field, f"{field}: cannot read prompt file {path!r}: {e}") from None
    try:
        if text.lstrip().startswith("["):
            rows = list(enumerate(json.loads(text), start=1))
        else:
            rows = [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    except json.JSONDecodeError as e:
        raise ConfigError(field, f"{field}: prompt file {path!r} is not JSONL: {e}") from None
    if not rows:
        raise ConfigError(field, f"{field}: prompt file {path!r} has no prompts")

    prompts, seen = [], set()
    for number, row in rows:
        where = f"{field}: row {number} of {path!r}"
        if not isinstance(row, dict):
            raise ConfigError(field, f"{where} is not a JSON object")
        prompt = row.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(field, f"{where} has no non-empty string 'prompt'")
        prompt_id = str(row.get("id", number))
        if prompt_id in seen:
            raise ConfigError(field, f"{where} repeats id {prompt_id!r}")
        seen.add(prompt_id)
        label = row.get("label", row.get("answer"))  # held out: monitoring only, never a reward input
        reference = row.get("reference")  # DARL / RLPR's y*: an explicit column, never the label
        system = row.get("system")  # an uploaded chat prompt's own system message: replaces the paper's
        if system is not None and not isinstance(system, str):
            raise ConfigError(field, f"{where} has a 'system' that is not a string")
        prompts.append({"id": prompt_id, "prompt": prompt,
                        "label": None if label is None else str(label),
                        "reference": None if reference is None else str(reference),
                        "system": system or None})
    return prompts


# ---------------------------------------------------------------- training


def build_trainer(config: RunConfig, run_dir: Path, events: EventWriter, stop, resuming: bool = False):
    """LabelFreeGRPOTrainer with the event callbacks, from a validated config."""
    import torch
    from datasets import Dataset
    from transformers import PrinterCallback
    from transformers.utils import logging as hf_logging

    from rl.callbacks import EventLogCallback, PeriodicEval
    from rl.similarity import Embedder
    from rl.trainer import LabelFreeGRPOTrainer

    hf_logging.disable_progress_bar()  # progress bars in a log file are noise
    hp, spec = config.hyperparameters, get_method(config.method)
    on_gpu = torch.cuda.is_available()
    tokenizer = load_tokenizer(config.model_path)
    model = load_trainable_model(config.model_path)  # fp32 weights; bf16 only as the GPU's compute type

    # Only the prompt and its id reach TRL: TRL hands every dataset column to the reward function,
    # so the held-out label stays in the id -> label map given to the trainer's LabelMonitor.
    # DESIGN §6: the policy sees each prompt as its paper gives it, through its chat template with the paper's
    # system prompt (or the row's own system message)
    dataset = Dataset.from_list([{"prompt": formatted_prompt(tokenizer, spec, row), "prompt_id": row["id"]}
                                 for row in config.prompts])
    labels = {row["id"]: row["label"] for row in config.prompts if row["label"] is not None}
    field = spec.reference_field_for(hp)  # None for the label-free methods: they get no references at all
    references = {row["id"]: row[field] for row in config.prompts} if field else {}
    # loaded once per run: every method's group event carries the similarity matrix of its rollouts
    embedder = Embedder.for_run(config.embedding_model, hp, device="cuda" if on_gpu else "cpu")
    events.log("info", embedder.summary())  # the run's record of what embedded its rollouts

    args = grpo_config(hp, max_steps=config.max_steps, seed=config.seed, output_dir=run_dir / CHECKPOINTS_DIR)
    event_log = EventLogCallback(events, run_dir)
    callbacks = [event_log, stop]
    evaluator = None
    if config.eval_prompts and hp["eval_every"] > 0:
        eval_rows = [dict(row, prompt=formatted_prompt(tokenizer, spec, row)) for row in config.eval_prompts]
        evaluator = PeriodicEval(events, eval_rows, config.eval_prompt_set, every=hp["eval_every"],
                                 samples=hp["eval_samples"], temperature=hp["eval_temperature"],
                                 top_p=hp["eval_top_p"], max_new_tokens=hp["max_completion_length"],
                                 answer_rule=spec.answer_rule, at_start=not resuming)
        callbacks.append(evaluator)
    trainer = LabelFreeGRPOTrainer(model=model, args=args, train_dataset=dataset, processing_class=tokenizer,
                                   callbacks=callbacks, method=spec, n_train=hp["n_train"],
                                   hyperparameters=hp, labels=labels, references=references, embedder=embedder)
    trainer.remove_callback(PrinterCallback)  # the event log is the record; keep stdout quiet
    event_log.trainer = trainer
    if evaluator is not None:
        evaluator.trainer = trainer
    return trainer


def check_prompt_lengths(config: RunConfig, batch: int = 1024) -> None:
    """ConfigError naming the first prompt longer than max_prompt_length tokens as the policy would see it:
    a 2 MB prompt once grew the trainer to 19.7 GB before the kernel killed it."""
    limit, spec = config.hyperparameters["max_prompt_length"], get_method(config.method)
    tokenizer = load_tokenizer(config.model_path)
    for field, rows in (("prompts", config.prompts), ("eval_prompts", config.eval_prompts or [])):
        texts = [formatted_prompt(tokenizer, spec, row) for row in rows]
        # A token covers at least one UTF-8 byte (byte-level BPE; SentencePiece may add one word-start
        # token), so only a text of `limit` bytes or more can be too long: usually none is, and nothing
        # is tokenized here twice (TRL tokenizes each batch as it generates).
        suspects = [(row, text) for row, text in zip(rows, texts) if len(text.encode("utf-8")) >= limit]
        for start in range(0, len(suspects), batch):
            chunk = suspects[start:start + batch]
            ids = tokenizer([text for _, text in chunk], add_special_tokens=False)["input_ids"]
            for (row, _), tokens in zip(chunk, ids):
                if len(tokens) > limit:
                    raise ConfigError("max_prompt_length", f"{field}: prompt {row['id']!r} is {len(tokens):,} tokens "
                                      f"long with its chat template; max_prompt_length is {limit:,} (raise it or "
                                      "shorten the prompt)")


def formatted_prompt(tokenizer, spec: Method, row: dict) -> str:
    """The text the policy is given for a prompt row: the row's own system message or the method's paper's."""
    return format_prompt(tokenizer, row["prompt"], row.get("system") or spec.system_prompt)


def _note_superseded_steps(events: EventWriter, checkpoint: Path | None) -> None:
    """After a hard kill, steps past the last checkpoint are run again: say so in the log."""
    from rl.events import read_events

    resumed_at = int(checkpoint.name.split("-")[-1]) if checkpoint else 0
    logged = [e["step"] for e in read_events(events.path) if e["type"] == "metrics"]
    if checkpoint is None:
        events.log("warning", "--resume found no checkpoint; starting again from step 0")
    if logged and max(logged) > resumed_at:
        events.log("warning", f"steps {resumed_at + 1}..{max(logged)} ran after the last checkpoint and are run "
                              "again; their earlier events are superseded by the ones that follow")


def train(config: RunConfig, run_dir: Path, events: EventWriter, resume: bool) -> tuple[str, str]:
    """Run training; returns the final status event's (state, message): succeeded or cancelled."""
    if get_method(config.method).scorer is None:  # R-Zero: phases of LabelFreeGRPOTrainer in a loop (rl/rzero.py)
        from rl.rzero import train_rzero
        return train_rzero(config, run_dir, events, resume)
    from rl.callbacks import GracefulStop

    stop = GracefulStop()
    stop.install()  # early: a cancel while the model loads still ends cleanly
    checkpoint = last_checkpoint(run_dir) if resume else None
    if resume:
        _note_superseded_steps(events, checkpoint)
    trainer = build_trainer(config, run_dir, events, stop, resuming=checkpoint is not None)
    if stop.requested:
        return "cancelled", f"cancelled by {stop.signal_name} before the first step"
    if checkpoint is not None:
        step = int(checkpoint.name.split("-")[-1])
        events.status("running", f"resumed from {CHECKPOINTS_DIR}/{checkpoint.name} at step {step}")
    else:
        events.status("running", f"training {config.method} on {len(config.prompts)} prompts for "
                                 f"{config.max_steps} steps")
    trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None)
    step = trainer.rollout_step()  # rollout batches, the event log's steps (TRL counts optimizer updates)
    if stop.requested and step < config.max_steps:
        return "cancelled", f"cancelled by {stop.signal_name} after step {step}; checkpoint written, resume continues"
    return "succeeded", f"{step} steps"


# ---------------------------------------------------------------- several processes (accelerate launch)


def check_processes(config: RunConfig, processes: int) -> None:
    """What a run on several processes needs beyond a valid config."""
    if processes <= 1:
        return
    # R-Zero's GRPO phases run on the shared trainer, but the loop around them (the pool of the questions phase,
    # the solver answering inside the challenger's reward, the per-iteration files) samples on one process
    if get_method(config.method).scorer is None:
        raise ConfigError("gpus", f"{config.method} runs on one process only; start it with gpus=1")
    hp = config.hyperparameters
    rollouts = hp["prompts_per_step"] * hp["n_votes"]
    if rollouts % processes:
        raise ConfigError("prompts_per_step", f"prompts_per_step × n_votes = {rollouts} rollouts per step do not "
                                              f"split evenly over {processes} processes")
    per_update = hp["prompts_per_update"] * hp["n_votes"]
    if per_update % processes:
        raise ConfigError("prompts_per_update", f"prompts_per_update × n_votes = {per_update} rollouts per update "
                                                f"do not split evenly over {processes} processes")


class SilentEvents:
    """What ranks other than 0 hold instead of an EventWriter: the same calls, nothing written, so the log
    keeps a single writer and one `seq` sequence."""

    def __init__(self, run_dir: Path):
        from rl.events import EVENTS_FILE
        self.path = Path(run_dir) / EVENTS_FILE

    def __getattr__(self, name):
        return lambda *args, **kwargs: None

    def __enter__(self) -> "SilentEvents":
        return self

    def __exit__(self, *exc) -> None:
        pass


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rl.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", required=True, help="run config JSON (DESIGN section 4.1)")
    parser.add_argument("--out", required=True, help="run directory; events go to RUN_DIR/events.jsonl")
    parser.add_argument("--resume", action="store_true", help="continue from the last checkpoint in RUN_DIR")
    args = parser.parse_args(argv)
    run_dir = Path(args.out)
    # only on the supervisor's host: a rank on another node of a Slurm job cannot see its process (srun's
    # SIGTERM reaches it instead)
    if os.environ.get("EVOLAB_SUPERVISOR_HOST", socket.gethostname()) == socket.gethostname():
        stop_when_supervisor_is_gone(int(os.environ.get("EVOLAB_SUPERVISOR_PID") or 0))
    writer = EventWriter if int(os.environ.get("RANK", "0")) == 0 else SilentEvents
    with writer(run_dir) as events:
        try:
            config = load_config(args.config)
            check_processes(config, world_size())
            check_prompt_lengths(config)
        except ConfigError as e:
            events.status("failed", f"invalid config: {e}")
            print(f"rl.train: invalid config ({e.field}): {e}", file=sys.stderr)
            return 2
        except Exception as e:  # a config check that crashed is still a failed run, not a silent one
            events.status("failed", f"could not read the config: {type(e).__name__}: {e}")
            traceback.print_exc()
            return 2
        try:
            state, message = train(config, run_dir, events, resume=args.resume)
        except Exception as e:  # the message goes to the dashboard; the traceback to the log and stderr
            trace = traceback.format_exc()
            print(trace, file=sys.stderr)
            events.log("error", trace[-4000:])
            events.status("failed", f"{type(e).__name__}: {e}")
            return 1
        events.status(state, message)
        return 0


if __name__ == "__main__":
    sys.exit(main())
