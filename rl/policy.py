"""Where the small default policy lives, and how a config's "model" becomes a path.

`"model": "default"` (DESIGN section 4.1) is the tiny Llama (byte-level BPE, one token
per digit) trained by scripts/train_default_policy.py on synthetic arithmetic. Its
tokenizer has a small chat template (`<s><|system|>...\\n<|user|>...\\n<|assistant|>`)
and it is trained on prompts formatted by `rl.prompts.format_prompt`: under the
step-by-step system prompt (and under none) it answers `... \\boxed{N}.`, under DARL's
`<think> ... </think> <answer>N</answer>`, and given the user turn
`rl.arithmetic.CHALLENGER_PROMPT` it writes `<question> ... </question>`; its held-out
figures per format are in rl/assets/default_policy/evaluation.json. Anything else is
a local Hugging Face model directory. Nothing here downloads from a hub.
"""

from __future__ import annotations

from pathlib import Path

from rl.arithmetic import synthetic_problems

ASSETS_DIR = Path(__file__).resolve().parent / "assets"
DEFAULT_POLICY_DIR = ASSETS_DIR / "default_policy"
SAMPLE_PATH = ASSETS_DIR / "arithmetic_sample.json"  # 64 held-out problems {prompt, answer, id}
HELDOUT_SEED = 1000  # the default policy's held-out problems; training data excludes them

CHECKPOINTS_DIR = "checkpoints"  # RUN_DIR/checkpoints/checkpoint-<step>, each a model directory
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")


class ModelPathError(ValueError):
    """The configured model is not a usable local model directory."""


def resolve_model_path(model: str) -> Path:
    """"default" -> the shipped policy; otherwise a directory with config.json and weights."""
    path = DEFAULT_POLICY_DIR if model == "default" else Path(model).expanduser()
    if model == "default" and not path.is_dir():
        raise ModelPathError(f"model: the default policy is missing from {path} "
                             "(scripts/train_default_policy.py writes it)")
    if not path.is_dir():
        raise ModelPathError(f"model: {model!r} is not a directory (use \"default\" or a local model path)")
    if not (path / "config.json").is_file():
        raise ModelPathError(f"model: {str(path)!r} has no config.json")
    if not any((path / name).is_file() for name in WEIGHT_FILES):
        raise ModelPathError(f"model: {str(path)!r} has no weights (expected one of {', '.join(WEIGHT_FILES)})")
    return path


def last_checkpoint(folder: Path) -> Path | None:
    """The highest-step complete TRL checkpoint (checkpoint-<step> with its trainer_state.json) in `folder`: a run's
    RUN_DIR/checkpoints, or one of R-Zero's phase folders (rl/methods/r_zero/training.py)."""
    folders = [p for p in Path(folder).glob("checkpoint-*")
               if p.name.split("-")[-1].isdigit() and (p / "trainer_state.json").exists()]
    return max(folders, key=lambda p: int(p.name.split("-")[-1]), default=None)


def heldout_problems(n: int = 256) -> list[dict]:
    """The default policy's held-out problems (the first 64 are rl/assets/arithmetic_sample.json)."""
    return synthetic_problems(n, seed=HELDOUT_SEED)


def load_tokenizer(path):
    """A model directory's tokenizer, offline, left-padded (generation continues from the last prompt token;
    TRL generates from left-padded prompts), with EOS as padding when it names no pad token."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tokenizer.padding_side = "left"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def load_trainable_model(path):
    """A policy to train, with fp32 weights on any device.

    On a GPU, bf16 is the compute type (GRPOConfig's bf16 autocast), not the storage type: AdamW updating bf16 weights
    at the papers' learning rates (5e-7 to 1e-6) rounds most updates away, since bf16 keeps 8 bits of mantissa.
    verl keeps fp32 master weights for the same reason; loading with dtype "auto" gave a bf16 checkpoint bf16 weights.
    """
    import torch
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True, dtype=torch.float32)
