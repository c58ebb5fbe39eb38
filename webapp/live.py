"""Live messages to browsers watching a run (the Channels group of the run)."""
import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)


def run_group_name(run_id: int) -> str:
    return f"run-{run_id}"


def push(run_id: int, messages: list[dict]) -> None:
    """Send messages to everyone watching the run. The database is the source of truth,
    so a push that fails (Redis restarting) is logged and dropped, never raised: the page
    re-reads the database when it reconnects."""
    if not messages:
        return
    try:
        async_to_sync(get_channel_layer().group_send)(
            run_group_name(run_id), {"type": "run.messages", "messages": messages}
        )
    except Exception:  # noqa: BLE001 - see docstring
        log.exception("could not push %d live messages for run %s", len(messages), run_id)
