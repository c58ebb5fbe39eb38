"""R-Zero (Huang et al. 2025): a challenger writes questions at the solver's edge of ability; the solver trains on them.

It trains in phases (rl/methods/r_zero/training.py), so the run's record has no single group scorer; each GRPO phase runs on
LabelFreeGRPOTrainer with a record of its own: CHALLENGER_PHASE, whose rewards `score_challenger_batch` gives for the
whole batch of the step (rl/methods/r_zero/phases.py's batch scorer, since the repetition penalty clusters every question of
the step: uncertainty of the solver minus a BLEU repetition penalty), and SOLVER_PHASE, whose group scorer
`score_solver_group` rewards agreement with the question's pseudo-label.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Sequence

import numpy as np

from rl.answers import equivalence_vote, extract_boxed
from rl.arithmetic import CHALLENGER_PROMPT as SHORT_CHALLENGER_PROMPT
from rl.groups import Group, GroupScore
from rl.methods.schema import Method, float_param, int_param, shared
from rl.params import FieldError, Param
from rl.prompts import STEP_BY_STEP_SYSTEM_PROMPT
from rl.similarity import bleu_distance_matrix
from rl.voting import ttrl_rewards

_QUESTION = re.compile(r"<question>(.*?)</question>", re.DOTALL)


def extract_question(text: str | None) -> str | None:
    """The last ``<question>…</question>`` block, stripped; None when absent or empty (format check)."""
    if not text:
        return None
    blocks = _QUESTION.findall(text)
    if not blocks:
        return None
    question = blocks[-1].strip()
    return question or None


# R-Zero as its paper states it, or as its released code runs it (Chengsong-Huang/R-Zero; docs/fidelity.md)
VARIANTS = ("paper", "release")


def challenger_question(text: str | None, variant: str = "paper") -> str | None:
    """The question a challenger output poses, None when it fails the format check: a ``<question>`` block
    (paper §2.2); the release also wants the challenger's own ``\\boxed{}`` answer after it
    (examples/reward_function/caller_penalty.py, compute_score: ``if questions and answers``)."""
    question = extract_question(text)
    if variant == "release" and question is not None and not extract_boxed(text or ""):
        return None
    return question


def solver_majority(solver_answers: Sequence[str | None]) -> str | None:
    """ỹ(x), the question's pseudo-label: the majority of the solver's answers, grouped by equivalence ("1/2" and
    "0.5" are one answer), as R-Zero's release votes (question_evaluate/evaluate.py)."""
    return equivalence_vote(solver_answers)[0]


def solver_agreement(solver_answers: Sequence[str | None], variant: str = "paper") -> float:
    """p̂ = share of the answers equivalent to their majority. Paper: of all m, None counting in m, never as the
    majority; release: of the boxed answers only (question_evaluate/evaluate.py: max_count / len(results))."""
    m = len(solver_answers) if variant == "paper" else sum(a is not None for a in solver_answers)
    if m == 0:
        return 0.0
    # R-Zero §2.2: p̂(x; S_φ) = (1/m) Σ_j 1{y_j = ỹ(x)}
    return equivalence_vote(solver_answers)[1] / m


def uncertainty_reward(solver_answers: Sequence[str | None], variant: str = "paper") -> float:
    """r_uncertainty = 1 − 2|p̂ − ½| (paper §2.2), in [0, 1]; the release's min(p̂, 1 − p̂), in [0, ½]
    (caller_penalty.py, compute_score)."""
    p_hat = solver_agreement(solver_answers, variant)
    if variant == "release":
        return min(p_hat, 1.0 - p_hat)
    return 1.0 - 2.0 * abs(p_hat - 0.5)  # R-Zero §2.2 (uncertainty reward)


def bleu_clusters(questions: Sequence[str], threshold: float = 0.5) -> np.ndarray:
    """Cluster label of each question: agglomerative clustering, average linkage, on 1 − BLEU.

    # R-Zero App. B.4: precomputed BLEU distances, average linkage, distance threshold τ_BLEU
    """
    if len(questions) == 0:
        return np.zeros(0, dtype=np.int64)
    if len(questions) == 1:
        return np.zeros(1, dtype=np.int64)
    # imported here, not at the top: every process that lists the methods (the web side included) loads this
    # module, and only R-Zero's challenger phase clusters; scikit-learn is slow to import
    from sklearn.cluster import AgglomerativeClustering

    clustering = AgglomerativeClustering(
        n_clusters=None, metric="precomputed", linkage="average", distance_threshold=threshold
    )
    return clustering.fit_predict(bleu_distance_matrix(questions))


def repetition_penalties(questions: Sequence[str], threshold: float = 0.5, lam: float = 1.0,
                         batch_size: int | None = None) -> list[float]:
    """r_rep(x_i) = λ·|C_k|/B for the cluster C_k holding x_i, the clusters formed over `questions`.

    B is `batch_size`: every question of the step's batch, format failures included (R-Zero App. B.4: "B is
    the total number of questions in the batch"); `questions` alone when not given.
    """
    labels = bleu_clusters(questions, threshold)
    if labels.size == 0:
        return []
    sizes = np.bincount(labels)
    b = labels.size if batch_size is None else batch_size
    if b < labels.size:
        raise ValueError(f"a batch of {b} cannot hold {labels.size} questions")
    return [float(lam * sizes[label] / b) for label in labels]  # R-Zero §2.2: r_rep(x_i) = λ|C_k|/B


def _challenger_terms(questions, solver_answers, threshold, lam, variant="paper") -> list[tuple[float, float | None]]:
    """(r_i, r_rep(x_i)) per output; the penalty is None for a format failure (paper).

    ``questions`` are all B outputs of the step; ``questions[i]`` is None when the output failed the format check
    (it is in B, in no cluster); ``solver_answers[i]`` are the m solver answers to question i (ignored when None).
    """
    if len(questions) != len(solver_answers):
        raise ValueError(f"{len(questions)} questions but {len(solver_answers)} answer lists")
    if variant == "release":
        # caller_penalty.py: every output is clustered, a failed one as "" (alone: BLEU of empty texts is 0), and
        # final_score = (min(score, 1 - score) if question else -1) - penalty, with no floor at 0
        penalties = repetition_penalties([q or "" for q in questions], threshold, lam)
        return [((uncertainty_reward(answers, variant) if q is not None else -1.0) - penalty, penalty)
                for q, answers, penalty in zip(questions, solver_answers, penalties)]
    valid = [i for i, question in enumerate(questions) if question is not None]
    penalties = repetition_penalties([questions[i] for i in valid], threshold, lam, batch_size=len(questions))
    terms: list[tuple[float, float | None]] = [(0.0, None)] * len(questions)  # R-Zero §2.2: format failure → 0
    for i, penalty in zip(valid, penalties):
        # R-Zero §2.2 (composite reward): r_i = max(0, r_uncertainty(x_i; φ) − r_rep(x_i))
        terms[i] = (max(0.0, uncertainty_reward(solver_answers[i]) - penalty), penalty)
    return terms


def score_challenger_batch(groups: Sequence[Group], solver_answers: Sequence[Sequence[Sequence[str | None]]],
                           hp: dict) -> list[GroupScore]:
    """The challenger's GroupScores for one step: every question of every group is one of the batch's B.

    ``groups[k].answers`` are the extracted questions (None: format failure), ``solver_answers[k][j]`` the
    solver's m answers to question j of group k ([] for a format failure). The repetition penalty clusters all
    questions of the step together (a prompt's group is one p0 copy's challenger_rollouts questions; R-Zero
    penalises repeats across the whole batch). Each rollout's `extra` holds p̂, r_uncertainty, r_rep and the
    solver's majority answer; the metrics are the batch's, the same on every group, so that the trainer's mean
    over groups is the batch's value.
    """
    variant = hp.get("variant", "paper")
    questions = challenger_questions(groups, variant)
    answers = [list(a) for per_group in solver_answers for a in per_group]
    terms = _challenger_terms(questions, answers, hp["bleu_threshold"], hp["repetition_weight"], variant)
    valid = [i for i, q in enumerate(questions) if q is not None]
    extras = [{} if q is None else {"p_hat": solver_agreement(a, variant), "uncertainty": uncertainty_reward(a, variant),
                                    "repetition_penalty": penalty, "solver_majority": solver_majority(a)}
              for q, a, (_, penalty) in zip(questions, answers, terms)]
    metrics = {"rzero/format_rate": len(valid) / len(questions)} if questions else {}
    for name, key in (("rzero/uncertainty_mean", "uncertainty"), ("rzero/repetition_penalty_mean",
                                                                  "repetition_penalty"), ("rzero/p_hat_mean", "p_hat")):
        if valid:
            metrics[name] = sum(extras[i][key] for i in valid) / len(valid)
    scores, start = [], 0
    for group in groups:
        rows = slice(start, start + len(group.answers))
        scores.append(GroupScore(rewards=[reward for reward, _ in terms[rows]], majority_answer=None,
                                 extras=extras[rows], metrics=dict(metrics)))
        start += len(group.answers)
    return scores


def challenger_questions(groups: Sequence[Group], variant: str = "paper") -> list[str | None]:
    """Every question of the step's groups in order, None where the variant's format check fails."""
    if variant == "paper":
        return [q for group in groups for q in group.answers]  # the phase's answer rule is the paper's check
    return [challenger_question(text, variant) for group in groups for text in group.texts]


def score_solver_group(group: Group, hp: dict, probe) -> GroupScore:
    """The solver's reward: r_j = 1 when its answer matches the question's pseudo-label ỹ_i, else 0.

    ỹ_i (``group.reference``) was voted over the solver's m answers in the questions phase and is not
    re-voted from these rollouts.
    """
    if group.reference is None:  # ttrl_rewards would silently reward nobody
        raise ValueError(f"question {group.prompt_id!r} has no pseudo-label")
    # R-Zero §2.4: r_j = 1 if x_j matches the pseudo-label ỹ_i, 0 otherwise
    return GroupScore(rewards=ttrl_rewards(group.answers, group.reference), majority_answer=group.reference)


def keep_for_solver(solver_answers: Sequence[str | None], low: int = 3, high: int = 7, variant: str = "paper",
                    m: int | None = None) -> bool:
    """Whether the question goes to the solver. Paper: low ≤ #answers matching the majority ≤ high. Release:
    low/m ≤ p̂ ≤ high/m with p̂ over the boxed answers (question_evaluate/upload.py: min_score 0.3 ≤ score ≤
    max_score 0.7, majority answer not empty), m the answers asked for.
    """
    majority, agreeing = equivalence_vote(solver_answers)
    if majority is None:
        return False
    if variant == "release":
        m = m or len(solver_answers)
        return low / m <= solver_agreement(solver_answers, variant) <= high / m
    # R-Zero §2.3 / §3: keep when 3..7 of the m = 10 answers agree (|p̂ − ½| ≤ δ = 0.25)
    return low <= agreeing <= high


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
    policy learned, else the paper's system and user messages (rl.methods.r_zero.phases.challenger_prompt formats it)."""
    if model == "default":
        return SHORT_CHALLENGER_PROMPT
    return f"{PAPER_CHALLENGER_SYSTEM}\n\n{PAPER_CHALLENGER_USER}"


def _own_prompt(prompt_id: str, model: str) -> tuple[str, str] | None:
    """The challenger's rollouts answer its prompt p0 (prompt ids `challenger-*`)."""
    return ("challenger prompt", challenger_instruction(model)) if prompt_id.startswith("challenger-") else None


def _steps(hp: dict, max_steps: int) -> int:
    """R-Zero ignores max_steps: each iteration trains the challenger, then the solver, on one step counter."""
    return hp["iterations"] * (hp["challenger_steps"] + hp["solver_steps"])


def _relations(values: dict) -> None:
    if values["keep_low"] > values["keep_high"]:
        raise FieldError(
            "keep_low", f"keep_low={values['keep_low']} is invalid: expected an integer in [0, keep_high={values['keep_high']}]")
    if values["keep_high"] > values["solver_samples"]:
        raise FieldError(
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
        Param("variant", "choice", "paper", "R-Zero as its paper states it, or as its released code runs it: "
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
    # its steps are iterations × (challenger_steps + solver_steps) = 2 × (2 + 4) = 12 here, whatever max_steps says;
    # the 3..7 of 10 solver filter becomes 1..3 of 4
    small_cpu={"iterations": 2, "questions_per_iteration": 16, "challenger_rollouts": 4, "challenger_steps": 2,
               "solver_steps": 4, "solver_samples": 4, "keep_low": 1, "keep_high": 3},
    own_prompt=_own_prompt,
)

# The challenger's GRPO phase: a rollout's answer is the question it wrote (None: the format check failed);
# its rewards come from a batch scorer (rl.methods.r_zero.phases.ChallengerScorer), which holds the solver.
CHALLENGER_PHASE = replace(METHOD, answer_rule=extract_question, answer_opener="<question>", system_prompt=None)

# The solver's GRPO phase: each question's `reference` is its pseudo-label, voted in the questions phase.
SOLVER_PHASE = replace(METHOD, scorer=score_solver_group)
