"""The training setups several methods share, so that no method module imports another: EVOL-RL's comparison setup
(TTRL, self-consistency, entropy minimisation, random reward and RLVR run as its baselines) and RLPR's release
(DARL "closely follows" it), with the release's reward parameters."""

from __future__ import annotations

from rl.methods.schema import bool_param, float_param, int_param
from rl.params import FieldError
from rl.prompts import THINK_ANSWER_SYSTEM_PROMPT, extract_think_answer

# EVOL-RL §4 (App. C, verl/examples/labelfree/*.sh): every method it compares, its TTRL, EM-RL and self-consistency
# baselines included, runs TTRL's 64 votes / 32 trained with 12,288 response tokens (K=12). The baselines take this
# setup so that a comparison with EVOL-RL differs only in what EVOL-RL adds.
# verl's loss there is the token mean of each micro-batch of 2 rollouts (ppo_micro_batch_size_per_gpu=2, no dynamic
# batching), averaged: per rollout, nearly, as EVOL-RL Eq. (1) writes it: loss_type "grpo"
COMPARISON_SETUP = {"max_completion_length": 12288, "loss_type": "grpo"}
COMPARISON_SOURCE = ("EVOL-RL §4, which compares it (verl/examples/labelfree/ttrl_baseline.sh: 64 votes, 32 trained, "
                     "8 prompts a step, 1 per update, 12,288 response tokens, lr 5e-7 cosine after a 3% warmup, "
                     "KL 0.001, token means over micro-batches of 2 rollouts: loss_type 'grpo')")


RELEASE_SCRIPT = "RLPR's examples/RLPR/reproduce_qwen.sh"
# RLPR's release (reproduce_qwen.sh and its verl's ppo_trainer.yaml): prompt batch 768, mini-batch 192 (4 updates a
# step, one epoch), 8 rollouts, clip 0.2 / 0.27, no KL, lr 1e-6 constant without warmup (verl's warmup_style
# constant), 3,072 response tokens, the actor's entropy_coeff 0.001. DARL App. A repeats the batches, rollouts and
# clipping and says its setup "closely follows that of RLPR".
RLPR_TRAINING = dict(n_votes=8, n_train=8, prompts_per_step=768, prompts_per_update=192, kl_coef=0.0,
                     epsilon_high=0.27, learning_rate=1e-6, lr_schedule="constant", warmup_ratio=0.0, temperature=1.0,
                     max_completion_length=3072, entropy_coef=0.001, weight_decay=0.01)

# DARL Table 6 (RLPR's R1-style template): reasoning in <think>, the final answer in <answer> tags, scored against the
# prompt row's `reference`. DARL's Method takes it too, as it takes RLPR's release training.
R1_TEMPLATE = dict(system_prompt=THINK_ANSWER_SYSTEM_PROMPT, answer_rule=extract_think_answer, answer_opener="<answer>",
                   reference_field="reference")


def release_reward_parameters() -> tuple:
    """RLPR's format reward and adaptive standard-deviation filter, as its release runs them (DARL shares them)."""
    return (
        float_param("format_coefficient", 0.1, "Weight c of the release's format reward: reward = (1 − c) · r + "
                    "c · [the response is <think>…</think> … <answer>…</answer>, each tag once] (prob.py, "
                    "format_coefficient 0.1). 0: the paper's reward alone.", 0.0, 1.0),
        float_param("std_filter_beta", 0.5, "RLPR standard deviation filtering: a prompt whose rewards' standard "
                    "deviation is below std_filter_beta × an EMA of the batch's mean reward std is not trained on "
                    "(reproduce_qwen.sh: 0.5). 0 turns the filter off.", 0.0, 10.0),
        float_param("std_filter_ema_ratio", 0.99, "Weight of the past in the EMA of the batch's mean reward std "
                    "(filter_ema_ratio).", 0.0, 1.0),
        int_param("std_filter_ema_start_step", 6, "First step whose mean reward std is collected for the EMA "
                  "(filter_ema_start_step).", 1, 1000000),
        int_param("std_filter_start_step", 11, "First step filtered; the EMA starts as the mean of the steps "
                  "collected before it (filter_start_step).", 1, 1000000),
        float_param("std_filter_threshold", None, "A fixed threshold on the rewards' standard deviation instead of "
                    "the adaptive one, from the first step; null: adaptive.", 0.0, 1.0, nullable=True),
        bool_param("repetition_penalty", True, "The release's repetition penalty (reproduce_qwen.sh: "
                   "reward_model.repetition_penalty=True): −1 added to a non-zero reward when a window of 10 words "
                   "occurs repetition_penalty_limit times or more in the response, before the std filter."),
        int_param("repetition_penalty_limit", 10, "Occurrences of one 10-word window that make a response "
                  "repetitive (repetition_penalty_max_repetitions_limit).", 2, 1000000),
    )


def check_filter_steps(hp: dict) -> None:
    if hp["std_filter_ema_start_step"] >= hp["std_filter_start_step"]:
        raise FieldError("std_filter_start_step", f"std_filter_start_step={hp['std_filter_start_step']} is "
                                  f"invalid: expected a step after std_filter_ema_start_step="
                                  f"{hp['std_filter_ema_start_step']} (the EMA starts from the steps between them)")
