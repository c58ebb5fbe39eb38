"""A policy loaded for a test to score or generate with (the trainer loads its own through rl/driver.py)."""
from rl.policy import load_tokenizer, resolve_model_path


def load_policy(model: str = "default"):
    """(model, tokenizer) on CPU, offline, tokenizer left-padded for generation."""
    from transformers import AutoModelForCausalLM

    path = resolve_model_path(model)
    return AutoModelForCausalLM.from_pretrained(path, local_files_only=True), load_tokenizer(path)
