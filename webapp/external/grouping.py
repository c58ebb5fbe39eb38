"""The worker step that turns a run trained elsewhere's reported rollouts into groups (DESIGN §4.8).

A step's rollouts are grouped once the step is complete: rollouts of a later step have arrived (trainers
report steps in order), the reporter said so (`complete_through`), none arrived for
EXTERNAL_GROUP_QUIET_SECONDS, or the run has ended. Each prompt's
rollouts become one `group` event, answers read with the run's answer rule (rl/answer_rules.py), the
majority voted as every method votes it (rl.answers); the step gets a `metrics` event with its majority
ratio, distinct answers and, where the rollouts carry held-out labels, the label accuracy (monitoring only,
rl.metrics.LabelMonitor). Both go through ingestion (webapp/runs/ingestion.py) like any run's events, in
the transaction that deletes the waiting rows: a step is grouped exactly once, and a task delivered twice,
or two at once, finds nothing left to do. Rollouts arriving for a step grouped already (a client that
resent after a gap) join their groups, which are logged again, the earlier ones kept and marked superseded.
The similarity heatmaps follow on their own (similarity.py): embeddings are the slow part."""
import time
from collections import namedtuple
from datetime import timedelta

import numpy as np
from django.conf import settings
from django.db import transaction
from django.db.models import Exists, Max, OuterRef
from django.utils import timezone

from rl.answer_rules import answer_rule
from rl.answers import answers_equal, majority_vote
from rl.metrics import LabelMonitor, unique_answers
from webapp.alerts import failures
from webapp.prompts.models import Prompt, PromptSet
from webapp.runs import ingestion
from webapp.metrics import series
from webapp.runs.models import Group, Rollout, Run
from webapp.tasks import EMBED_EXTERNAL_GROUPS, GROUP_EXTERNAL_ROLLOUTS, INDEX_ROLLOUT_TEXT, send, send_on_commit

from .models import ExternalRun, PendingRollout
from .queues import embeddings_queue, external_queue


def group_ready_steps(run_id: int, now=None) -> dict:
    """Group every complete step of the run, one transaction a step; ask again later for steps still
    filling. Returns {"steps": [grouped steps], "rollouts": n, "waiting": steps left}.

    Grouping tasks of one run take turns on the run's row (which ingestion locks anyway); reports are not held
    up by it (rollouts.receive takes no lock of ours)."""
    grouped, count, waiting = [], 0, []
    while True:
        with transaction.atomic():
            run = Run.objects.select_for_update(no_key=True).filter(pk=run_id).first()
            external = ExternalRun.objects.select_related("run", "run__prompt_set").filter(pk=run_id).first()
            if run is None or external is None:
                break
            waiting = list(PendingRollout.objects.filter(run_id=run_id).values("step").order_by("step")
                           .annotate(last=Max("received_at")).values_list("step", "last"))
            ready = [step for step, last in waiting if _complete(external, step, last, now or timezone.now())]
            if ready:
                failures.at_step(ready[0])  # a failure from here is this step's (workers/watched.py)
                count += _group_step(external, ready[0])
                grouped.append(ready[0])
                continue
            if waiting:  # a step still filling: the task comes back after the quiet time
                send_on_commit(GROUP_EXTERNAL_ROLLOUTS, [run_id], queue=external_queue(),
                               countdown=settings.EXTERNAL_GROUP_QUIET_SECONDS)
                ExternalRun.objects.filter(pk=run_id).update(grouping_requested_at=timezone.now())
                break
            # nothing waits: the next report sends the task again; rollouts a report stores meanwhile keep it
            # asked for, and are grouped by this loop's next turn
            done = ExternalRun.objects.filter(pk=run_id).exclude(
                Exists(PendingRollout.objects.filter(run_id=OuterRef("pk")))).update(grouping_requested_at=None)
            if done:
                break
    if grouped:
        # the heatmaps follow as a task of their own (another queue), and the search's word index once no step
        # waits to be grouped: a backlog is grouped first (the search finds rollouts by their words without the
        # index, only slower)
        send(EMBED_EXTERNAL_GROUPS, [run_id], queue=embeddings_queue())
        if not waiting:
            send(INDEX_ROLLOUT_TEXT, [run_id], queue=external_queue())
    return {"steps": grouped, "rollouts": count, "waiting": len(waiting)}


def _complete(external: ExternalRun, step: int, last_received, now) -> bool:
    if external.max_rollout_step is not None and step < external.max_rollout_step:
        return True
    if external.complete_through is not None and step <= external.complete_through:
        return True
    if external.run.is_terminal:
        return True
    return last_received <= now - timedelta(seconds=settings.EXTERNAL_GROUP_QUIET_SECONDS)


def _group_step(external: ExternalRun, step: int) -> int:
    run = external.run
    rows = [Pending(*values) for values in PendingRollout.objects.filter(run_id=run.pk, step=step)
            .order_by("prompt_id", "index").values_list(*Pending._fields)]
    by_prompt: dict[str, list] = {}
    for row in rows:
        by_prompt.setdefault(row.prompt_id, []).append(_rollout_of(row))
    labels = _gather_prompts(external, rows)
    _join_earlier(run, step, by_prompt)
    rule = answer_rule(external.answer_rule)
    monitor = LabelMonitor(labels)
    events, health = [], []
    now = time.time()
    for prompt_id, rollouts in by_prompt.items():
        rollouts.sort(key=lambda r: r["index"])
        for r in rollouts:
            if r["answer"] is None:
                r["answer"] = rule(r["text"])
            r["valid"] = r["answer"] is not None
        answers = [r["answer"] for r in rollouts]
        majority = majority_vote(answers)  # the vote every method takes: normalised strings, first seen wins ties
        for r in rollouts:
            r["in_majority"] = majority is not None and answers_equal(r["answer"], majority)
        events.append({"time": now, "type": "group", "step": step, "prompt_id": prompt_id, "majority_answer": majority,
                       "similarity": None, "rollouts": rollouts})
        health.append({"majority_ratio": sum(r["in_majority"] for r in rollouts) / len(rollouts),
                       "unique_answers": unique_answers(answers),
                       **(monitor.group_metrics(prompt_id, answers, majority) or {})})
    events.append({"time": step_time(run, step, now), "type": "metrics", "step": step,
                   "values": {name: float(np.mean([h[name] for h in health if name in h]))
                              for name in sorted({n for h in health for n in h})}})
    ingestion.append_events(run, events)
    PendingRollout.objects.filter(run_id=run.pk, step=step, id__in=[r.id for r in rows]).delete()
    return len(rows)


Pending = namedtuple("Pending", "id prompt_id index prompt completion answer reward rewards advantage label length extras")


def _rollout_of(row: Pending) -> dict:
    extra = dict(row.extras or {})
    extra.update(row.rewards or {})  # each reward function's reward, beside the trainer's own extras
    return {"index": row.index, "text": row.completion, "answer": row.answer, "reward": row.reward,
            "advantage": row.advantage,
            # tokens when the trainer says; otherwise characters (a verl dump holds no token counts)
            "length": row.length if row.length is not None else len(row.completion),
            "used_for_training": True, "entropy": None, "extra": extra}


def _join_earlier(run: Run, step: int, by_prompt: dict) -> None:
    """Rollouts of a prompt whose group at this step is stored already join it: the earlier group's rollouts are
    read back into the new one, and the earlier group is marked superseded (kept, left out of pages and counts)."""
    earlier = list(Group.objects.filter(run=run, step=step, prompt_id__in=list(by_prompt), superseded=False))
    for group in earlier:
        new_indexes = {r["index"] for r in by_prompt[group.prompt_id]}
        for r in group.rollouts.all():
            if r.index not in new_indexes:
                by_prompt[group.prompt_id].append({
                    "index": r.index, "text": r.text, "answer": r.answer, "reward": r.reward, "advantage": r.advantage,
                    "length": r.length, "used_for_training": r.used_for_training, "entropy": r.entropy, "extra": r.extra})
    if earlier:
        ids = [g.pk for g in earlier]
        Group.objects.filter(pk__in=ids).update(superseded=True)
        Rollout.objects.filter(group_id__in=ids).update(superseded=True)


def _gather_prompts(external: ExternalRun, rows: list[Pending]) -> dict:
    """The run's prompts are a prompt set of its own, grown as rollouts arrive (its texts and held-out labels are
    what the rollouts page, the prompt history and the label accuracy read, as for any run). Returns
    {prompt_id: label} of the step's prompts."""
    run = external.run
    if run.prompt_set is None:
        run.prompt_set = PromptSet.objects.create(name=f"{run.name} (run #{run.pk})"[:200], team_id=run.team_id,
                                                  owner_id=run.created_by_id, source_filename="", format="reported")
        Run.objects.filter(pk=run.pk).update(prompt_set=run.prompt_set)
    prompt_set = run.prompt_set
    first = {}
    for row in rows:
        first.setdefault(row.prompt_id, row)
    known = dict(Prompt.objects.filter(prompt_set=prompt_set, external_id__in=list(first))
                 .values_list("external_id", "label"))
    new = [Prompt(prompt_set=prompt_set, position=prompt_set.row_count + n + 1, external_id=pid, text=row.prompt,
                  label=row.label) for n, (pid, row) in enumerate((p, r) for p, r in first.items() if p not in known)]
    if new:
        Prompt.objects.bulk_create(new, batch_size=500)
        labelled = prompt_set.has_labels or any(p.label is not None for p in new)
        PromptSet.objects.filter(pk=prompt_set.pk).update(row_count=prompt_set.row_count + len(new), has_labels=labelled)
        prompt_set.row_count += len(new)
        prompt_set.has_labels = labelled
    labels = {pid: label for pid, label in known.items()}
    labels.update({p.external_id: p.label for p in new})
    return labels


def step_time(run: Run, step: int, now: float) -> float:
    """The step's time as its trainer logged it (its metrics' clock), so grouping later moves no point on the
    wall-clock axis; now when the trainer logged nothing at that step."""
    logged = series.value_at(run, "metrics", step, clock=True)  # closed into a chunk or not
    return now if logged is None else logged


def resend_stale(now=None) -> list[int]:
    """Runs whose reported rollouts have waited over a minute (a lost message, a dead worker): their grouping task
    is sent again. Periodic (celery beat); a task sent twice finds nothing to do the second time."""
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=max(60.0, 4 * settings.EXTERNAL_GROUP_QUIET_SECONDS))
    stale = sorted(set(PendingRollout.objects.filter(received_at__lt=cutoff).values_list("run_id", flat=True)))
    stale = failures.not_retrying(stale, failures.GROUPING, now)
    for run_id in stale:
        send(GROUP_EXTERNAL_ROLLOUTS, [run_id], queue=external_queue())
    return stale
