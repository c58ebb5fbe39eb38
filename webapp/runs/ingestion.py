"""Event ingestion: the one place that turns a run's events into database rows and live messages
(DESIGN §2 step 4), whoever reports them: a worker's supervisor tailing its trainer's log
(workers/supervisor.py) or, for a run trained elsewhere, the MLflow protocol and the rollouts
endpoint (webapp/external/, through `append_events`).

Idempotent by construction: the run row remembers the last seq stored (`Run.last_seq`,
updated in the same transaction as the rows), and every event at or below it is skipped
without a query, so re-reading a log from the start, or twice, writes every row exactly once.
Seqs only grow within a log (rl.events), so this is the same as "not stored yet".
"""
import logging
import math
from dataclasses import dataclass, field

from django.db import connection, transaction

from rl import metric_catalogue
from rl.metrics import group_summary, majority_changes, similarity_mean, step_health

from webapp.alerts import engine as alerts
from webapp.live import push_on_commit
from webapp.plain_text import storable
from webapp.prompts.models import Prompt
from webapp import bulk
from webapp.metrics import series
from webapp.runs import lifecycle
from webapp.runs.models import Group, Rollout, Run, RunEvent, RZeroQuestion
from webapp.runs.queries import stage_fields
from webapp.runs.table_statistics import keep_statistics

log = logging.getLogger(__name__)

RUN_TABLE = Run._meta.db_table
MAX_FLOAT = 1.7976931348623157e308


def _number(value):
    """JSON numbers for the database; NaN and infinities (a diverged loss), and integers past a float's
    range (JSON has no limit), become None."""
    if type(value) is float:  # most values: taken first (twice a value of every ingested step)
        return value if value - value == 0.0 else None  # NaN and ±inf give NaN
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return None if math.isnan(value) or math.isinf(value) else value


def _text(value):
    """Model output is arbitrary text: stored as webapp.plain_text.storable keeps it (a NUL or an unpaired
    surrogate, which PostgreSQL's text and JSON columns refuse, becomes U+FFFD)."""
    return storable(value) if isinstance(value, str) else value


def _json_safe(value):
    """JSON columns reject NaN and infinities (they become null, as in metric rows) and,
    on PostgreSQL, NUL characters (see _text); an integer past a float's range becomes null too (JSON has
    no limit, and the search reads extras as floats)."""
    if isinstance(value, (float, int)) and not isinstance(value, bool):
        return _number(value) if isinstance(value, float) or abs(value) > MAX_FLOAT else value
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def _live_messages(events: list[dict], last_step: int | None, started: bool) -> list[dict]:
    """The events' live messages, in order. The trainer's statuses are not among them: the run's state reaches
    its page from its lifecycle alone (lifecycle.announce). A trainer that says `running` again (`started`: it
    said so before) was resumed: a `resume` message places the page's marker at the step logged just before it,
    as queries.resume_points does, which the page cannot tell from what it has read (an API read racing the
    socket may have put it ahead)."""
    messages = []
    for event in events:
        if event["type"] == "status" and event.get("state") == "running":
            if started:
                messages.append({"type": "resume", "step": last_step, "time": event.get("time")})
            started = True
        message = _live_message(event)
        if message is not None:
            messages.append(message)
        if isinstance(event.get("step"), int):
            last_step = event["step"] if last_step is None else max(last_step, event["step"])
    return messages


def _live_message(event: dict) -> dict | None:
    kind = event["type"]
    if kind == "metrics":
        return {"type": "metrics", "step": event["step"], "time": event.get("time"),
                "values": {k: _number(v) for k, v in event["values"].items()}}
    if kind == "eval":
        values = {f"eval/{k}": _number(v) for k, v in event.get("values", {}).items()}
        return {"type": "metrics", "step": event["step"], "time": event.get("time"), "values": values}
    if kind == "group":
        return {
            "type": "group",
            "step": event["step"],
            "prompt_id": str(event["prompt_id"]),
            "majority_answer": event.get("majority_answer"),
            "similarity": event.get("similarity"),
            "rollouts": [
                {k: r.get(k) for k in ("index", "answer", "valid", "in_majority", "reward", "advantage", "length")}
                for r in event.get("rollouts", [])
            ],
        }
    if kind == "similarity":  # a group's heatmap, computed after the group (a run trained elsewhere)
        return {"type": "group", "step": event["step"], "prompt_id": str(event["prompt_id"]),
                "majority_answer": event.get("majority_answer"), "similarity": event.get("similarity"), "rollouts": []}
    if kind == "stage":
        return {"type": "stage", **stage_fields(event)}
    if kind == "questions":  # the page links the set; its rows are read from the database
        return {"type": "questions", "iteration": event["iteration"], "offset": event["offset"],
                "count": len(event.get("questions", [])), "total": event["total"]}
    return None


def ingest_events(run: Run, events: list[dict]) -> int:
    """Store the events not stored yet and push them live. Returns how many were new."""
    return _ingest(run, events, append=False)


def append_events(run: Run, events: list[dict]) -> int:
    """Store events that carry no seq yet, numbered after the run's last one under its row lock: a run trained
    elsewhere reports over HTTP, in requests that may arrive together, and has no log to number them."""
    return _ingest(run, events, append=True)


def _ingest(run: Run, events: list[dict], append: bool) -> int:
    if not events:
        return 0
    with transaction.atomic():
        _commit_without_waiting_for_the_disk()
        # the row lock orders concurrent ingestion of one run (a supervisor and a resumed one, or a run trained
        # elsewhere reporting metrics while a worker groups its rollouts). NO KEY UPDATE: rows that merely point
        # at the run (a report's waiting rollouts) are still inserted meanwhile, their key check not blocked by it
        lock = " FOR NO KEY UPDATE" if connection.features.has_select_for_update else ""  # SQLite locks the file
        ((stored_seq, stored_step, run.series_closed_until),) = bulk.fetch(
            f"SELECT last_seq, last_step, series_closed_until FROM {RUN_TABLE} WHERE id = %s{lock}", [run.pk])
        run.last_seq, run.last_step = max(run.last_seq, stored_seq), stored_step
        memory = getattr(run, "_ingest_memory", None)
        if memory is None or memory.seq != stored_seq:
            memory = _RunMemory(seq=stored_seq, rules=alerts.RuleMemory({}) if stored_seq < 0 else None)
        run._ingest_memory = None  # kept again only when this call commits
        if append:
            events = [{**e, "seq": stored_seq + 1 + i} for i, e in enumerate(events)]
        new, top = [], run.last_seq
        for e in events:  # a seq not above every one before it is stored already (or a corrupt repeat)
            if e["seq"] > top:
                new.append(e)
                top = e["seq"]
        if not new:
            return 0
        seqs = [e["seq"] for e in new]
        bulk.copy_rows(RunEvent._meta.db_table, ["run_id", "seq", "type", "time", "step", "payload"], (
            (run.pk, e["seq"], e["type"], e.get("time", 0.0), e.get("step"), bulk.json_text(_payload(e))) for e in new))
        _store_groups(run, new)
        _store_similarities(run, new)
        _store_rzero_questions(run, new)
        new = _with_derived_health(run, new)
        steps = [e["step"] for e in new if isinstance(e.get("step"), int)]
        updates = {"last_seq": max(max(seqs), run.last_seq)}
        if steps:
            updates["last_step"] = max(steps + ([run.last_step] if run.last_step is not None else []))
        _store_metrics(run, new, (stored_step + 1) if stored_step is not None else None,
                       updates.get("last_step", stored_step), memory.series_ids)
        bulk.fetch(f"UPDATE {RUN_TABLE} SET last_seq = %s, last_step = %s WHERE id = %s",
                   [updates["last_seq"], updates.get("last_step", stored_step), run.pk])
        for name, value in updates.items():
            setattr(run, name, value)
        messages = _live_messages(new, stored_step, _started_before(run, new))
        trained = [e for e in new if e["type"] == "metrics"]
        if memory.rules is not None:
            memory.rules.add(new)
        progress = []
        if trained:
            # Collapse rules run here, on every new step, never in the browser or the trainer (a long batch: on a
            # worker, once this commits; alerts.judge_new_steps)
            memory.rules = alerts.judge_new_steps(run, _steps_to_judge([e["step"] for e in trained], stored_step),
                                                  memory.rules)
            health = {k: _number(v) for k, v in trained[-1]["values"].items() if k in RUN_LIST_HEALTH}
            progress = [lifecycle.progress_message(run, health)]
        # one push per poll: the run's watchers get the events, its team's run list the progress
        push_on_commit(run_id=run.pk, messages=messages, team_id=run.team_id if progress else None,
                       team_messages=progress)
        memory.seq = run.last_seq
        transaction.on_commit(lambda: setattr(run, "_ingest_memory", memory))
    keep_statistics()
    return len(new)


def _started_before(run: Run, new: list[dict]) -> bool:
    """Whether the run's trainer said `running` before these events (asked only when one of them says it)."""
    if not any(e["type"] == "status" and e.get("state") == "running" for e in new):
        return False
    return RunEvent.objects.filter(run=run, type="status", seq__lt=new[0]["seq"], payload__state="running").exists()


def _steps_to_judge(steps: list[int], last_step: int | None) -> list[int]:
    """The steps the rules judge: each new step from the run's last one on. A step logged below it (a resumed
    trainer's replay, or a figure a run trained elsewhere reports late, such as its rollouts' majority after its
    next step's metrics) is judged at the run's last step instead, where the history now holds it: judged at
    its own step, it would resolve or open alerts at a step the run has left."""
    if last_step is None:
        return steps
    current = [s for s in steps if s >= last_step]
    return current if len(current) == len(steps) else sorted(set(current) | {last_step})


@dataclass
class _RunMemory:
    """What ingestion keeps of a run between two calls with the same Run object (a supervisor's
    polls): its series ids and what the alert rules read. Valid only while the database's last_seq
    is the one this memory was left at, so after a rolled-back call, or another reader's
    ingestion of the run, the next call reads them from the database again."""

    seq: int
    series_ids: dict = field(default_factory=dict)
    rules: "alerts.RuleMemory | None" = None


def _commit_without_waiting_for_the_disk() -> None:
    """PostgreSQL: this transaction's commit returns before its WAL reaches the disk.

    Safe for ingestion only: the event log on the worker's disk is the durable record, and a
    crash that loses the last commits leaves last_seq behind them too, so the next read stores
    them again. Everything else (runs, alerts, users) keeps synchronous commits: SET LOCAL ends
    with the transaction.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL synchronous_commit TO OFF")


# Lists of an event that become rows of their own table (Rollout, RZeroQuestion) rather than event payload.
ROWS_STORED_APART = ("rollouts", "questions")
# Events whose every value lives in rows of its own (metrics: MetricPoint; group: Group and Rollout): their
# RunEvent keeps seq, type, time and step only, so each value is stored once.
STORED_AS_ROWS_ONLY = ("metrics", "group", "similarity")


def _payload(event: dict) -> dict:
    """What a RunEvent row keeps of its event: the event itself (status, stage, checkpoint, log, eval, the
    questions' header), or nothing when its values are rows of their own."""
    if event["type"] in STORED_AS_ROWS_ONLY:
        return {}
    return _json_safe({k: v for k, v in event.items() if k not in ROWS_STORED_APART})


# The few health figures the run list shows for each run.
RUN_LIST_HEALTH = metric_catalogue.names(run_list=True)


def _with_derived_health(run: Run, events: list[dict]) -> list[dict]:
    """Each metrics event plus the health signals read from its step's stored groups, for every method alike
    (rl.metrics.step_health, majority_changes): `invalid_ratio`, `truncated_ratio`, `zero_variance_groups`, and
    how the prompts' majority answers moved since each was last seen, `majority_flip_rate` and, where the prompt
    set holds labels, `correct_to_wrong`. A value the trainer logged itself is kept. A few queries per batch.

    A run trained elsewhere: its rollouts' lengths may be characters (a verl dump holds no token counts), so
    no truncated_ratio is derived (its trainer reports one: verl's response_length/clip_ratio, TRL's
    completions/clipped_ratio); and its figures for a step may arrive after its trainer's own for that step
    (the rollouts are grouped later), so a derived value never replaces one stored already."""
    steps = {e["step"] for e in events if e["type"] == "metrics"}
    if not steps:
        return events
    by_step: dict[int, list] = {}
    rows = bulk.fetch(
        f"SELECT g.step, r.group_id, r.valid, r.length, r.reward, r.used_for_training FROM {Rollout._meta.db_table} r "
        f"JOIN {Group._meta.db_table} g ON g.id = r.group_id WHERE g.run_id = %s AND NOT g.superseded "
        f"AND g.step IN ({bulk.placeholders(steps)})",
        [run.pk, *sorted(steps)])
    for step, group_id, valid, length, reward, trained in rows:
        by_step.setdefault(step, []).append((group_id, bool(valid), length, reward, bool(trained)))
    if not by_step:
        return events
    limit = (run.hyperparameters or {}).get("max_completion_length") if not run.is_external else None
    stored = series.stored_values(run, DERIVED_HEALTH, min(by_step), max(by_step)) if run.is_external else {}
    moved = _majority_changes(run, sorted(by_step))
    out = []
    for event in events:
        rows = by_step.get(event.get("step")) if event["type"] == "metrics" else None
        if not rows:
            out.append(event)
            continue
        derived = {**step_health(rows, limit), **moved.get(event["step"], {})}
        derived = {k: v for k, v in derived.items() if (k, event["step"]) not in stored}
        out.append({**event, "values": {**derived, **event["values"]}})
    return out


def _majority_changes(run: Run, steps: list[int]) -> dict[int, dict]:
    """{step: rl.metrics.majority_changes of its groups}, each prompt's previous majority being the one it had
    the last time it was seen (before the batch, or earlier in it)."""
    table = Group._meta.db_table
    groups: dict[int, list[dict]] = {}
    for step, prompt_id, majority in bulk.fetch(
            f"SELECT step, prompt_id, majority_answer FROM {table} WHERE run_id = %s AND NOT superseded "
            f"AND step IN ({bulk.placeholders(steps)}) ORDER BY step, seq", [run.pk, *steps]):
        groups.setdefault(step, []).append({"prompt_id": prompt_id, "majority_answer": majority})
    prompts = sorted({g["prompt_id"] for step_groups in groups.values() for g in step_groups})
    if not prompts:
        return {}
    # each prompt's latest group before the batch: the (run, prompt_id, step) index
    previous = dict(bulk.fetch(
        f"SELECT g.prompt_id, g.majority_answer FROM {table} g JOIN (SELECT prompt_id, max(step) AS step FROM {table} "
        f"WHERE run_id = %s AND NOT superseded AND step < %s AND prompt_id IN ({bulk.placeholders(prompts)}) "
        f"GROUP BY prompt_id) last ON last.prompt_id = g.prompt_id AND last.step = g.step "
        f"WHERE g.run_id = %s AND NOT g.superseded", [run.pk, steps[0], *prompts, run.pk]))
    labels = dict(Prompt.objects.filter(prompt_set_id=run.prompt_set_id, external_id__in=prompts)
                  .exclude(label=None).values_list("external_id", "label")) if run.prompt_set_id else {}
    changes = {}
    for step in steps:
        step_groups = groups.get(step, [])
        changes[step] = majority_changes(step_groups, previous, labels)
        previous.update({g["prompt_id"]: g["majority_answer"] for g in step_groups})
    return changes


DERIVED_HEALTH = metric_catalogue.names(derived=True)


def _store_metrics(run, events, first_new_step, last_step, known_series):
    """Metric values as points of their series, and each metrics/eval event's time as a point of its
    clock series (webapp/metrics/series.py)."""
    latest = {}  # (clock, name, step) -> value; within a batch too, the later event wins
    for e in events:
        kind = e["type"]
        if kind not in ("metrics", "eval") or not isinstance(e.get("step"), int):
            continue
        prefix = "eval/" if kind == "eval" else ""
        latest[(True, kind, e["step"])] = _number(e.get("time"))
        for name, value in e.get("values", {}).items():
            latest[(False, prefix + name, e["step"])] = _number(value)
    series.store_points(run, latest, first_new_step, last_step, known_series)


def _store_groups(run, events):
    group_events = [e for e in events if e["type"] == "group"]
    if not group_events:
        return
    _supersede(run, group_events)
    groups = Group.objects.bulk_create([_group(run, e) for e in group_events])
    search_extras = run.spec.search_extras if run.spec else ()
    bulk.copy_rows(Rollout._meta.db_table, ROLLOUT_COLUMNS, (
        (
            group.pk,
            run.pk,
            group.step,
            r["index"],
            _text(r.get("text", "")),
            _text(r.get("answer")),
            bool(r.get("valid")),
            bool(r.get("in_majority")),
            _number(r.get("reward")),
            _number(r.get("advantage")),
            int(r.get("length") or 0),
            bool(r.get("used_for_training", True)),
            _number(r.get("entropy")),
            bulk.json_text(_extra(r.get("extra"), search_extras)),
        )
        for group, e in zip(groups, group_events)
        for r in e.get("rollouts", [])
    ))


def _extra(extra, search_extras: tuple[str, ...]) -> dict:
    """A rollout's extras as stored: JSON-safe, and holding each of its method's search extras (null where it
    has none). The search orders a run by those through a partial index of the rollouts that have the key
    (webapp/explorer/search_indexes.py), so every rollout of the run must have it, whoever reported it."""
    extra = _json_safe(extra) if isinstance(extra, dict) else {}
    return {**dict.fromkeys(search_extras), **extra} if search_extras else extra


def _store_similarities(run, events) -> None:
    """`similarity` events: the G×G matrix of a group stored before it (the event's `group` is that group's
    seq), computed by a worker after the group for a run trained elsewhere (webapp/external/similarity.py).
    The group's row takes the matrix and its mean; a group replaced since keeps none."""
    for e in events:
        if e["type"] != "similarity":
            continue
        similarity = _json_safe(e.get("similarity"))
        Group.objects.filter(run=run, seq=e["group"]).update(
            similarity=similarity, similarity_mean=similarity_mean(similarity) if similarity else None)


def _supersede(run, group_events) -> None:
    """A resumed trainer runs again the steps after its checkpoint: the groups (and their rollouts) an
    earlier attempt logged for those steps are marked superseded, kept but left out of the pages,
    counts and search. An attempt begins with the trainer's `running` status (stored before the
    groups, in this call or an earlier one): only groups logged before it count as earlier, so a step
    whose groups arrive in two polls stays whole. Groups at or past the batch's first step with a lower
    seq are rare (a resume, or a step split across polls): in a run that did neither this is one index
    probe that finds nothing, and the attempt's start is looked up only when it finds some."""
    steps = [e["step"] for e in group_events if isinstance(e.get("step"), int)]
    if not steps:
        return
    first_seq = min(e["seq"] for e in group_events)
    candidates = Group.objects.filter(run=run, step__gte=min(steps), seq__lt=first_seq, superseded=False)
    if not candidates.exists():
        return
    attempt_start = (RunEvent.objects.filter(run=run, type="status", seq__lt=first_seq, payload__state="running")
                     .order_by("-seq").values_list("seq", flat=True).first())
    if attempt_start is None:
        return
    earlier = list(candidates.filter(seq__lt=attempt_start).values_list("id", flat=True))
    if earlier:
        Group.objects.filter(id__in=earlier).update(superseded=True)
        Rollout.objects.filter(group_id__in=earlier).update(superseded=True)


def _group(run, event) -> Group:
    similarity = _json_safe(event.get("similarity"))
    return Group(run=run, seq=event["seq"], step=event["step"], prompt_id=_text(str(event["prompt_id"])),
                 majority_answer=_text(event.get("majority_answer")), similarity=similarity,
                 **group_summary(event.get("rollouts") or [], similarity))


ROLLOUT_COLUMNS = ["group_id", "run_id", "step", "index", "text", "answer", "valid", "in_majority", "reward", "advantage", "length",
                   "used_for_training", "entropy", "extra"]


def _store_rzero_questions(run, events):
    """R-Zero question sets (`questions` events, in log order). A set starts at offset 0: a set of the same
    iteration written again (a questions phase that ran again after a resume) replaces the earlier rows."""
    for e in events:
        if e["type"] != "questions":
            continue
        if e["offset"] == 0:
            RZeroQuestion.objects.filter(run=run, iteration=e["iteration"]).delete()
        RZeroQuestion.objects.bulk_create(
            [
                RZeroQuestion(
                    run=run,
                    seq=e["seq"],
                    iteration=e["iteration"],
                    index=e["offset"] + i,
                    question_id=_text(str(q["id"])),
                    question=_text(q.get("question")),
                    text=_text(q.get("text") or ""),
                    p_hat=_number(q.get("p_hat")),
                    pseudo_label=_text(q.get("pseudo_label")),
                    answers=_json_safe(q.get("answers") or []),
                    kept=bool(q.get("kept")),
                )
                for i, q in enumerate(e.get("questions", []))
            ],
            batch_size=1000,
        )
