"""What a method is: its hyperparameter schema and the `Method` record that holds everything else.

A `Method` (one module per method in this package) is the only place that says what a method
is: its schema (defaults are the papers'; DESIGN §5 for the shared names), its group scorer,
its answer rule, its prompt (system prompt), its metric prefix, the signals its run page
charts, whether it reads references or labels, and how many steps a run of it logs.
Nothing here imports torch: the web process reads these records too.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

from rl.answers import extract_boxed
from rl.groups import BOXED_OPENER
from rl.params import FieldError, Param
from rl.prompts import STEP_BY_STEP_SYSTEM_PROMPT

def _max_steps(hyperparameters: dict, max_steps: int) -> int:
    return max_steps


@dataclass(frozen=True)
class Method:
    """One training method, whole. See the package docstring; rl/methods/ttrl.py is the simplest example."""

    name: str
    title: str
    paper: str
    label_free: bool
    hyperparameters: tuple[Param, ...]
    description: str = ""
    # where the defaults that differ from the shared ones come from (paper section, table, released script)
    defaults_source: str = ""
    # (Group, hyperparameters, PolicyProbe) -> GroupScore: one prompt's n_votes rollouts scored together
    # (rl/groups.py). None for R-Zero, which trains in phases with scorers of its own (rl/methods/r_zero/training.py).
    scorer: Callable | None = None
    # a run of it is a plan of phases (R-Zero's challenger, questions and solver: rl/methods/r_zero/training.py) that the driver
    # (rl/driver.py) runs, rather than one GRPO phase scored by `scorer`
    trains_in_phases: bool = False
    # how a final answer is read from a rollout; the vote, the group event's `answer` and the eval use it
    answer_rule: Callable[[str], str | None] = extract_boxed
    # where the final answer starts in a rollout: the reference-probability probes (DARL, RLPR) score y*
    # after the reasoning up to here
    answer_opener: str = BOXED_OPENER
    # the paper's system prompt (DESIGN §6: EVOL-RL App. C.3 / SimpleRL-Zoo, as TTRL and R-Zero's solver), given
    # through the policy's chat template (rl.prompts); a prompt row with its own system message keeps that one
    system_prompt: str | None = STEP_BY_STEP_SYSTEM_PROMPT
    # the prompt-row field read as y*: "reference" (DARL, RLPR) or "label" (RLVR, the supervised upper
    # bound, which uses the held-out label on purpose); None for the label-free methods
    reference_field: str | None = None
    # a bool hyperparameter that, when true, makes the method vote its own reference (DARL's label-free variant)
    own_reference_switch: str | None = None
    # the prefix of the method's own metric names (DESIGN §5: `evol_rl/novelty_mean`, ...)
    metric_prefix: str | None = None
    # the method's signals charted live on the run page, after the shared health signals
    charts: tuple[str, ...] = ("similarity/mean",)
    # the numeric extras of its rollouts that a run's search orders by through an index (PostgreSQL:
    # webapp/explorer/search_indexes.py makes one per name): each costs the method's rollouts a little at
    # ingestion, so a few, the ones people rank rollouts by. Every stored rollout of the method carries
    # them (null where the scorer has none); its other extras are ordered by over bounded ranges only
    search_extras: tuple[str, ...] = ()
    # whether label_accuracy is charted live when the prompts carry labels (R-Zero's solver trains on its
    # own questions, so a run of it logs none)
    charts_label_accuracy: bool = True
    # whether the reward credits a rollout for agreeing with the group's vote (TTRL's pseudo-label): with labels,
    # reward_accuracy then compares that credit with the label's (TTRL §4) and is charted beside label_accuracy
    rewards_the_vote: bool = False
    # a metric that reports the embeddings plus the scorer's time on its own (EVOL-RL's overhead figure)
    scoring_timer: str | None = None
    # False for a method that writes its own prompts (R-Zero): the prompt file is then not trained on
    reads_prompts: bool = True
    # the steps a run logs, from its hyperparameters and max_steps (R-Zero counts its phases instead)
    steps: Callable[[dict, int], int] = _max_steps
    # checks between hyperparameters beyond the shared ones; raises FieldError
    relations: Callable[[dict], None] | None = None
    # hyperparameters -> a filter over whole steps, one per run, for a rule that needs earlier steps (RLPR's
    # adaptive std filter): .apply(step, [each group's rewards]) -> (groups left out, metrics); its
    # .state_dict() / .load_state_dict() go into checkpoints
    step_filter: Callable[[dict], object] | None = None
    # hyperparameters -> None, or a scorer (probe, each training prompt's ids, their references) -> one value per
    # prompt, run once before training with the initial policy and handed to the scorer as `group.baseline` (RLPR's
    # frozen r′, as its release computes it); the values go into checkpoints, so a resumed run keeps them
    prompt_baselines: Callable[[dict], Callable | None] | None = None
    # the method's own values in the launch form's "Small CPU run" preset (webapp/runs/presets.py), over the shared
    # small values: a run that finishes in minutes with the default policy on two cores
    small_cpu: dict = field(default_factory=dict)
    # (prompt id, the run's model) -> (what it is, its text) for a prompt the method writes itself rather than reads
    # from the prompt set (R-Zero's challenger prompt), or None: what the rollout explorer shows as a rollout's prompt
    own_prompt: Callable[[str, str], tuple[str, str] | None] | None = None

    @property
    def needs_references(self) -> bool:
        return self.reference_field is not None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "title": self.title,
            "paper": self.paper,
            "needs_references": self.needs_references,
            "reference_field": self.reference_field,
            "label_free": self.label_free,
            "description": self.description,
            "defaults_source": self.defaults_source,
            "system_prompt": self.system_prompt,
            "metric_prefix": self.metric_prefix,
            "charts": list(self.charts),
            "search_extras": list(self.search_extras),
            "hyperparameters": [h.to_json() for h in self.hyperparameters],
        }

    def hyperparameter(self, name: str) -> Param:
        for h in self.hyperparameters:
            if h.name == name:
                return h
        raise KeyError(name)

    def defaults(self) -> dict:
        return {h.name: h.default for h in self.hyperparameters}

    def reference_field_for(self, hyperparameters: dict) -> str | None:
        """The prompt-row field a run with these hyperparameters reads as y*, or None when it reads none.

        The one place that decides whether a run needs references (or labels) on every prompt.
        """
        if self.own_reference_switch and hyperparameters.get(self.own_reference_switch):
            return None
        return self.reference_field

    def with_defaults(self, hyperparameters: dict) -> dict:
        """Stored values over the defaults: a run stored before a hyperparameter existed still reads every one."""
        return {**self.defaults(), **hyperparameters}

    def total_steps(self, hyperparameters: dict, max_steps: int) -> int:
        return self.steps(self.with_defaults(hyperparameters), max_steps)

    def validate(self, values: dict | None) -> dict:
        """The complete hyperparameters: defaults filled, values coerced.

        Raises FieldError (with ``field``) for an unknown name, a value of the wrong type or out of
        range, or values that contradict each other (n_train > n_votes, ...).
        """
        values = dict(values or {})
        known = {h.name for h in self.hyperparameters}
        for name in values:
            if name not in known:
                raise FieldError(
                    str(name), f"unknown hyperparameter {name!r} for {self.name}: expected one of {', '.join(sorted(known))}"
                )
        result = {h.name: h.coerce(values[h.name]) if h.name in values else h.default for h in self.hyperparameters}
        _check_shared_relations(result)
        if self.relations is not None:
            self.relations(result)
        return result


# --- shared hyperparameters (DESIGN §5); defaults are TTRL's, as every paper follows it ---


def int_param(name, default, help, min=None, max=None):
    return Param(name, "int", default, help, min=min, max=max)


def float_param(name, default, help, min=None, max=None, nullable=False, min_exclusive=False):
    return Param(name, "float", default, help, min=min, max=max, nullable=nullable, min_exclusive=min_exclusive)


def bool_param(name, default, help):
    return Param(name, "bool", default, help)


_SHARED = {
    h.name: h
    for h in (
        # at least 2: GRPO's advantage compares a rollout with the others of its group
        int_param("n_votes", 64, "Rollouts sampled per prompt; the pseudo-label is voted over all of them.", 2, 1024),
        int_param("n_train", 32, "Rollouts per prompt used in the policy update (the first n_train of the n_votes).", 1, 1024),
        int_param("prompts_per_step", 8, "Prompts per training step: one rollout batch of prompts_per_step × n_votes "
                  "rollouts, scored together (the train batch size).", 1, 4096),
        int_param("prompts_per_update", 1, "Prompts per optimizer update (the PPO mini-batch): each step is trained on in "
                  "prompts_per_step / prompts_per_update updates, all against the rollout batch's old log-probabilities, "
                  "so PPO clipping binds (EVOL-RL/TTRL scripts: 8 prompts per step, 1 per update).", 1, 4096),
        int_param("ppo_epochs", 1, "Passes over each rollout batch (each of prompts_per_step / prompts_per_update updates).",
                  1, 100),
        # above 0: greedy rollouts are all alike, nothing to vote on or to learn from (evaluation may be greedy)
        float_param("temperature", 1.0, "Sampling temperature for training rollouts.", 0.0, 2.0, min_exclusive=True),
        float_param("eval_temperature", 0.6, "Sampling temperature for evaluation (EVOL-RL App. C: 0.6).", 0.0, 2.0),
        float_param("eval_top_p", 0.95, "Nucleus sampling threshold for evaluation (EVOL-RL App. C: 0.95).", 0.01, 1.0),
        float_param("top_p", 1.0, "Nucleus sampling threshold for rollouts.", 0.01, 1.0),
        int_param("max_completion_length", 3072, "Maximum number of generated tokens per rollout.", 1, 131072),
        int_param("max_prompt_length", 4096, "Longest prompt in tokens, with its chat template and system prompt "
                  "(verl's max_prompt_length): a longer one fails the run before the model loads, naming it.", 1, 131072),
        float_param("learning_rate", 5e-7, "Peak learning rate (AdamW).", 0.0, 1e-2),
        Param("lr_schedule", "choice", "cosine", "Learning-rate schedule after the warmup: cosine decay "
                       "from the peak (TTRL §4, followed by EVOL-RL) or constant.", choices=("cosine", "constant")),
        float_param("warmup_ratio", 0.03, "Share of the run's optimizer updates spent warming the learning rate up "
                    "linearly from 0 (TTRL's verl scripts: 0.03).", 0.0, 0.5),
        float_param("weight_decay", 0.0, "AdamW weight decay.", 0.0, 1.0),
        float_param("kl_coef", 0.001, "Weight of the KL penalty to the reference policy (0 disables it).", 0.0, 10.0),
        float_param("epsilon", 0.2, "Lower PPO clipping range: ratios below 1 − epsilon are clipped.", 0.0, 1.0),
        float_param("epsilon_high", 0.2, "Upper PPO clipping range: ratios above 1 + epsilon_high are clipped.", 0.0, 1.0),
        Param("importance_sampling_level", "choice", "token", "Where the PPO ratio π/π_old is taken and "
                       "clipped: per token (GRPO, DAPO) or once per rollout from its mean token log-ratio (GSPO, "
                       "EMPO's released optimiser).", choices=("token", "sequence")),
        Param("loss_type", "choice", "dapo", "How token losses are averaged into an update's loss (TRL's "
                       "names): 'dapo' every trained token of the update weighs the same (verl's token-mean, the "
                       "papers' releases); 'grpo' each rollout's tokens are averaged first, then the rollouts "
                       "(EVOL-RL Eq. (1), GRPO's paper, GSPO); 'dr_grpo' token sums over a constant, "
                       "max_completion_length (Dr. GRPO); 'bnpo' the token mean of each process's share.",
                       choices=("dapo", "grpo", "dr_grpo", "bnpo")),
        float_param("entropy_coef", 0.0, "Weight of the token-entropy bonus in the loss (0 disables it).", 0.0, 1.0),
        int_param("eval_every", 10, "Evaluate on the held-out labels every this many steps (0 never).", 0, 100000),
        int_param("eval_samples", 32, "Samples per evaluation prompt; pass@1, pass@16 and maj@16 are estimated from "
                  "them (EVOL-RL Table 1: pass@16 from 32 samples).", 1, 1024),
        int_param("save_every", 50, "Write a checkpoint every this many steps (0 only at the end).", 0, 100000),
        Param("generation_backend", "choice", "hf", "Rollout generation: Hugging Face generate, or vLLM "
                       "colocated on the training GPU (needs the vllm package and a GPU).", choices=("hf", "vllm")),
        bool_param("vllm_importance_sampling_correction", False, "With vLLM generation, reweight the loss by "
                   "π_train/π_vLLM per token (TRL's truncated importance sampling). Off as in the papers' verl runs; "
                   "no effect with generation_backend 'hf'."),
        Param("embedding_max_length", "int", None, "Tokens per window of the embedder (the similarity "
                       "matrix and EVOL-RL's novelty); null: the embedder's own maximum (all-MiniLM-L6-v2: 256).",
                       min=8, max=32768, nullable=True),
        Param("embedding_pooling", "choice", "windows", "A rollout longer than the embedder's window: "
                       "'windows' embeds all of it, window by window, and averages them (weighted by tokens), so "
                       "responses that differ early differ; 'end' keeps only its last window (EVOL-RL's code "
                       "truncates from the left, with a 16k-token embedder).", choices=("windows", "end")),
    )
}


def shared(exclude: tuple[str, ...] = (), **overrides: object) -> tuple[Param, ...]:
    """The shared hyperparameters, with some defaults replaced and the ``exclude``d ones left out."""
    unknown = (set(overrides) | set(exclude)) - set(_SHARED)
    if unknown:
        raise KeyError(f"not shared hyperparameters: {sorted(unknown)}")
    return tuple(replace(h, default=overrides.get(h.name, h.default)) for h in _SHARED.values()
                 if h.name not in exclude)


def _check_shared_relations(values: dict) -> None:
    if "n_train" in values and "n_votes" in values and values["n_train"] > values["n_votes"]:
        raise FieldError(
            "n_train", f"n_train={values['n_train']} is invalid: expected an integer in [1, n_votes={values['n_votes']}]"
        )
    if "prompts_per_update" in values and values["prompts_per_step"] % values["prompts_per_update"]:
        raise FieldError(
            "prompts_per_update",
            f"prompts_per_update={values['prompts_per_update']} is invalid: expected a divisor of "
            f"prompts_per_step={values['prompts_per_step']} (each step is split into whole updates)",
        )
