"""Presets of the launch form: named sets of hyperparameter values per method, as data.

- ``paper``: the method's defaults, i.e. the paper's settings (rl/methods/).
- ``small_cpu``: a run that finishes in minutes on the small default policy with two CPU
  cores. The papers' 64 votes × 12,288 tokens per prompt would crawl there, so a launch that
  names no preset starts from this one when the model is "default" on a CPU queue
  (``default_preset``: the launch form's pre-selection and the API's default alike).

The form applies them with buttons (static/js/run_form.js) from the JSON ``form_presets``
builds; tests/webapp/test_run_form.py checks every preset validates for every method.
"""
from rl.methods import METHODS
from rl.params import FieldError

PAPER, SMALL_CPU = "paper", "small_cpu"

TITLES = {
    PAPER: "Paper settings",
    SMALL_CPU: "Small CPU run",
}
DESCRIPTIONS = {
    PAPER: "The hyperparameters of the method's paper (slow on a CPU: tens of rollouts of thousands of tokens).",
    SMALL_CPU: "8 votes of 96 tokens on 2 prompts per step, 20 steps: finishes in minutes with the default model "
               "on a 2-core CPU worker.",
}

# Shared names (DESIGN §5); each method only takes those in its schema.
_SMALL_CPU_SHARED = {
    "n_votes": 8,
    "n_train": 4,
    "prompts_per_step": 2,
    "prompts_per_update": 1,  # the papers' update batches (R-Zero 128, Intuitor 128, EMPO 32) cannot split 2 prompts
    "max_completion_length": 96,
    "temperature": 1.0,
    "eval_samples": 4,
    "eval_every": 5,
    "save_every": 0,
    "generation_backend": "hf",
}
SMALL_CPU_MAX_STEPS = 20


def preset_values(method: str, preset: str) -> dict:
    """``{"max_steps": int | None, "hyperparameters": {...}}`` for one method and preset; every
    hyperparameter of the method is present (the defaults where the preset says nothing).
    ``max_steps`` None leaves the form's value alone."""
    spec = METHODS[method]
    values = spec.defaults()
    max_steps = None
    if preset == SMALL_CPU:
        known = set(values)
        values.update({k: v for k, v in _SMALL_CPU_SHARED.items() if k in known})
        values.update(spec.small_cpu)  # the method's own small values (Method.small_cpu)
        max_steps = SMALL_CPU_MAX_STEPS
    elif preset != PAPER:
        raise KeyError(preset)
    return {"max_steps": max_steps, "hyperparameters": values}


def form_presets() -> dict:
    """Every preset of every method, for the launch form's JSON: {method: {preset: values}}."""
    return {name: {key: preset_values(name, key) for key in TITLES} for name in METHODS}


# Models the small preset is for: the bundled small policy (static/js/run_form.js reads this list from the form's JSON).
SMALL_MODELS = ("default",)


def default_preset(model: str, gpus: int | None = None) -> str:
    """The preset a launch starts from when it names none, for the launch form's pre-selection and the API
    alike: the small one for the small default policy on a CPU queue (`gpus` 0 or unset), else the paper's."""
    return SMALL_CPU if (model or "default").strip() in SMALL_MODELS and not gpus else PAPER


def check(preset) -> str:
    """`preset` if it is a preset's key, else a FieldError naming the field `preset`."""
    if not isinstance(preset, str) or preset not in TITLES:
        raise FieldError("preset", f"no preset {preset!r}: choose one of {', '.join(map(repr, TITLES))}")
    return preset
