"""Live messages to browsers and scripts: the Channels group of a run (ws/runs/{id}/) and
of a team (ws/teams/{id}/)."""
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)


def run_group_name(run_id: int) -> str:
    return f"run-{run_id}"


def team_group_name(team_id: int) -> str:
    return f"team-{team_id}"


def _send(group: str, messages: list[dict]) -> None:
    """The database is the source of truth, so a push that fails (Redis restarting) is
    logged and dropped, never raised: a page re-reads the database when it reconnects."""
    if not messages:
        return
    try:
        async_to_sync(get_channel_layer().group_send)(group, {"type": "run.messages", "messages": messages})
    except Exception:  # noqa: BLE001 - see docstring
        log.exception("could not push %d live messages to %s", len(messages), group)


def push(run_id: int, messages: list[dict]) -> None:
    """Send messages to everyone watching the run."""
    _send(run_group_name(run_id), messages)


def push_team(team_id: int, messages: list[dict]) -> None:
    """Send messages to everyone watching the team (run list, alerts page)."""
    _send(team_group_name(team_id), messages)


def push_on_commit(run_id: int | None = None, team_id: int | None = None, messages: list[dict] = ()) -> None:
    """Push once the current transaction commits, so no watcher hears of a change that
    was rolled back or reads the database before the change is visible."""
    messages = list(messages)

    def send():
        if run_id is not None:
            push(run_id, messages)
        if team_id is not None:
            push_team(team_id, messages)

    transaction.on_commit(send)
