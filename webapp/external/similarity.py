"""Similarity heatmaps of a run trained elsewhere (DESIGN §4.8): the worker step after grouping.

Each grouped prompt's rollouts are embedded (rl.similarity.Embedder: EXTERNAL_EMBEDDING_MODEL, MiniLM unless
set; the text after `</think>` where there is one, as for Evolab's own runs, DESIGN §6) and their G×G cosine
similarity goes to the group through a `similarity` event; once every group of a step has one, the step's
`similarity/mean` goes through a `metrics` event, and the rules (diversity_collapse) read it like any run's.
A worker holds the run's lease (ExternalRun.embedding_lease_until) while it embeds, so two tasks never embed
the same groups, and a dead worker's lease runs out. Embedding is the slow part on a CPU: grouping does not
wait for it."""
import time
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from rl.metrics import similarity_mean
from webapp.alerts import failures
from webapp.runs import ingestion
from webapp.runs.models import Group, Rollout, Run
from webapp.tasks import EMBED_EXTERNAL_GROUPS, send

from .grouping import step_time
from .models import ExternalRun
from .queues import embeddings_queue

LEASE_SECONDS = 120
# Texts embedded in one go: a few steps' worth of groups; the lease is renewed between batches.
BATCH_TEXTS = 512

_embedder = None


def embedder():
    """One embedder per worker process, loaded on first use (a heavy import: torch and the model)."""
    global _embedder
    if _embedder is None:
        from rl.similarity import Embedder

        _embedder = Embedder(model_path=settings.EXTERNAL_EMBEDDING_MODEL or None)
    return _embedder


def embed_groups(run_id: int, budget_seconds: float = 60.0) -> int:
    """Heatmaps for the run's groups that have none, oldest first, for about budget_seconds; the task comes
    back for the rest. Returns how many groups got one."""
    if not _take_lease(run_id):
        return 0
    done, started = 0, time.monotonic()
    try:
        run = Run.objects.get(pk=run_id)
        while time.monotonic() - started < budget_seconds:
            groups = _waiting(run)
            if not groups:
                return done
            done += _embed(run, groups)
            _take_lease(run_id, renew=True)
        send(EMBED_EXTERNAL_GROUPS, [run_id], queue=embeddings_queue())
        return done
    finally:
        ExternalRun.objects.filter(pk=run_id).update(embedding_lease_until=None)


def _take_lease(run_id: int, renew: bool = False) -> bool:
    now = timezone.now()
    free = Q(embedding_lease_until__isnull=True) | Q(embedding_lease_until__lt=now)
    rows = ExternalRun.objects.filter(pk=run_id)
    if not renew:
        rows = rows.filter(free)
    return bool(rows.update(embedding_lease_until=now + timedelta(seconds=LEASE_SECONDS)))


def _waiting(run: Run) -> list[Group]:
    """Groups of at least two rollouts with no matrix yet, whole steps first, up to about BATCH_TEXTS texts."""
    found, texts = [], 0
    for group in Group.objects.filter(run=run, superseded=False, similarity__isnull=True, size__gte=2).order_by("step", "seq"):
        if found and texts + group.size > BATCH_TEXTS:
            break
        found.append(group)
        texts += group.size
    return found


def _embed(run: Run, groups: list[Group]) -> int:
    from rl.similarity import cosine_similarity_matrix, reasoning_part

    failures.at_step(groups[0].step)  # a failure from here is at the batch's first step (workers/watched.py)
    texts: dict[int, list[str]] = {g.pk: [] for g in groups}
    for group_id, text in (Rollout.objects.filter(group_id__in=list(texts)).order_by("group_id", "index")
                           .values_list("group_id", "text")):
        texts[group_id].append(reasoning_part(text))
    flat = [t for g in groups for t in texts[g.pk]]
    vectors = embedder().embed(flat)
    events, start, now = [], 0, time.time()
    for group in groups:
        n = len(texts[group.pk])
        matrix = np.round(cosine_similarity_matrix(vectors[start:start + n]), 3).tolist()
        start += n
        events.append({"time": now, "type": "similarity", "step": group.step, "prompt_id": group.prompt_id,
                       "group": group.seq, "majority_answer": group.majority_answer, "similarity": matrix})
        group.similarity = matrix
    events += _step_means(run, groups, now)
    ingestion.append_events(run, events)
    return len(groups)


def _step_means(run: Run, groups: list[Group], now: float) -> list[dict]:
    """A `metrics` event with similarity/mean for each step all of whose groups now have a matrix: the mean over
    the step's groups of each one's mean off-diagonal similarity (rl.metrics.similarity_mean), as the trainer logs it."""
    events = []
    for step in sorted({g.step for g in groups}):
        rest = Group.objects.filter(run=run, step=step, superseded=False, size__gte=2).exclude(
            pk__in=[g.pk for g in groups if g.step == step])
        if rest.filter(similarity__isnull=True).exists():
            continue  # the step's other groups come in a later batch, which logs its mean
        means = [similarity_mean(g.similarity) for g in groups if g.step == step]
        means += [m for m in rest.values_list("similarity_mean", flat=True)]
        means = [m for m in means if m is not None]
        if means:
            events.append({"time": step_time(run, step, now), "type": "metrics", "step": step,
                           "values": {"similarity/mean": float(np.mean(means))}})
    return events
