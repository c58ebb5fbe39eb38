"""TRL's GRPOConfig for a run: how a method's hyperparameters become the trainer's arguments (DESIGN §4.7).
Made by the training driver (rl/driver.py) for every GRPO phase, R-Zero's included; torch and TRL are imported
when a config is made, so reading this module costs nothing."""
from __future__ import annotations

import os
from pathlib import Path


def world_size() -> int:
    """The processes of this run (accelerate launch sets WORLD_SIZE; 1 alone)."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_config(hp: dict, max_steps: int, seed: int, output_dir: Path):
    """TRL's GRPOConfig for a run of `max_steps` rollout-batch steps with these validated hyperparameters."""
    import torch
    from trl import GRPOConfig

    on_gpu = torch.cuda.is_available()
    # EVOL-RL's ablation switches turn parts of the objective off without changing the code path
    entropy_coef = hp["entropy_coef"] if hp.get("use_entropy_bonus", True) else 0.0
    epsilon_high = hp["epsilon_high"] if hp.get("use_clip_high", True) else hp["epsilon"]
    # vLLM's sampler and the trainer disagree slightly on log-probabilities; TRL reweights by their ratio unless
    # told otherwise; the papers' verl runs do not, so it is off unless asked for
    vllm = ({"use_vllm": True, "vllm_mode": "colocate",
             "vllm_importance_sampling_correction": hp["vllm_importance_sampling_correction"]}
            if hp["generation_backend"] == "vllm" else {})
    # DESIGN section 4.7: a step is one rollout batch, trained on in prompts_per_step / prompts_per_update
    # optimizer updates per epoch for ppo_epochs epochs; TRL counts those updates as its steps
    updates_per_epoch = hp["prompts_per_step"] // hp["prompts_per_update"]
    updates = updates_per_epoch * hp["ppo_epochs"]

    return GRPOConfig(
        output_dir=str(output_dir),
        use_cpu=not on_gpu,
        bf16=on_gpu and torch.cuda.is_bf16_supported(),
        report_to="none",
        disable_tqdm=True,
        logging_steps=updates,  # one metrics event per rollout batch, TRL's values averaged over its updates
        max_steps=max_steps * updates,
        seed=seed,
        data_seed=seed,
        # one generation batch (rollout batch) per step, split evenly over the processes (check_processes made
        # sure it splits) and, on each, into updates_per_epoch slices: one optimizer update each (PPO mini-batches)
        # against the old log-probabilities TRL keeps from generation time, so the clipping binds
        per_device_train_batch_size=hp["prompts_per_update"] * hp["n_votes"] // world_size(),
        gradient_accumulation_steps=1,
        steps_per_generation=updates_per_epoch,
        num_iterations=hp["ppo_epochs"],
        num_generations=hp["n_votes"],  # TTRL: the vote is over all n_votes rollouts
        temperature=hp["temperature"],
        top_p=hp["top_p"],
        max_completion_length=hp["max_completion_length"],
        learning_rate=hp["learning_rate"],
        lr_scheduler_type=hp["lr_schedule"],  # TTRL §4: cosine from the peak, after a linear warmup
        warmup_steps=hp["warmup_ratio"],  # transformers 5: a value below 1 is a share of max_steps
        weight_decay=hp["weight_decay"],
        beta=hp["kl_coef"],
        epsilon=hp["epsilon"],
        epsilon_high=epsilon_high,  # EVOL-RL / DAPO asymmetric clipping: ratios above 1 + epsilon_high are clipped
        importance_sampling_level=hp["importance_sampling_level"],  # GSPO: one ratio per rollout, when "sequence"
        loss_type=hp["loss_type"],  # how token losses average into the update's loss; rl.trainer makes "dapo" per update
        entropy_coef=entropy_coef,  # TRL: loss = L_policy − entropy_coef · H (EVOL-RL's entropy regulariser)
        save_strategy="steps",
        save_steps=(hp["save_every"] or max_steps) * updates,  # 0: only the final checkpoint
        disable_dropout=True,
        dataloader_num_workers=0,
        **vllm,
    )
