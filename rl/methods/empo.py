"""EMPO (Zhang et al. 2025, arXiv:2504.05812): semantic entropy minimisation, each rollout rewarded with the share
of the group in its meaning class."""

from __future__ import annotations

from rl.answers import majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, float_param, shared
from rl.rewards.empo import class_probabilities, empo_rewards, keep_prompt, semantic_classes, semantic_entropy


def score(group: Group, hp: dict, probe) -> GroupScore:
    classes = semantic_classes(group.answers)  # EMPO §3: meaning classes by math-verify equivalence of the answers
    rewards = empo_rewards(group.answers, classes)  # EMPO Eq. (6): r_i = p(c_j|q) = |c_j|/G
    entropy = semantic_entropy(classes=classes)  # EMPO Eq. (4)
    # EMPO Eq. (7): train only on prompts with δ_low < H < δ_high (both off by default, as the released recipes)
    skip = not keep_prompt(entropy, hp["entropy_low"], hp["entropy_high"])
    shares = class_probabilities(classes)
    extras = [{"semantic_class": c, "class_share": shares[c]} for c in classes]
    metrics = {"empo/semantic_entropy_mean": entropy, "empo/filtered_ratio": float(skip)}
    return GroupScore(rewards=rewards, majority_answer=majority_vote(group.answers), extras=extras, metrics=metrics,
                      skip_training=skip)


METHOD = Method(
    name="empo",
    title="EMPO",
    paper="Zhang et al. 2025, Right Question is Already Half the Answer: Fully Unsupervised LLM Reasoning "
          "Incentivization (EMPO, arXiv:2504.05812)",
    label_free=True,
    description="Reward = the share of the group in the rollout's semantic class (answers clustered by math-verify "
                "equivalence): minimises the semantic entropy of the answers; optionally trains only on prompts "
                "whose entropy lies between two thresholds.",
    defaults_source="EMPO §4.1 and its final release, verl-empo/recipe/empo/scripts/run_empo_qwen2.5_math_*.sh: "
                    "16 responses per prompt, prompt batch 256, mini-batch 32 (8 updates per step, one epoch), "
                    "temperature 1.0, 3,072 response tokens, lr 5e-7 constant without warmup, no KL; GSPO "
                    "(loss_mode gspo: one importance ratio per response, clip_ratio_low 3e-4 / clip_ratio_high 4e-4, "
                    "core_algos.compute_policy_loss_gspo averaging the sequences' losses: loss_type 'grpo'); no "
                    "entropy filter (commented out in the released code). The paper's GRPO (EMPO §3, its TRL "
                    "release) is importance_sampling_level 'token' with epsilon 0.2 (docs/fidelity.md).",
    hyperparameters=shared(n_votes=16, n_train=16, prompts_per_step=256, prompts_per_update=32, temperature=1.0,
                           max_completion_length=3072, learning_rate=5e-7, lr_schedule="constant", warmup_ratio=0.0,
                           kl_coef=0.0, importance_sampling_level="sequence", epsilon=3e-4, epsilon_high=4e-4,
                           loss_type="grpo") + (
        float_param("entropy_low", None, "δ_low of EMPO Eq. (7): prompts whose semantic entropy (nats) is not above "
                    "this are not trained on; null: no lower bound (the released recipes).", 0.0, 100.0, nullable=True),
        float_param("entropy_high", None, "δ_high of EMPO Eq. (7): prompts whose semantic entropy is not below this "
                    "are not trained on (the TRL release used log G); null: no upper bound.", 0.0, 100.0,
                    nullable=True),
    ),
    scorer=score,
    rewards_the_vote=True,  # reward_accuracy (TTRL §4) is charted with labels
    metric_prefix="empo",
    charts=("similarity/mean", "empo/semantic_entropy_mean"),
    search_extras=("class_share",),
)
