"""A run's config (DESIGN section 4.1), checked whole before anything heavy is imported: a bad config fails in well
under a second with one FieldError naming the field. `python -m rl.train` (rl/train.py) reads it with
`load_config`, then `check_processes` and `check_prompt_lengths`; the driver (rl/driver.py) trains from it."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from rl.methods import Method, get_method, validate_hyperparameters
from rl.params import FieldError
from rl.policy import ModelPathError, load_tokenizer, resolve_model_path
from rl.prompts import format_prompt


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
    """The validated run config, or FieldError naming the first thing wrong with it."""
    path = Path(path)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FieldError("config", f"config file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise FieldError("config", f"config file {str(path)!r} is not valid JSON: {e}") from None
    if not isinstance(raw, dict):
        raise FieldError("config", "the config must be a JSON object")
    unknown = set(raw) - {"method", "model", "prompts", "eval_prompts", "embedding_model", "max_steps", "seed",
                          "hyperparameters"}
    if unknown:
        raise FieldError(sorted(unknown)[0], f"unknown config key(s): {', '.join(sorted(unknown))}")

    method = raw.get("method")
    values = raw.get("hyperparameters") or {}
    if not isinstance(values, dict):
        raise FieldError("hyperparameters", "hyperparameters must be a JSON object of name -> value")
    hyperparameters = validate_hyperparameters(method, values)  # the launch's check too: the bounds are the Params'
    max_steps = _integer(raw, "max_steps", minimum=1)
    seed = _integer(raw, "seed", minimum=0, default=0)
    try:
        model_path = resolve_model_path(raw.get("model", "default"))
    except ModelPathError as e:
        raise FieldError("model", str(e)) from None

    prompts = read_prompts(raw.get("prompts"), "prompts")
    spec = get_method(method)
    if spec.reads_prompts and len(prompts) < hyperparameters["prompts_per_step"]:
        raise FieldError("prompts_per_step", f"prompts_per_step={hyperparameters['prompts_per_step']} is invalid: "
                                              f"the prompt file has only {len(prompts)} prompt(s)")
    check_references(spec, hyperparameters, prompts)
    eval_path = raw.get("eval_prompts")
    eval_prompts = read_prompts(eval_path, "eval_prompts") if eval_path is not None else None
    embedding_model = raw.get("embedding_model")
    if embedding_model is not None and not (isinstance(embedding_model, str) and Path(embedding_model).is_dir()):
        raise FieldError("embedding_model", f"embedding_model={embedding_model!r} is not a local "
                                             "sentence-transformers directory (null uses the default MiniLM)")
    check_generation_backend(hyperparameters["generation_backend"])

    return RunConfig(method=method, model_path=model_path, prompts=prompts, eval_prompts=eval_prompts,
                     eval_prompt_set=Path(eval_path).stem if eval_path is not None else None,
                     embedding_model=embedding_model, max_steps=max_steps, seed=seed,
                     hyperparameters=hyperparameters)


def _integer(raw: dict, key: str, minimum: int, default: int | None = None) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise FieldError(key, f"{key}={value!r} is invalid: expected an integer >= {minimum}")
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
            raise FieldError("prompts", f"{spec.name} needs a {field!r} for every prompt (row {number} "
                                         f"{row['id']!r} has none){hint}")


def check_generation_backend(backend: str) -> None:
    """vLLM needs its package and a GPU; say so before any model is loaded."""
    if backend != "vllm":
        return
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        raise FieldError("generation_backend", "generation_backend='vllm' needs the vllm package "
                                                "(requirements-gpu.txt); use 'hf' on this machine")
    import torch

    if not torch.cuda.is_available():
        raise FieldError("generation_backend", "generation_backend='vllm' needs a CUDA GPU and none is "
                                                "visible; use 'hf'")


def read_prompts(path, field: str) -> list[dict]:
    """Rows {id, prompt, label?, reference?, system?} from JSONL (or a JSON array); ids are strings."""
    if not isinstance(path, str) or not path:
        raise FieldError(field, f"{field} must be the path of a JSONL prompt file, got {path!r}")
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FieldError(field, f"{field}: prompt file {path!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as e:
        raise FieldError(field, f"{field}: cannot read prompt file {path!r}: {e}") from None
    try:
        if text.lstrip().startswith("["):
            rows = list(enumerate(json.loads(text), start=1))
        else:
            rows = [(n, json.loads(line)) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    except json.JSONDecodeError as e:
        raise FieldError(field, f"{field}: prompt file {path!r} is not JSONL: {e}") from None
    if not rows:
        raise FieldError(field, f"{field}: prompt file {path!r} has no prompts")

    prompts, seen = [], set()
    for number, row in rows:
        where = f"{field}: row {number} of {path!r}"
        if not isinstance(row, dict):
            raise FieldError(field, f"{where} is not a JSON object")
        prompt = row.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise FieldError(field, f"{where} has no non-empty string 'prompt'")
        prompt_id = str(row.get("id", number))
        if prompt_id in seen:
            raise FieldError(field, f"{where} repeats id {prompt_id!r}")
        seen.add(prompt_id)
        label = row.get("label", row.get("answer"))  # held out: monitoring only, never a reward input
        reference = row.get("reference")  # DARL / RLPR's y*: an explicit column, never the label
        system = row.get("system")  # an uploaded chat prompt's own system message: replaces the paper's
        if system is not None and not isinstance(system, str):
            raise FieldError(field, f"{where} has a 'system' that is not a string")
        prompts.append({"id": prompt_id, "prompt": prompt,
                        "label": None if label is None else str(label),
                        "reference": None if reference is None else str(reference),
                        "system": system or None})
    return prompts


def check_prompt_lengths(config: RunConfig, batch: int = 1024) -> None:
    """FieldError naming the first prompt longer than max_prompt_length tokens as the policy would see it:
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
                    raise FieldError("max_prompt_length", f"{field}: prompt {row['id']!r} is {len(tokens):,} tokens "
                                      f"long with its chat template; max_prompt_length is {limit:,} (raise it or "
                                      "shorten the prompt)")


def formatted_prompt(tokenizer, spec: Method, row: dict) -> str:
    """The text the policy is given for a prompt row: the row's own system message or the method's paper's."""
    return format_prompt(tokenizer, row["prompt"], row.get("system") or spec.system_prompt)


# ---------------------------------------------------------------- several processes (accelerate launch)


def check_processes(config: RunConfig, processes: int) -> None:
    """What a run on several processes needs beyond a valid config."""
    if processes <= 1:
        return
    # R-Zero's GRPO phases run on the shared trainer, but the loop around them (the pool of the questions phase,
    # the solver answering inside the challenger's reward, the per-iteration files) samples on one process
    if get_method(config.method).trains_in_phases:
        raise FieldError("gpus", f"{config.method} runs on one process only; start it with gpus=1")
    hp = config.hyperparameters
    rollouts = hp["prompts_per_step"] * hp["n_votes"]
    if rollouts % processes:
        raise FieldError("prompts_per_step", f"prompts_per_step × n_votes = {rollouts} rollouts per step do not "
                                              f"split evenly over {processes} processes")
    per_update = hp["prompts_per_update"] * hp["n_votes"]
    if per_update % processes:
        raise FieldError("prompts_per_update", f"prompts_per_update × n_votes = {per_update} rollouts per update "
                                                f"do not split evenly over {processes} processes")
