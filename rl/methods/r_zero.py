"""R-Zero (Huang et al. 2025): a challenger writes questions at the solver's edge of ability; the solver trains on them.

It trains in phases (rl/rzero.py), so the run's record has no single group scorer; each GRPO phase runs on
LabelFreeGRPOTrainer with a record of its own: CHALLENGER_PHASE (a batch scorer, rl/rzero_phases.py, since
the repetition penalty clusters every question of the step) and SOLVER_PHASE (a group scorer: agreement with
the question's pseudo-label).
"""

from __future__ import annotations

from dataclasses import replace

from rl.arithmetic import CHALLENGER_PROMPT as SHORT_CHALLENGER_PROMPT
from rl.methods.schema import Hyperparameter, HyperparameterError, Method, float_param, int_param, shared
from rl.prompts import STEP_BY_STEP_SYSTEM_PROMPT
from rl.rewards.rzero import VARIANTS, extract_question, score_solver_group


# R-Zero App. B.2, the challenger prompt (system and user message), for models that can follow it
PAPER_CHALLENGER_SYSTEM = (
    "You are an expert competition-math problem setter. FIRST, in your private scratch-pad, think step-by-step "
    "to design a brand-new, non-trivial problem. The problem could come from any field of mathematics, including "
    "but not limited to algebra, geometry, number theory, combinatorics, prealgebra, probability, statistics, and "
    "calculus. Aim for a difficulty such that fewer than 30% of advanced high-school students could solve it. "
    "Avoid re-using textbook clichés or famous contest problems. THEN, without revealing any of your private "
    "thoughts, output exactly the following two blocks: <question> {The full problem statement on one or more "
    "lines} </question> \\boxed{final_answer} Do NOT output anything else—no explanations, no extra markup.")
PAPER_CHALLENGER_USER = ("Generate one new, challenging reasoning question now. Remember to format the output "
                         "exactly as instructed.")


def challenger_instruction(model: str) -> str:
    """The challenger's prompt p0 as a reader sees it (before the chat template): the short task the default
    policy learned, else the paper's system and user messages (rl.rzero_phases.challenger_prompt formats it)."""
    if model == "default":
        return SHORT_CHALLENGER_PROMPT
    return f"{PAPER_CHALLENGER_SYSTEM}\n\n{PAPER_CHALLENGER_USER}"


def _steps(hp: dict, max_steps: int) -> int:
    """R-Zero ignores max_steps: each iteration trains the challenger, then the solver, on one step counter."""
    return hp["iterations"] * (hp["challenger_steps"] + hp["solver_steps"])


def _relations(values: dict) -> None:
    if values["keep_low"] > values["keep_high"]:
        raise HyperparameterError(
            "keep_low", f"keep_low={values['keep_low']} is invalid: expected an integer in [0, keep_high={values['keep_high']}]")
    if values["keep_high"] > values["solver_samples"]:
        raise HyperparameterError(
            "keep_high", f"keep_high={values['keep_high']} is invalid: expected an integer in [keep_low, "
                         f"solver_samples={values['solver_samples']}]")


METHOD = Method(
    name="r_zero",
    title="R-Zero",
    paper="R-Zero: Self-Evolving Reasoning LLM from Zero Data",
    label_free=True,
    description="A challenger writes questions at the solver's edge of ability; the solver trains on the kept ones.",
    # R-Zero App. B.1 (both models): lr 1e-6, weight decay 1e-2, KL 1e-2, temperature 1.0, top-p 0.99, 5 solver
    # rollouts (the challenger's 4 are challenger_rollouts). Its "global batch size 128" is EasyR1's
    # worker.actor.global_batch_size, the prompts of one PPO update (fsdp_workers.py multiplies it by rollout.n;
    # dp_actor.update_policy splits the rollout batch into mini-batches of that size): prompts_per_update. The
    # rollout batch is EasyR1's data.rollout_batch_size, 512 prompts in R-Zero's examples/config.yaml (neither
    # phase's script overrides it): prompts_per_step, so a step is 4 updates. (The released challenger script,
    # scripts/questioner_train_penalty.sh, sets global_batch_size=16; we follow App. B.1.2's 128.) ppo_epochs 1
    # and a constant learning rate without warmup are EasyR1's ActorConfig / examples/config.yaml defaults.
    defaults_source="R-Zero App. B.1: lr 1e-6, weight decay 1e-2, KL 1e-2, temperature 1.0, top-p 0.99, 5 solver "
                    "rollouts, global batch 128 (prompts per update); EasyR1's rollout batch of 512 prompts "
                    "(R-Zero's examples/config.yaml), one epoch, constant lr without warmup; §2.3: 3..7 of 10 "
                    "answers agreeing. variant: release switches to the released code (docs/fidelity.md).",
    hyperparameters=shared(n_votes=5, n_train=5, prompts_per_step=512, prompts_per_update=128, learning_rate=1e-6,
                           weight_decay=0.01, kl_coef=0.01, top_p=0.99, max_completion_length=4096,
                           lr_schedule="constant", warmup_ratio=0.0) + (
        int_param("iterations", 3, "Challenger/solver co-evolution iterations.", 1, 100),
        int_param("questions_per_iteration", 8000, "Candidate questions the challenger writes per iteration (N).",
                  1, 1000000),
        int_param("challenger_rollouts", 4, "Questions sampled per challenger prompt in its GRPO step (a GRPO group: "
                  "at least 2).", 2, 1024),
        int_param("challenger_steps", 5, "Challenger GRPO steps per iteration (0: the untrained-challenger baseline "
                  "of R-Zero Table 3, \"Base Challenger\").", 0, 100000),
        int_param("solver_steps", 15, "Solver GRPO steps per iteration.", 1, 100000),
        int_param("solver_samples", 10, "Solver answers per question (m) for the uncertainty reward and the filter.",
                  1, 1024),
        int_param("keep_low", 3, "Keep a question when at least this many of the m answers match the majority.", 0, 1024),
        int_param("keep_high", 7, "... and at most this many.", 0, 1024),
        float_param("bleu_threshold", 0.5, "Questions closer than this BLEU distance (1 − BLEU) share a cluster "
                    "(τ_BLEU).", 0.0, 1.0),
        float_param("repetition_weight", 1.0, "λ: repetition penalty = λ·|cluster|/B, B the whole batch of questions.",
                    0.0, 100.0),
        Hyperparameter("variant", "choice", "paper", "R-Zero as its paper states it, or as its released code runs it: "
                       "reward min(p̂, 1 − p̂) − penalty with no floor and −1 for a format failure, which also needs "
                       "the challenger's \\boxed{} answer; p̂ over the boxed answers; keep when keep_low/m ≤ p̂ ≤ "
                       "keep_high/m; the solver answers with top_p 1.0 and top_k 40 (docs/fidelity.md).",
                       choices=VARIANTS),
    ),
    # the solver's system message (R-Zero App. B.2), for its training rollouts and its answers to the challenger
    system_prompt=STEP_BY_STEP_SYSTEM_PROMPT,
    relations=_relations,
    trains_in_phases=True,
    reads_prompts=False,
    metric_prefix="rzero",
    charts=("rzero/uncertainty_mean", "rzero/repetition_penalty_mean", "rzero/kept_questions"),
    charts_label_accuracy=False,
    steps=_steps,
)

# The challenger's GRPO phase: a rollout's answer is the question it wrote (None: the format check failed);
# its rewards come from a batch scorer (rl.rzero_phases.ChallengerScorer), which holds the solver.
CHALLENGER_PHASE = replace(METHOD, answer_rule=extract_question, answer_opener="<question>", system_prompt=None)

# The solver's GRPO phase: each question's `reference` is its pseudo-label, voted in the questions phase.
SOLVER_PHASE = replace(METHOD, scorer=score_solver_group)
