"""A run's lifecycle: dispatch, claim, heartbeat, finish, hand back, cancel before start, requeue
for resume, reaping runs whose supervisor is gone, and deletion. Each transition writes the run's state, records
it in the run's history with its cause (RunTransition: who asked, which worker, why) and, on commit,
tells the run's watchers (`status` on ws/runs/{id}/, carrying the history's new row) and its team's
(`run` on ws/teams/{id}/: the live run list).

Action functions (actions.py) validate what a user asks for and call these; the supervisor
(workers/) calls them for what the trainer does, and the periodic `reap_runs` task calls `reap`.

The lease (RunLease, a row of its own): a supervisor claims a run under its own name (`owner`) and heartbeats
it; every later write of the run by that supervisor names the owner too (`_hold`), so a supervisor that lost
its lease (its run re-queued and perhaps claimed by another) changes nothing. A running run silent for
RUN_LEASE_SECONDS has lost its supervisor (a worker killed, its host gone): `reap` re-queues it
with resume, at most RUN_AUTO_RESUMES times, then fails it; a cancel request on it ends it
`cancelled`. Its orphaned trainer, if still alive, stops itself when its supervisor's process is
gone (rl/driver.py::stop_when_supervisor_is_gone) and is killed by the next supervisor of the run before it
starts another (workers/engines/local.py, the run's lock)."""
import logging
import time
from collections import Counter
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q, Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from webapp.alerts import engine as alerts
from webapp.live import push_on_commit
from webapp.tasks import TRAIN_RUN, send_on_commit

from .models import EngineJob, Run, RunLease, RunTransition
from .queries import run_last_event_time

log = logging.getLogger(__name__)


def run_message(run: Run) -> dict:
    """The run list's live row update."""
    return {
        "type": "run",
        "id": run.pk,
        "name": run.name,
        "state": run.state,
        "message": run.message,
        "last_step": run.last_step,
        "total_steps": run.total_steps,
        **run.clock_json(),
        "engine_reason": run.job.reason if run.job else "",
        # an open run list drops (or, showing archived runs, takes) a row whose run was archived or brought back
        "archived": run.archived_at is not None,
    }


def announce(run_id: int, cause: str | None = None, by=None, worker: str = "") -> None:
    """The run's new state, recorded in its history as caused by `cause` (None: nothing the history keeps,
    a renamed run or a new reason from its engine), and after commit told to its page and its team (the one
    place both are told)."""
    run = Run.objects.select_related("engine_job").get(pk=run_id)
    # recorded first: the row's training time counts the change it records
    transition = RunTransition.record(run, cause, by, worker).to_json() if cause is not None else None
    row = run_message(run)
    # The run page's one word on the run's state: the row as the API gives it (times, message, step), the
    # engine's job and the history row, so the page never reads the run back to learn how it ended.
    status = {**row, "type": "status"}
    if transition is not None:
        status["transition"] = transition
    if run.job is not None and run.job.engine != "local":
        status["engine"] = run.engine_json()
    push_on_commit(run_id=run.pk, messages=[status])
    push_on_commit(team_id=run.team_id, messages=[row])


def progress_message(run: Run, health: dict) -> dict:
    """A new step for the run list (last step and a few health figures); ingestion pushes it
    together with the step's own messages."""
    return {**run_message(run), "health": health}


def queued(run: Run, by) -> None:
    """A run just launched by `by` (or cloned): its history begins, and its team's run list shows it."""
    RunTransition.record(run, RunTransition.LAUNCHED, by)
    push_on_commit(team_id=run.team_id, messages=[run_message(run)])


def deleted(run_id: int, team_id: int) -> None:
    """A run deleted with its rows: once that commits, its team's open run lists and alerts pages drop its rows
    (they kept showing it until reloaded). Its own page has no socket to tell: only an ended run is deleted."""
    push_on_commit(team_id=team_id, messages=[{"type": "deleted", "id": run_id}])


def dispatch(run: Run) -> None:
    """Send the run's train task once this transaction commits, and note when (a queued run whose
    message was lost is sent again by `reap`)."""
    Run.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())
    send_on_commit(TRAIN_RUN, [run.pk], queue=run.queue)


def claim(run_id: int, owner: str = "", state: str = Run.RUNNING) -> Run | None:
    """Move a queued run to `state` (running; pending for a worker that hands runs to a cluster engine,
    until the engine starts the job) under `owner`'s lease, and return it. Only one supervisor can win a run,
    so a task delivered twice (a broker redelivery, a re-sent message, a double click) never starts two
    trainers. A cancelled run that has an engine's job is claimed too: its supervisor stops the job.

    Teams take turns: the task names a run, but the worker takes the queued run of the same queue that comes
    first in `turn_order`, the named one when no other team is waiting with fewer runs in training. Each queued
    run has a task on its way, so every run is still taken once; one team's fifty queued runs no longer keep
    another team's one waiting behind them all."""
    if end_cancelled_before_start(run_id):
        return None
    for candidate in turn_order(run_id):
        with transaction.atomic():
            # the run's row locked first, then checked: another worker's claim waits here and then finds it taken
            queued = Run.objects.select_for_update().filter(pk=candidate, state=Run.QUEUED).values_list(
                "cancel_requested", flat=True).first()
            claimed = queued is not None and (not queued or _has_job(candidate))
            if claimed:
                now = timezone.now()
                Run.objects.filter(pk=candidate).update(
                    # started_at: when a worker first took it, kept through resumes (the page shows one start)
                    state=state, started_at=Coalesce("started_at", Value(now)), finished_at=None, exit_code=None,
                    message="")
                RunLease.objects.update_or_create(run_id=candidate, defaults={"owner": owner, "heartbeat_at": now})
                announce(candidate, RunTransition.CLAIMED, worker=owner)
        if claimed:  # another worker may have taken it first: then the next in turn
            return Run.objects.select_related("prompt_set", "eval_prompt_set", "engine_job").get(pk=candidate)
    return None


# A cancelled run is claimed while it has a cluster's job to stop. (Read only: an UPDATE filtered across tables is
# one on a subquery, whose rows PostgreSQL does not check again after waiting for a lock; writes lock, then check.)
HAS_JOB = Q(engine_job__job_id__gt="")
CLAIMABLE = Q(cancel_requested=False) | HAS_JOB


def _has_job(run_id: int) -> bool:
    """Whether the run has a cluster's job on record (a local trainer's id never is)."""
    return Run.objects.filter(HAS_JOB, pk=run_id).exists()


def turn_order(run_id: int) -> list[int]:
    """The queued runs of `run_id`'s queue in the order a free worker should take them: teams with fewer runs in
    training on that queue first, then the oldest run; `run_id` alone when it is not queued there."""
    queue = Run.objects.filter(pk=run_id).values_list("queue", flat=True).first()
    if queue is None:
        return [run_id]
    waiting = Run.objects.filter(CLAIMABLE, state=Run.QUEUED, queue=queue).values_list("pk", "team_id", "created_at")
    training = Counter(Run.objects.filter(state__in=Run.SUPERVISED, queue=queue).values_list("team_id", flat=True))
    return [pk for pk, team, created in sorted(waiting, key=lambda r: (training[r[1]], r[2], r[0]))] or [run_id]


def request_cancel(run_id: int, by) -> None:
    """`by` asks to stop a queued or supervised run: recorded, and relayed by whoever holds the run (a queued
    one ends at once, end_cancelled_before_start; a running one's supervisor stops its trainer)."""
    with transaction.atomic():
        if Run.objects.filter(pk=run_id, state__in=[Run.QUEUED, *Run.SUPERVISED], cancel_requested=False).update(
                cancel_requested=True):
            announce(run_id, RunTransition.CANCEL_REQUESTED, by=by)


def end_cancelled_before_start(run_id: int) -> bool:
    """A queued run with a cancel request ends `cancelled` and watchers are told. Called
    by cancel_run and by a supervisor that finds such a run, whichever comes first. A run
    re-queued with its cluster engine's job still training (its worker died) stays queued:
    the next worker to take it stops the job (DESIGN §4.9)."""
    with transaction.atomic():
        rows = Run.objects.filter(pk=run_id, state=Run.QUEUED, cancel_requested=True)
        if rows.select_for_update().values_list("pk", flat=True).first() is None:
            return False
        if _has_job(run_id):
            rows.update(message="cancel requested: the next worker to take the run stops its job")
            announce(run_id)
            return False
        rows.update(state=Run.CANCELLED, finished_at=timezone.now(), message="cancelled before it started")
        announce(run_id, RunTransition.CANCELLED_BEFORE_START)
    return True


def requeue_for_resume(run: Run, by, message: str = "") -> None:
    """`by`'s resume: queued again, to continue from the last checkpoint, and sent to a worker."""
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(
            state=Run.QUEUED, resume_requested=True, cancel_requested=False, finished_at=None, message=message,
            exit_code=None, auto_resumes=0,
        )
        # its cluster engine's job ended with the run: a resume submits a new one (DESIGN §4.9)
        EngineJob.objects.filter(run_id=run.pk).update(job_id="", reason="")
        _release(run.pk)
        announce(run.pk, RunTransition.RESUME_REQUESTED, by=by)
        dispatch(run)
    run.refresh_from_db()


def report_running(run: Run, by, started_at=None) -> None:
    """A run trained elsewhere is running, as `by`'s trainer reports: just created, or reported running again
    after it had ended (its trainer went on). No lease: it has no worker; its silence is the `stalled` rule's
    business."""
    with transaction.atomic():
        fields = {"state": Run.RUNNING, "finished_at": None, "message": ""}
        if started_at is not None:
            fields["started_at"] = started_at
        Run.objects.filter(pk=run.pk, source=Run.EXTERNAL).update(**fields)
        announce(run.pk, RunTransition.REPORTED, by=by)
    run.refresh_from_db()


def heartbeat(run_id: int, owner: str) -> bool:
    """The supervisor still holds the run; False when it has lost the lease (re-queued, cancelled by
    `reap`, or claimed by another supervisor): the caller must stop its trainer and write nothing more."""
    # a lease row exists only while its run is supervised (every way out of pending and running releases it)
    return bool(RunLease.objects.filter(run_id=run_id, owner=owner).update(heartbeat_at=timezone.now()))


def _hold(run_id: int, owner: str) -> str | None:
    """The run's state while `owner`'s supervisor holds it, its row locked to the end of the transaction: what is
    written next is written by the lease's holder only. None once it has lost the lease. The lease is read after the
    lock: whoever changes a lease (claim, hand back, finish, reap) holds the run's row lock while it does."""
    state = Run.objects.select_for_update().filter(pk=run_id, state__in=Run.SUPERVISED).values_list(
        "state", flat=True).first()
    if state is None or not RunLease.objects.filter(run_id=run_id, owner=owner).exists():
        return None
    return state


def _release(run_id: int) -> None:
    """No supervisor holds the run any more (it ended, was handed back or re-queued)."""
    RunLease.objects.filter(run_id=run_id).delete()


def engine_job(run: Run, owner: str, engine: str, job_id: str, attempt: int | None = None) -> bool:
    """The engine and job the supervisor submitted the run as (or found it as), recorded before anything else
    is: a worker that takes the run over re-attaches to this job instead of submitting another (DESIGN §4.9)."""
    fields = {"engine": engine, "job_id": job_id}
    if attempt is not None:
        fields["attempt"] = attempt
    with transaction.atomic():
        if _hold(run.pk, owner) is None:
            return False
        EngineJob.objects.update_or_create(run_id=run.pk, defaults=fields)
    return True


def engine_state(run: Run, owner: str, state: str, reason: str = "", log_tail: str | None = None) -> bool:
    """What the engine says of the run's job: `pending` (waiting in its queue, with its reason) or `running`.
    Watchers are told when the state or the reason changes; the log tail is kept for the run page."""
    job = {"reason": reason[:500]}
    if log_tail is not None:
        job["log_tail"] = log_tail
    with transaction.atomic():
        was = _hold(run.pk, owner)
        if was is None:
            return False
        said, tail = EngineJob.objects.filter(run_id=run.pk).values_list("reason", "log_tail").first() or ("", "")
        Run.objects.filter(pk=run.pk).update(state=state)
        EngineJob.objects.filter(run_id=run.pk).update(**job)
        if was != state:  # pending -> running: in the history; a new reason alone is not
            announce(run.pk, RunTransition.ENGINE, worker=owner)
        elif said != reason[:500]:
            announce(run.pk)
        elif log_tail is not None and log_tail != tail:
            # the job's log grew: its page alone hears (the team's lists show no log)
            push_on_commit(run_id=run.pk, messages=[{"type": "engine", **Run.objects.select_related("engine_job")
                                                                                  .get(pk=run.pk).engine_json()}])
    return True


def job_ended(run: Run, reason: str, log_tail: str) -> None:
    """The engine's last word on the run's job, which has ended, and its log's tail: kept for the run's page."""
    EngineJob.objects.filter(run_id=run.pk).update(reason=reason[:500], log_tail=log_tail)


def hand_back(run: Run, owner: str, message: str) -> bool:
    """The worker is shutting down and the trainer has checkpointed: the run is queued to resume on
    the next worker instead of ending (nobody cancelled it)."""
    with transaction.atomic():
        handed = _hold(run.pk, owner) is not None
        if handed:
            Run.objects.filter(pk=run.pk).update(state=Run.QUEUED, resume_requested=True, message=message)
            _release(run.pk)
            announce(run.pk, RunTransition.HANDED_BACK, worker=owner)
            dispatch(run)
    return bool(handed)


def finish(run: Run, state: str, message: str, exit_code: int | None, stderr_tail: str, owner: str | None = None,
           finished_at=None) -> bool:
    """The trainer has exited: record how, tell watchers, and raise `run_failed` on failure. With
    `owner`, only while that supervisor still holds the run (False otherwise, and nothing is written).
    `finished_at`: when, if the trainer says (a run trained elsewhere); else now."""
    with transaction.atomic():
        if owner is not None and _hold(run.pk, owner) is None:
            return False
        finished = Run.objects.filter(pk=run.pk).update(
            state=state,
            message=message,
            exit_code=exit_code,
            stderr_tail=stderr_tail,
            finished_at=finished_at or timezone.now(),
            cancel_requested=False,
        )
        if not finished:
            return False
        _release(run.pk)
        announce(run.pk, RunTransition.FINISHED, worker=owner or "")
        run.refresh_from_db()
        if state == Run.FAILED:
            alerts.run_failed(run)
        else:
            alerts.end_of_run(run)
    return True


def _lease_cutoff(now):
    """A heartbeat older than this has lost its lease."""
    return now - timedelta(seconds=settings.RUN_LEASE_SECONDS)


def _lease_expired(now) -> Q:
    # a run claimed before leases existed has no heartbeat: its start time stands in
    cutoff = _lease_cutoff(now)
    return Q(lease__heartbeat_at__lt=cutoff) | Q(lease__isnull=True, started_at__lt=cutoff)


def reap(now=None) -> dict:
    """Runs whose supervisor is gone, and queued runs whose task message may be lost. Safe to run
    twice at once: each run is re-checked under a row lock."""
    now = now or timezone.now()
    # a run trained elsewhere has no supervisor to lose: its silence is the `stalled` rule's business
    orphans = list(Run.objects.filter(_lease_expired(now), state__in=Run.SUPERVISED, source=Run.EVOLAB)
                   .values_list("pk", flat=True))
    outcomes = {"resumed": [], "reattached": [], "failed": [], "cancelled": [], "redispatched": []}
    for run_id in orphans:
        outcome = reap_run(run_id, now)
        if outcome:
            outcomes[outcome].append(run_id)
    cutoff = now - timedelta(seconds=settings.RUN_REDISPATCH_SECONDS)
    lost = Run.objects.filter(Q(dispatched_at__lt=cutoff) | Q(dispatched_at__isnull=True, created_at__lt=cutoff),
                              CLAIMABLE, state=Run.QUEUED,
                              source=Run.EVOLAB)
    for run in lost:
        with transaction.atomic():
            dispatch(run)
        outcomes["redispatched"].append(run.pk)
    if any(outcomes.values()):
        log.warning("lease check: %s", outcomes)
    return outcomes


def reap_run(run_id: int, now=None) -> str | None:
    """End or re-queue one running run whose lease has expired; None if it has not (or is not running)."""
    now = now or timezone.now()
    with transaction.atomic():
        # `of`: the run's row alone (PostgreSQL locks no row of the nullable side of the lease's outer join)
        run = Run.objects.select_for_update(of=("self",)).filter(
            _lease_expired(now), pk=run_id, state__in=Run.SUPERVISED, source=Run.EVOLAB).first()
        if run is None:
            return None
        lease = RunLease.objects.filter(run_id=run.pk).first()
        if lease is not None and lease.heartbeat_at >= _lease_cutoff(now):
            return None  # claimed while this waited for the run's row: the lock's re-check sees the run, not its lease
        silent = f"its worker stopped answering (last heartbeat {_when(lease.heartbeat_at if lease else run.started_at)})"
        worker = lease.owner if lease else ""
        _release(run.pk)
        job = EngineJob.objects.filter(run_id=run.pk).first()
        if job is not None and job.job_id:  # recorded only for a job that outlives its worker (a cluster's)
            # its cluster engine's job trains on without the worker (DESIGN §4.9): the next worker re-attaches to
            # it (and stops it, when the run was cancelled meanwhile); nothing is resumed, no resume is counted
            run.state, outcome = Run.QUEUED, "reattached"
            run.message = f"{silent}; the next worker watches its {job.title} job {job.job_id}"
        elif run.cancel_requested:
            run.state, run.message, outcome = Run.CANCELLED, f"cancelled; {silent}", "cancelled"
        elif run.auto_resumes < settings.RUN_AUTO_RESUMES:
            run.auto_resumes += 1
            run.state, run.resume_requested, outcome = Run.QUEUED, True, "resumed"
            run.message = (f"{silent}; resuming from its last checkpoint "
                           f"(automatic resume {run.auto_resumes} of {settings.RUN_AUTO_RESUMES})")
        else:
            run.state, outcome = Run.FAILED, "failed"
            run.message = (f"{silent}, after {run.auto_resumes} automatic resumes; resume it once a worker "
                           f"is healthy")
        if run.state != Run.QUEUED:
            run.finished_at, run.cancel_requested = now, False
        run.save(update_fields=["state", "message", "auto_resumes", "resume_requested", "finished_at",
                                "cancel_requested"])
        announce(run.pk, RunTransition.LEASE_EXPIRED, worker=worker)
        if outcome in ("resumed", "reattached"):
            dispatch(run)
        elif outcome == "failed":
            alerts.run_failed(run)
        else:
            alerts.end_of_run(run)
    return outcome


def check_stalled(now: float | None = None) -> int:
    """Running runs whose log has been silent too long get a `stalled` alert; how many are stalled. Periodic
    (workers.tasks.check_stalled_runs), runs trained elsewhere included: they have no lease, only a log."""
    now = time.time() if now is None else now
    stalled = 0
    for run in Run.objects.filter(state=Run.RUNNING).select_related("team"):
        last = run_last_event_time(run)
        if last is None:
            last = run.started_at.timestamp() if run.started_at else now
        stalled += alerts.judge_silence(run, now - last)
    return stalled


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S %Z") if moment else "never"
