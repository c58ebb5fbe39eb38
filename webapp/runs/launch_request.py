"""What a launch asks for, as the client gave it: one record read from the API's JSON, the launch form's inputs or a
run to clone, so that the list of launch settings is written once. actions.launch_run checks and resolves it (a
missing name, method or prompt set is refused there, naming the field)."""
from dataclasses import asdict, dataclass, fields
from typing import Any

from rl.params import FieldError


@dataclass(frozen=True)
class LaunchRequest:
    name: Any = None
    method: Any = None
    prompt_set: Any = None  # an id, as a JSON number or text
    team: Any = None  # an id or a name; must be the prompt set's team when given
    eval_prompt_set: Any = None
    model: Any = "default"
    embedding_model: Any = ""
    hyperparameters: Any = None  # {name: value} over the preset's, with alert_rules overrides riding along
    max_steps: Any = None
    seed: Any = 0
    gpus: Any = None
    nodes: Any = None
    engine_options: Any = None  # Slurm's partition, account, time_limit, sbatch
    tags: Any = None
    preset: Any = None  # whose values lie under the ones given; None: presets.default_preset's for the model

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_json(cls, data: dict) -> "LaunchRequest":
        """`POST /api/runs`'s body. A key that is no launch setting is refused, as PATCH refuses one it cannot
        change: a misspelt `max_step` silently dropped trained a run of the default length."""
        unknown = sorted(set(data) - set(cls.names()))
        if unknown:
            raise FieldError(unknown[0], f"{unknown[0]!r} is not a launch setting; a launch takes "
                                         f"{', '.join(cls.names())}")
        return cls(**data)

    @classmethod
    def of_run(cls, run, *, name=None, preset=None) -> "LaunchRequest":
        """The settings `run` was launched with, to launch again (a clone)."""
        return cls(name=name or f"{run.name} (clone)", method=run.method, prompt_set=run.prompt_set_id,
                   eval_prompt_set=run.eval_prompt_set_id, model=run.model, embedding_model=run.embedding_model,
                   hyperparameters=run.hyperparameters, max_steps=run.max_steps, seed=run.seed, gpus=run.gpus,
                   nodes=run.nodes, engine_options=run.engine_options, tags=run.tags, preset=preset)

    def as_dict(self) -> dict:
        return asdict(self)
