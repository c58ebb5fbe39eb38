"""The policy loss a run trains with (issue 22, defects 1 and 6), on worked examples through the real trainer.

Two rollouts of the default policy, of 3 and 2 completion tokens, with advantages +1 and -0.5; the old
log-probabilities are the current ones shifted by known amounts, so each ratio is known exactly:

    row 0: log π − log π_old = (0.10, 0.00, −0.05)    row 1: (0.20, 0.10, masked)

The expected losses are written out from the formulas they follow (EMPO's released GSPO, verl's token mean,
EVOL-RL Eq. (1)'s per-sequence mean); the trainer computes them through TRL 1.16's GRPOTrainer._compute_loss.
"""

import math

import pytest
import torch
from datasets import Dataset
from transformers import AutoModelForCausalLM

from rl.methods import validate_hyperparameters
from rl.policy import DEFAULT_POLICY_DIR, load_tokenizer
from rl.grpo_config import grpo_config
from rl.trainer import LabelFreeGRPOTrainer

SHIFTS = [[0.10, 0.00, -0.05], [0.20, 0.10, 0.0]]
MASK = [[1, 1, 1], [1, 1, 0]]
ADVANTAGES = [1.0, -0.5]


def trainer_for(tmp_path, method, **values):
    hp = validate_hyperparameters(method, {"n_votes": 2, "n_train": 2, "prompts_per_step": 2, "prompts_per_update": 1,
                                           "kl_coef": 0.0, "entropy_coef": 0.0, **values})
    tokenizer = load_tokenizer(DEFAULT_POLICY_DIR)
    model = AutoModelForCausalLM.from_pretrained(DEFAULT_POLICY_DIR, local_files_only=True, dtype=torch.float32)
    dataset = Dataset.from_list([{"prompt": "1+1=", "prompt_id": "p"}])
    trainer = LabelFreeGRPOTrainer(model=model, args=grpo_config(hp, max_steps=1, seed=0, output_dir=tmp_path),
                                   train_dataset=dataset, processing_class=tokenizer, method=method,
                                   n_train=hp["n_train"], hyperparameters=hp)
    trainer.model.train()  # the loss of a training update (TRL normalises eval losses differently)
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop (LabelFreeGRPOTrainer requires 1)
    return trainer


def loss_of(trainer):
    """The trainer's loss on the two rollouts, and the per-token log-ratios it saw."""
    tokenizer = trainer.processing_class
    prompt = torch.tensor([tokenizer("1+1=")["input_ids"]] * 2)
    completion = torch.tensor([tokenizer("2 is it")["input_ids"][:3]] * 2)
    mask = torch.tensor(MASK)
    with torch.no_grad():
        logps = trainer._get_per_token_logps_and_entropies(
            trainer.model, torch.cat([prompt, completion], 1), torch.cat([torch.ones_like(prompt), mask], 1), 3)[0]
    inputs = {"prompt_ids": prompt, "prompt_mask": torch.ones_like(prompt), "completion_ids": completion,
              "completion_mask": mask, "advantages": torch.tensor(ADVANTAGES),
              "old_per_token_logps": logps - torch.tensor(SHIFTS),
              # the whole rollout batch's token count, as _generate_and_score_completions leaves it (4 updates' worth)
              "num_items_in_batch": torch.tensor(20)}
    with torch.no_grad():
        return trainer._compute_loss(trainer.model, inputs).item()


def clipped(ratio, advantage, low, high):
    """−min(r·A, clip(r, 1 − low, 1 + high)·A): the PPO surrogate of one token or sequence."""
    return -min(ratio * advantage, min(max(ratio, 1 - low), 1 + high) * advantage)


def token_losses(low, high):
    return [[clipped(math.exp(s), a, low, high) for s, m in zip(shifts, mask) if m]
            for shifts, mask, a in zip(SHIFTS, MASK, ADVANTAGES)]


def test_empo_trains_with_its_releases_gspo_loss(tmp_path):
    hp = validate_hyperparameters("empo", {})
    assert (hp["importance_sampling_level"], hp["epsilon"], hp["epsilon_high"], hp["loss_type"]) == \
        ("sequence", 3e-4, 4e-4, "grpo")
    # verl-empo core_algos.compute_policy_loss_gspo: the sequence ratio exp(mean log-ratio), clipped to
    # [1 − 3e-4, 1 + 4e-4], pg_losses.mean() over sequences
    expected = []
    for shifts, mask, a in zip(SHIFTS, MASK, ADVANTAGES):
        seq = sum(s for s, m in zip(shifts, mask) if m) / sum(mask)
        expected.append(clipped(math.exp(seq), a, 3e-4, 4e-4))
    assert loss_of(trainer_for(tmp_path, "empo")) == pytest.approx(sum(expected) / 2, rel=1e-6)


def test_the_token_level_ratio_of_empos_paper_is_one_switch_away(tmp_path):
    trainer = trainer_for(tmp_path, "empo", importance_sampling_level="token", epsilon=0.2, epsilon_high=0.2)
    per_sequence = [sum(row) / len(row) for row in token_losses(0.2, 0.2)]
    assert loss_of(trainer) == pytest.approx(sum(per_sequence) / 2, rel=1e-6)


def test_loss_type_dapo_is_verls_token_mean_over_the_update(tmp_path):
    assert validate_hyperparameters("rlpr", {})["loss_type"] == "dapo"
    rows = token_losses(0.2, 0.2)
    # verl agg_loss "token-mean": every trained token of the update weighs the same, whatever the rest of the
    # rollout batch holds (TRL alone would divide by the batch's 20 tokens over 2 updates: 10, not 5)
    expected = sum(sum(row) for row in rows) / 5
    trainer = trainer_for(tmp_path, "evol_rl", epsilon_high=0.2, loss_type="dapo")
    assert loss_of(trainer) == pytest.approx(expected, rel=1e-6)


def test_evol_rl_defaults_to_its_eq_1s_per_sequence_mean(tmp_path):
    # EVOL-RL Eq. (1), and near its release's token means over micro-batches of 2 rollouts
    assert validate_hyperparameters("evol_rl", {})["loss_type"] == "grpo"
    rows = token_losses(0.2, 0.2)
    expected = sum(sum(row) / len(row) for row in rows) / 2  # (1/G) Σ_i (1/|o_i|) Σ_t
    assert loss_of(trainer_for(tmp_path, "evol_rl", epsilon_high=0.2)) == pytest.approx(expected, rel=1e-6)


def test_loss_type_dr_grpo_divides_by_the_longest_completion_allowed(tmp_path):
    rows = token_losses(0.2, 0.2)
    expected = sum(sum(row) for row in rows) / (2 * 16)  # Dr. GRPO: a constant, max_completion_length
    trainer = trainer_for(tmp_path, "ttrl", loss_type="dr_grpo", max_completion_length=16)
    assert loss_of(trainer) == pytest.approx(expected, rel=1e-6)


def test_an_unknown_loss_type_is_refused_naming_the_field():
    from rl.params import FieldError
    with pytest.raises(FieldError) as refused:
        validate_hyperparameters("ttrl", {"loss_type": "token-mean"})
    assert refused.value.field == "loss_type" and "'dapo'" in str(refused.value)
