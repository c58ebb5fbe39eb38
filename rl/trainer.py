"""LabelFreeGRPOTrainer: TRL's GRPOTrainer with a label-free group reward.

What it adds to TRL 1.16's GRPOTrainer, in the order a step runs:

1. generation (TRL, timed as `time/generation`);
2. the reward (timed as `time/reward`): every rollout is embedded once (the
   G×G similarity matrix of each group goes to its `group` event, for every
   method), then each prompt's n_votes rollouts are scored together by the
   method's group scorer (Method.scorer, rl/methods/), or all groups at once by a
   batch scorer (`score_batch`, for a reward that needs the whole step: R-Zero's
   challenger clusters every question of the batch). The dataset handed to TRL holds only
   `prompt` and `prompt_id`, because TRL passes every dataset column to reward
   functions: held-out labels live in a separate `LabelMonitor`, and references
   (DARL, RLPR, RLVR only) in `references`;
3. n_train: only the first n_train rollouts of each group are trained on, with
   the GRPO advantage normalised over them (TTRL, DESIGN section 6); the rest of
   the batch is sliced away before the loss. `reward/mean` and `reward/std` are
   over these trained rollouts, `reward/vote_mean` and `reward/vote_std` over all
   n_votes; a group whose score says `skip_training`, or that the method's
   step filter leaves out (Method.step_filter: RLPR's adaptive std filter, whose
   state rides in each checkpoint), is not trained on at all;
4. the loss (TRL, `loss_type` and `importance_sampling_level` from the
   hyperparameters; "dapo" divides by the update's own trained tokens, verl's
   token mean): the rollout batch is trained on in prompts_per_step /
   prompts_per_update optimizer updates per epoch, for ppo_epochs epochs (TRL's
   steps_per_generation and num_iterations), every update against the old
   log-probabilities TRL computes once at generation time, so the PPO ratio moves
   away from 1 and the clipping (epsilon, epsilon_high) binds (DESIGN sections 4.7
   and 6). TRL's global_step counts these updates; a step of the event log is one
   rollout batch, `updates_per_step` of them (rl.callbacks maps one to the other,
   and checkpoints are named by rollout-batch step). The per-token entropies the
   loss computes are kept so each trained rollout's `group` event can show its
   mean token entropy;
5. what happened is left in `pending_groups` and TRL's metric buffer, for the
   callbacks in rl/callbacks.py to write to the event log.

Several processes (`accelerate launch`): TRL lays the generation batch out as
contiguous groups and hands each rank a contiguous slice, so a group can straddle
ranks. The reward therefore gathers every rank's rollouts (accelerate's
gather_object, in rank order, the order TRL gathers rewards in), and every rank
scores the same complete groups; each keeps its own slice of the rewards, the
n_train rows and the advantages, so both match a single-process run of the same
rollouts. Every rank scores (deterministically) rather than rank 0 alone because
the policy probes of COMPASS and DARL run forward passes, which under DeepSpeed
ZeRO-3 are collective. Rank 0 alone writes events (rl.callbacks).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch
from accelerate.utils import gather_object
from trl import GRPOTrainer
from trl.trainer.utils import nanstd

from rl.answers import answers_equal
from rl.metrics import LabelMonitor, majority_ratio, similarity_mean, unique_answers
from rl.groups import Group, GroupScore
from rl.methods import Method, get_method
from rl.policy_probe import PolicyProbe
from rl.similarity import cosine_similarity_matrix, reasoning_part


# ---------------------------------------------------------------- the trainer


@dataclass
class _Batch:
    """What the reward saw for the current generation batch, row by row."""

    prompt_ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    answers: list[str | None] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    scores: list[GroupScore] = field(default_factory=list)
    similarities: list[np.ndarray] = field(default_factory=list)  # G×G cosine similarity of each group


STEP_FILTER_STATE = "evolab_step_filter.json"  # in each checkpoint: the state of Method.step_filter
PROMPT_BASELINES = "evolab_prompt_baselines.json"  # in each checkpoint: Method.prompt_baselines' values per prompt
HELD_OUT_COLUMNS = {"label", "answer", "reference", "ground_truth", "solution", "reward_model"}


def reward_statistics(rewards: Sequence[float], trained: Sequence[bool]) -> dict[str, float]:
    """`reward/mean` and `reward/std` over the trained rollouts, `reward/vote_*` over all of them (DESIGN §6).

    Standard deviations are Bessel-corrected, as TRL's; a statistic of too few rollouts is left out.
    """
    every = np.asarray(rewards, dtype=np.float64)
    kept = every[np.asarray(trained, dtype=bool)] if len(every) else every
    values = {}
    for prefix, sample in (("reward/", kept), ("reward/vote_", every)):
        if sample.size:
            values[prefix + "mean"] = float(sample.mean())
        if sample.size > 1:
            values[prefix + "std"] = float(sample.std(ddof=1))
    return values


# (groups of the step, hyperparameters, probe) -> one GroupScore per group, in order
BatchScorer = Callable[[list[Group], dict, PolicyProbe], list[GroupScore]]


# What TRL appends to its metrics once per update but does not measure the policy's state (a setting it echoes)
_NOT_MEASURED_PER_UPDATE = frozenset({"entropy_coef"})


def leave_out_of_means(metrics: dict[str, list], lengths_before: dict[str, int]) -> None:
    """Turn what an update with no trainable token appended (TRL's masked means of an empty mask: entropy, KL, the
    clip ratios and the policy loss all read 0) into NaN, which TRL's log() leaves out of the step's mean: one
    skipped update of four turned an entropy of 0.61 into 0.4575, and a step whose every update was skipped
    reported entropy 0, which the alert rules read as a collapse. Such a step reports none."""
    for name, values in metrics.items():
        if name not in _NOT_MEASURED_PER_UPDATE:
            for i in range(lengths_before.get(name, 0), len(values)):
                values[i] = float("nan")


def each_group(scorer: Callable[[Group, dict, PolicyProbe], GroupScore]) -> BatchScorer:
    """The default batch scorer: the method's group scorer on each group alone."""
    def score_batch(groups: list[Group], hp: dict, probe: PolicyProbe) -> list[GroupScore]:
        return [scorer(group, hp, probe) for group in groups]
    return score_batch


def updates_per_step(args) -> int:
    """TRL optimizer steps per rollout batch (one event-log step): steps_per_generation × num_iterations."""
    return int(getattr(args, "steps_per_generation", None) or 1) * int(getattr(args, "num_iterations", None) or 1)


class LabelFreeGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with a group reward (Method.scorer), TTRL's n_train, and per-rollout records.

    `method` is an rl.methods.Method (or its name): its scorer, answer rule and metric names; `hyperparameters`
    are its validated values; `references` maps prompt id to y* for a run whose
    Method.reference_field_for(hyperparameters) names a field, and is empty otherwise; `labels` are held
    out and feed only the LabelMonitor; `embedder` (rl.similarity.Embedder) embeds every rollout once, for
    the similarity matrix of every method and EVOL-RL's novelty. `score_batch` (BatchScorer) scores all
    groups of a step together, for a reward that needs the whole batch; by default each group is scored
    alone by Method.scorer.
    """

    def __init__(self, *args, method: Method | str, n_train: int, hyperparameters: dict | None = None,
                 labels: dict[str, str] | None = None, references: dict[str, str] | None = None,
                 embedder=None, score_batch: BatchScorer | None = None, **kwargs):
        spec = get_method(method) if isinstance(method, str) else method
        if score_batch is None and spec.scorer is None:
            raise ValueError(f"method {spec.name!r} has no group scorer: it trains in phases of its own")
        self.score_batch = score_batch or each_group(spec.scorer)
        self.step_filter = spec.step_filter(hyperparameters or {}) if spec.step_filter else None
        self.baseline_scorer = spec.prompt_baselines(hyperparameters or {}) if spec.prompt_baselines else None
        self.prompt_baselines: dict[str, float] = {}  # prompt id -> its value, scored before step 1
        self.extract_answer = spec.answer_rule
        self.rewards_the_vote = spec.rewards_the_vote
        self.scoring_timer = spec.scoring_timer
        self.n_train = n_train
        self.hyperparameters = dict(hyperparameters or {}, n_train=n_train)
        self.references = dict(references or {})
        self.embedder = embedder
        self.label_monitor = LabelMonitor(labels or {})
        self._prompt_ids: list[list[int]] = []  # token ids of the current batch's prompts, from _generate
        self.pending_groups: list[dict] = []  # group events of the current step, written by a callback
        self._batch = _Batch()
        self._capture_entropy = False
        self._captured_entropies: torch.Tensor | None = None
        self._entropies: dict[int, float] = {}  # this rank's trained rollouts: global batch row -> mean entropy
        self._skipped: list[bool] = []  # per group of the current batch: its score asked not to be trained on
        self._nothing_to_learn = False  # the current update has no trainable row: its optimizer step is skipped
        columns = set(getattr(kwargs.get("train_dataset"), "column_names", None) or ())
        leaking = columns & HELD_OUT_COLUMNS
        if leaking:  # TRL would pass these columns to the reward function as keyword arguments
            raise ValueError(f"the training dataset must not carry held-out columns {sorted(leaking)}; "
                             "pass labels= instead (monitoring only)")
        super().__init__(*args, reward_funcs=[self.label_free_reward], **kwargs)
        if not 1 <= n_train <= self.num_generations:
            raise ValueError(f"n_train={n_train} must be in [1, n_votes={self.num_generations}]")
        if self.args.gradient_accumulation_steps != 1:  # a rollout batch is counted in optimizer updates
            raise ValueError("LabelFreeGRPOTrainer expects gradient_accumulation_steps=1 (use prompts_per_update)")
        self.updates_per_step = updates_per_step(self.args)

    def rollout_step(self, global_step: int | None = None) -> int:
        """The event-log step (rollout batches done) of TRL's global_step (optimizer updates done)."""
        return (self.state.global_step if global_step is None else global_step) // self.updates_per_step

    # -- the reward TRL calls: completions in, one reward per completion out. It reads only what TRL passes
    #    (prompts, completions, token ids, prompt_id); labels stay in self.label_monitor, which it never touches.

    def _everyone(self, values: list) -> list:
        """This rank's rows followed by the other ranks' in rank order: the global generation batch."""
        return list(values) if self.accelerator.num_processes == 1 else gather_object(list(values))

    def _local_rows(self, n_local: int) -> range:
        """Where this rank's rows sit in the global batch (TRL's `process_slice`)."""
        start = self.accelerator.process_index * n_local
        return range(start, start + n_local)

    def label_free_reward(self, prompts, completions, completion_ids, prompt_id, **_unused) -> list[float]:
        n_local = len(completions)
        # the vote needs each group whole: score the global batch, then hand TRL this rank's rewards only
        prompts, completions, prompt_id = self._everyone(prompts), self._everyone(completions), self._everyone(prompt_id)
        completion_ids = self._everyone([list(ids) for ids in completion_ids])
        rewards = self._score_batch(prompts, completions, completion_ids, prompt_id)
        rows = self._local_rows(n_local)
        return rewards[rows.start:rows.stop]

    def _score_batch(self, prompts, completions, completion_ids, prompt_id) -> list[float]:
        g = self.num_generations
        if len(completions) % g:
            raise RuntimeError(f"a batch of {len(completions)} rollouts does not split into groups of {g}")
        batch = _Batch(prompt_ids=list(prompt_id), texts=list(completions),
                       answers=[self.extract_answer(text) for text in completions],
                       lengths=[len(ids) for ids in completion_ids])
        # one embedding call for the whole batch; EVOL-RL embeds the text after </think> (DESIGN section 6)
        started = time.perf_counter()
        embeddings = self.embedder.embed([reasoning_part(text) for text in completions])
        scoring_seconds = time.perf_counter() - started
        probe = PolicyProbe(self.model, self.processing_class, self.temperature)
        groups: list[Group] = []
        for start in range(0, len(completions), g):  # TRL lays out each prompt's n_votes rollouts contiguously
            rows = slice(start, start + g)
            if len(set(batch.prompt_ids[rows])) != 1:
                raise RuntimeError("rollouts of different prompts were mixed in one group")
            groups.append(Group(prompt_id=batch.prompt_ids[start], prompt=prompts[start], texts=batch.texts[rows],
                                answers=batch.answers[rows],
                                prompt_ids=self._prompt_ids[start] if self._prompt_ids else [],
                                completion_ids=[list(ids) for ids in completion_ids[rows]],
                                embeddings=embeddings[rows], reference=self.references.get(batch.prompt_ids[start]),
                                baseline=self.prompt_baselines.get(batch.prompt_ids[start]),
                                draw=(int(self.args.seed), self.rollout_step() + 1, start // g)))
            batch.similarities.append(cosine_similarity_matrix(embeddings[rows]))
        started = time.perf_counter()
        batch.scores = list(self.score_batch(groups, self.hyperparameters, probe))
        scoring_seconds += time.perf_counter() - started
        if len(batch.scores) != len(groups):
            raise RuntimeError(f"the batch scorer returned {len(batch.scores)} scores for {len(groups)} groups")
        for score in batch.scores:
            batch.rewards.extend(float(r) for r in score.rewards)
        method_values = [score.metrics for score in batch.scores]
        self._batch = batch
        self._log_means(method_values)
        if self.scoring_timer and self.model.training:  # e.g. EVOL-RL's embeddings + novelty: the paper's overhead
            self._metrics["train"][self.scoring_timer].append(scoring_seconds)
        return batch.rewards

    def _log_means(self, values: list[dict]) -> None:
        """Each name's mean over the groups that report it, into TRL's buffer (averaged again by TRL's log())."""
        for name in sorted({n for v in values for n in v}):
            present = [v[name] for v in values if name in v]
            self._metrics["train"][name].append(sum(present) / len(present))

    # -- timing of the two phases TRL does not time for us

    def _generate(self, prompts):
        started = time.perf_counter()
        result = super()._generate(prompts)
        # the exact tokens the rollouts continued, for the whole batch (the reward scores every rank's rows)
        self._prompt_ids = self._everyone([list(ids) for ids in result[0]])
        if self.model.training:
            self._metrics["train"]["time/generation"].append(time.perf_counter() - started)
        return result

    def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):
        started = time.perf_counter()
        result = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.model.training:
            self._metrics["train"]["time/reward"].append(time.perf_counter() - started)
        return result

    # -- n_train, advantages and the per-prompt records

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        if not self.model.training:
            return output
        g, n_train = self.num_generations, self.n_train
        size = output["completion_ids"].size(0)
        local = self._local_rows(size)
        # a scorer may ask for a group to be left out of the update (EMPO's entropy band), and so may a filter over
        # whole steps (RLPR's adaptive std filter); the step being generated is the one after those done
        self._skipped = [score.skip_training for score in self._batch.scores]
        if self.step_filter is not None:
            filtered, values = self.step_filter.apply(self.rollout_step() + 1, [s.rewards for s in self._batch.scores])
            self._skipped = [a or b for a, b in zip(self._skipped, filtered)]
            for name, value in values.items():
                self._metrics["train"][name].append(value)
        self._report_rewards()
        rewards = torch.tensor(self._batch.rewards, dtype=torch.float32).view(-1, g)[:, :n_train]
        # GRPO advantage, normalised within each group over the trained rollouts: A = (r - mean) / (std + 1e-4),
        # exactly TRL's scale_rewards="group" formula (Bessel-corrected std); one trained rollout gets 0
        mean = rewards.mean(dim=1, keepdim=True)
        std = nanstd(rewards, dim=1, keepdim=True) if n_train > 1 else torch.zeros_like(mean)
        advantages = torch.nan_to_num((rewards - mean) / (std + 1e-4), nan=0.0)

        # TTRL: vote over all n_votes, train on the first n_train of each group: this rank's share of them
        trained = [i for i in local if self._is_trained(i)]
        padding = self._padding_rows(local, len(trained))
        device = output["completion_ids"].device
        keep = torch.tensor([i - local.start for i in trained + padding], dtype=torch.long, device=device)
        sliced = {}
        for key, value in output.items():
            is_row_tensor = isinstance(value, torch.Tensor) and value.dim() > 0 and value.size(0) == size
            sliced[key] = value[keep] if is_row_tensor else value
        row_advantage = {k * g + j: a for k, group in enumerate(advantages.tolist()) for j, a in enumerate(group)}
        sliced["advantages"] = torch.tensor([row_advantage[i] for i in trained] + [0.0] * len(padding),
                                            dtype=torch.float32, device=output["advantages"].device)
        if padding:  # rows that only even out the ranks' batches: no token of theirs reaches the loss
            sliced["completion_mask"][len(trained):] = 0
        # global rows survive TRL's shuffle, so loss-time entropies map back to rollouts; -1 marks padding
        sliced["rollout_index"] = torch.tensor(trained + [-1] * len(padding), dtype=torch.long, device=device)

        self._entropies = {}
        self._record_groups(advantages.tolist())
        return sliced

    def _is_trained(self, row: int) -> bool:
        """Whether a row of the global batch is trained on: among its group's first n_train, group not skipped."""
        g = self.num_generations
        return row % g < self.n_train and not (self._skipped and self._skipped[row // g])

    def _padding_rows(self, local: range, n_trained: int) -> list[int]:
        """Untrained rows this rank adds so that every rank's batch has as many rows as the largest.

        When a group straddles ranks, its first n_train rows may all land on one rank; ranks must still run
        the same number of forward/backward passes (DDP and DeepSpeed synchronise gradients), so a rank with
        fewer trained rows pads with its untrained ones, masked out of the loss. The row count is also rounded
        up to a multiple of the updates per epoch (TRL splits the rollout batch into that many equal slices)
        and is never zero. With whole groups per rank (the usual layout) every rank trains as many rows and,
        when n_train × prompts_per_update rows make one update, nothing is padded.
        """
        n_local, slices = len(local), max(1, int(self.args.steps_per_generation or 1))
        most = max(sum(1 for i in range(r * n_local, (r + 1) * n_local) if self._is_trained(i))
                   for r in range(self.accelerator.num_processes))
        most = max(slices, -(-most // slices) * slices)
        untrained = [i for i in local if not self._is_trained(i)]
        fill = untrained or list(local)  # repeat rows when there are too few: masked out, they only even out
        return [fill[k % len(fill)] for k in range(most - n_trained)]

    def _report_rewards(self) -> None:
        """reward/mean and reward/std over the trained rollouts (replacing TRL's over all), reward/vote_* over all."""
        rewards = self._batch.rewards
        values = reward_statistics(rewards, [self._is_trained(i) for i in range(len(rewards))])
        metrics = self._metrics["train"]
        for trl_name, name in (("reward", "reward/mean"), ("reward_std", "reward/std")):
            if metrics.get(trl_name):
                metrics[trl_name].pop()  # TRL's value, over every rollout of the batch
            if name in values:
                metrics[trl_name].append(values[name])
        for name in ("reward/vote_mean", "reward/vote_std"):
            if name in values:
                metrics[name].append(values[name])

    def _record_groups(self, advantages: list[list[float]]) -> None:
        batch, g = self._batch, self.num_generations
        group_values: list[dict] = []
        label_values: list[dict] = []
        self.pending_groups = []
        for k, score in enumerate(batch.scores):
            rows = range(k * g, (k + 1) * g)
            answers = [batch.answers[i] for i in rows]
            majority = score.majority_answer
            rollouts = []
            for j, i in enumerate(rows):
                trained = self._is_trained(i)
                rollouts.append({
                    "index": j, "text": batch.texts[i], "answer": answers[j], "valid": answers[j] is not None,
                    "in_majority": majority is not None and answers_equal(answers[j], majority),
                    "reward": float(score.rewards[j]), "advantage": float(advantages[k][j]) if trained else None,
                    "length": batch.lengths[i], "used_for_training": trained, "entropy": None,
                    "extra": score.extras[j] if score.extras else {},
                })
            similarity = batch.similarities[k]
            self.pending_groups.append({"prompt_id": batch.prompt_ids[k * g], "majority_answer": majority,
                                        "similarity": np.round(similarity, 3).tolist(), "rollouts": rollouts,
                                        "_first_row": k * g})
            group_values.append({"majority_ratio": majority_ratio(answers, majority),
                                 "unique_answers": unique_answers(answers),
                                 "similarity/mean": similarity_mean(similarity)})
            trained = [r["used_for_training"] for r in rollouts] if self.rewards_the_vote else None
            labelled = self.label_monitor.group_metrics(batch.prompt_ids[k * g], answers, majority, trained)
            if labelled is not None:
                label_values.append(labelled)
        for values in (group_values, label_values):  # means over prompts, averaged again by TRL's log()
            self._log_means([{n: x for n, x in v.items() if x is not None} for v in values])

    # -- per-rollout entropy, taken from the loss computation instead of a second forward pass

    def _get_per_token_logps_and_entropies(self, *args, **kwargs):
        logps, entropies, aux = super()._get_per_token_logps_and_entropies(*args, **kwargs)
        if self._capture_entropy and entropies is not None:
            self._captured_entropies = entropies.detach()
        return logps, entropies, aux

    # -- an update with nothing to learn does not step

    def create_optimizer(self, model=None):
        """The optimizer, whose step is skipped in an update with no trainable row (every group filtered out, or
        only the padding that evens out the ranks): AdamW would still move the weights through its momentum and
        weight decay. The learning-rate schedule then does not advance either: Trainer and accelerate step it only
        when the (accelerate-wrapped) optimizer says its step was not skipped. (DeepSpeed steps inside its engine:
        there such an update still steps.)"""
        optimizer = super().create_optimizer(model)
        if not getattr(optimizer, "_steps_only_with_something_to_learn", False):
            optimizer.step = self._step_unless_nothing_to_learn(optimizer.step)
            optimizer._steps_only_with_something_to_learn = True
        return optimizer

    def _step_unless_nothing_to_learn(self, step):
        def step_unless_nothing_to_learn(*args, **kwargs):
            skip = self._nothing_to_learn
            if self.optimizer is not None and hasattr(self.optimizer, "_is_overflow"):
                self.optimizer._is_overflow = skip  # accelerate's "step was skipped": the schedule stays
            # one value per update, averaged over the step's updates by TRL's log: scaled to a count of updates
            self._metrics["train"]["updates/skipped"].append(float(self.updates_per_step) if skip else 0.0)
            return None if skip else step(*args, **kwargs)

        return step_unless_nothing_to_learn

    def train(self, resume_from_checkpoint=None, **kwargs):
        def saved(name):
            path = os.path.join(str(resume_from_checkpoint), name) if resume_from_checkpoint else None
            return path if path and os.path.exists(path) else None

        if self.step_filter is not None and saved(STEP_FILTER_STATE):
            with open(saved(STEP_FILTER_STATE)) as f:
                self.step_filter.load_state_dict(json.load(f))
        if self.baseline_scorer is not None:
            if saved(PROMPT_BASELINES):  # the values of the run's start; the policy has moved since
                with open(saved(PROMPT_BASELINES)) as f:
                    self.prompt_baselines = json.load(f)
            else:
                self.prompt_baselines = self._score_prompt_baselines()
        return super().train(resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    def _score_prompt_baselines(self) -> dict[str, float]:
        """Method.prompt_baselines over every training prompt, with the policy as it is before step 1, on the ids
        TRL generates from (every rank alike: under ZeRO-3 the forward passes are collective)."""
        prompts: dict[str, object] = {}
        for row in self.train_dataset:
            prompts.setdefault(row["prompt_id"], row["prompt"])
        ids = list(prompts)
        prompt_ids = self._tokenize_prompts([prompts[i] for i in ids])[0]
        training = self.model.training
        self.model.eval()  # as the release's compute_log_prob
        try:
            probe = PolicyProbe(self.model, self.processing_class, self.temperature)
            values = self.baseline_scorer(probe, [list(p) for p in prompt_ids], [self.references.get(i) for i in ids])
        finally:
            self.model.train(training)
        return dict(zip(ids, values))

    def _compute_loss(self, model, inputs):
        trainable = inputs["completion_mask"].sum()
        if self.accelerator.num_processes > 1:  # every rank skips together, or none does
            trainable = self.accelerator.reduce(trainable, reduction="sum")
        self._nothing_to_learn = bool(trainable.item() == 0)
        # loss_type "dapo" as verl's token-mean: the update's loss is the mean over its own trained tokens, on every
        # rank together. TRL divides by the rollout batch's tokens × gradient_accumulation / steps_per_generation
        # (then / num_processes), which weighs an update by how long its rollouts happen to be
        inputs = dict(inputs, num_items_in_batch=trainable * int(self.args.steps_per_generation or 1)
                      if self.model.training else trainable)
        self._capture_entropy, self._captured_entropies = True, None
        metrics = self._metrics["train" if self.model.training else "eval"]
        lengths_before = {name: len(values) for name, values in metrics.items()}
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._capture_entropy = False
        if self._nothing_to_learn:
            leave_out_of_means(metrics, lengths_before)
        if self._captured_entropies is not None and "rollout_index" in inputs:
            mask = inputs["completion_mask"].float()
            per_rollout = (self._captured_entropies * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)
            self._store_entropies(inputs["rollout_index"].tolist(), per_rollout.tolist())
        return loss

    def _store_entropies(self, rows: list[int], values: list[float]) -> None:
        for row, value in zip(rows, values):  # the first epoch's value: the closest to the sampling policy
            if row >= 0:
                self._entropies.setdefault(row, float(value))

    # -- checkpoints are named by rollout-batch step, the step of the event log

    def _save_checkpoint(self, model, trial):
        super()._save_checkpoint(model, trial)
        run_dir = self._get_output_dir(trial=trial)
        written = os.path.join(run_dir, f"checkpoint-{self.state.global_step}")
        if self.step_filter is not None and self.args.should_save and os.path.isdir(written):
            with open(os.path.join(written, STEP_FILTER_STATE), "w") as f:  # the filter's past steps, for resume
                json.dump(self.step_filter.state_dict(), f)
        if self.prompt_baselines and self.args.should_save and os.path.isdir(written):
            with open(os.path.join(written, PROMPT_BASELINES), "w") as f:
                json.dump(self.prompt_baselines, f)
        if self.updates_per_step == 1:
            return
        named = os.path.join(run_dir, f"checkpoint-{self.rollout_step()}")
        self.accelerator.wait_for_everyone()  # every rank's shards are written
        if self.args.should_save and os.path.isdir(written):
            if os.path.exists(named):  # a superseded checkpoint of the same step (never a later one)
                shutil.rmtree(named)
            os.replace(written, named)
        self.accelerator.wait_for_everyone()

    def pop_groups(self) -> list[dict]:
        """The current step's group records, once; the event callback writes them.

        Collective with several processes (each rank computed the entropies of its own rows), so every rank
        calls it; all return the same records and rank 0 writes them.
        """
        g = self.num_generations
        entropies = {}
        for part in self._everyone([self._entropies]):
            entropies.update(part)
        self._entropies = {}
        groups, self.pending_groups = self.pending_groups, []
        by_first_row = {group.pop("_first_row"): group for group in groups}
        for row, value in entropies.items():
            group = by_first_row.get(row - row % g)
            if group is not None:
                group["rollouts"][row % g]["entropy"] = value
        return groups
