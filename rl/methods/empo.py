"""EMPO (Zhang et al. 2025, "Right Question is Already Half the Answer: Fully Unsupervised LLM Reasoning
Incentivization", arXiv 2504.05812): semantic entropy minimisation.

The G responses of a prompt are clustered into meaning classes by their final answers (math: equivalence
of the boxed answers, which `rl.answers.answers_equal` decides with math-verify), p(c_j|q) ≈ |c_j|/G
(Eq. (3)), the semantic entropy is H = −Σ_j p(c_j|q) log p(c_j|q) (Eq. (4)), and each response is rewarded
with the share of its class, r_i = p(c_j|q) for o_i ∈ c_j (Eq. (6)); prompts are trained on only when
δ_low < H < δ_high (Eq. (7)).

What the paper leaves open, settled by the released code (github QingyangZhang/EMPO):

- clustering (verl-empo/verl/utils/reward_score/empo/compute_metrics.py, ``post_semantic_cluster``):
  greedy in response order; a response joins the first class whose *first member* is equivalent to it,
  else opens a new class. An unanswered response (extraction gives "") opens a class of its own every time:
  unanswered responses are never merged, with each other or with anything, so each gets the reward 1/G and
  counts as its own meaning in H. (The older TRL release, trl/src/open_r1/rewards.py
  ``semantic_entropy_math_reward``, gave unanswered responses 0.0 instead: ``no_answer_reward=0.0``.)
- rewards are the class shares themselves (``reward_type == 'entropy'``: ``rewards = frequencies``); the
  group's advantage normalisation is GRPO's.
- the entropy filter: the final release computes it but does not apply it (``entropy_thresholding`` is
  commented out in ``empo_metrics``, and the recipes run with ``algorithm.filter_groups.enable=False``); the
  TRL release keeps a prompt when H < log G (δ_high = log G, no δ_low: only groups whose G answers are all
  different are dropped). `keep_prompt` implements Eq. (7) with either bound optional.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Callable, Sequence

from rl.answers import answers_equal, majority_vote
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, float_param, shared


def _unanswered(answer: str | None) -> bool:
    # EMPO's extractor returns "" for a response without a final answer; rl.answers returns None
    return answer is None or not answer.strip()


def semantic_classes(answers: Sequence[str | None],
                     equal: Callable[[str, str], bool] = answers_equal) -> list[int]:
    """The meaning class of each response, numbered 0, 1, ... in order of first appearance.

    A response joins the first class whose first member it is ``equal`` to; an unanswered response (None or
    blank) always opens a class of its own, as in EMPO's released ``post_semantic_cluster``.
    """
    classes: list[int] = []
    representatives: list[str | None] = []  # the first member of each class; None for an unanswered one
    for answer in answers:
        if _unanswered(answer):
            classes.append(len(representatives))
            representatives.append(None)
            continue
        for index, representative in enumerate(representatives):
            if representative is not None and equal(answer, representative):
                classes.append(index)
                break
        else:
            classes.append(len(representatives))
            representatives.append(answer)
    return classes


def class_probabilities(classes: Sequence[int]) -> list[float]:
    """p(c_j|q) for each class j = 0, 1, ...: its share of the group.

    # EMPO Eq. (3): p(c_j|x) ≈ |c_j| / G
    """
    g = len(classes)
    counts = Counter(classes)
    return [counts[j] / g for j in range(len(counts))] if g else []


def empo_rewards(answers: Sequence[str | None], classes: Sequence[int] | None = None) -> list[float]:
    """Each response's reward: the share of the group in its meaning class.

    # EMPO Eq. (6): r_i = p(c_j|q) where l(o_i) = c_j, with p(c_j|q) ≈ |c_j|/G (Eq. (3))

    ``classes`` may be passed when `semantic_classes` was already run. An unanswered response is a class of
    one (reward 1/G, the released verl code; the TRL release gave it 0.0).
    """
    if classes is None:
        classes = semantic_classes(answers)
    if len(classes) != len(answers):
        raise ValueError(f"{len(classes)} classes for {len(answers)} answers")
    shares = class_probabilities(classes)
    return [shares[c] for c in classes]


def semantic_entropy(answers: Sequence[str | None] | None = None, classes: Sequence[int] | None = None) -> float:
    """H of the group's meaning distribution, in nats; 0.0 for an empty group. Give answers or classes.

    # EMPO Eq. (4): H = −Σ_{c_j} p(c_j|q) log p(c_j|q), p(c_j|q) ≈ |c_j|/G (Eq. (3))
    """
    if classes is None:
        if answers is None:
            raise ValueError("semantic_entropy needs answers or classes")
        classes = semantic_classes(answers)
    g = len(classes)
    if g == 0:
        return 0.0
    counts = Counter(classes).values()
    if len(counts) == 1:
        return 0.0
    # −Σ (n_j/G) log(n_j/G) = log G − (1/G) Σ n_j log n_j: exact at both ends (all equal → 0, all distinct → log G)
    return max(0.0, math.log(g) - math.fsum(n * math.log(n) for n in counts) / g)


def keep_prompt(entropy: float, low: float | None = None, high: float | None = None) -> bool:
    """Whether a prompt with semantic entropy H is trained on: δ_low < H < δ_high, a missing bound not applied.

    # EMPO Eq. (7): J_EMPO = E[(1/|G|) Σ_i min(A_i, clip(1, 1−ε, 1+ε) A_i)]  s.t.  δ_low < H < δ_high

    The TRL release's filter is ``keep_prompt(H, high=math.log(G))``; the final (verl) release applies none.
    """
    if low is not None and not entropy > low:
        return False
    if high is not None and not entropy < high:
        return False
    return True


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
    # no reward_accuracy: the reward is a share of the group, not membership of the vote (issue 38, defect 7)
    metric_prefix="empo",
    charts=("similarity/mean", "empo/semantic_entropy_mean"),
    search_extras=("class_share",),
)
