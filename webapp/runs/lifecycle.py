"""A run's lifecycle: claim, finish, cancel before start, requeue for resume. Each
transition writes the run's state and, on commit, tells the run's watchers (`status` on
ws/runs/{id}/) and its team's (`run` on ws/teams/{id}/: the live run list).

Action functions (actions.py) validate what a user asks for and call these; the
supervisor (workers/) calls them for what the trainer does."""
from django.db import transaction
from django.utils import timezone

from webapp.live import push_on_commit

from .models import Run


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
        "started_at": run.started_at.isoformat() if run.started_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def announce(run_id: int, extra: dict | None = None) -> None:
    """After commit: the run's new state to its page and its team (the one place both are told)."""
    run = Run.objects.get(pk=run_id)
    status = {"type": "status", "state": run.state, "message": run.message, **(extra or {})}
    push_on_commit(run_id=run.pk, messages=[status])
    push_on_commit(team_id=run.team_id, messages=[run_message(run)])


def progress_message(run: Run, health: dict) -> dict:
    """A new step for the run list (last step and a few health figures); ingestion pushes it
    together with the step's own messages."""
    return {**run_message(run), "health": health}


def queued(run: Run) -> None:
    push_on_commit(team_id=run.team_id, messages=[run_message(run)])


def claim(run_id: int) -> Run | None:
    """Move a queued run to running. Only one supervisor can win, so a task delivered
    twice (a broker redelivery, a double click) never starts two trainers."""
    with transaction.atomic():
        claimed = Run.objects.filter(pk=run_id, state=Run.QUEUED, cancel_requested=False).update(
            state=Run.RUNNING, started_at=timezone.now(), finished_at=None, exit_code=None, message=""
        )
        if claimed:
            announce(run_id)
    if not claimed:
        end_cancelled_before_start(run_id)
        return None
    return Run.objects.select_related("prompt_set", "eval_prompt_set").get(pk=run_id)


def end_cancelled_before_start(run_id: int) -> bool:
    """A queued run with a cancel request ends `cancelled` and watchers are told. Called
    by cancel_run and by a supervisor that finds such a run, whichever comes first."""
    with transaction.atomic():
        ended = Run.objects.filter(pk=run_id, state=Run.QUEUED, cancel_requested=True).update(
            state=Run.CANCELLED, finished_at=timezone.now(), message="cancelled before it started"
        )
        if ended:
            announce(run_id)
    return bool(ended)


def requeue_for_resume(run: Run) -> None:
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(
            state=Run.QUEUED, resume_requested=True, cancel_requested=False, finished_at=None, message="", exit_code=None
        )
        announce(run.pk)
    run.refresh_from_db()


def finish(run: Run, state: str, message: str, exit_code: int | None, stderr_tail: str) -> None:
    """The trainer has exited: record how, tell watchers, and raise `run_failed` on failure."""
    from webapp.alerts.engine import end_of_run, run_failed

    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(
            state=state,
            message=message,
            exit_code=exit_code,
            stderr_tail=stderr_tail,
            finished_at=timezone.now(),
            cancel_requested=False,
        )
        announce(run.pk)
        run.refresh_from_db()
        if state == Run.FAILED:
            run_failed(run)
        else:
            end_of_run(run)
