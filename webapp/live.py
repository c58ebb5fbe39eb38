"""Live messages to browsers and scripts: the Channels group of a run (ws/runs/{id}/) and
of a team (ws/teams/{id}/)."""
import asyncio
import logging
import os
import threading

from channels.layers import get_channel_layer
from django.db import transaction

log = logging.getLogger(__name__)

SEND_TIMEOUT_SECONDS = 10


class _SenderLoop:
    """One event loop per process, in a daemon thread, that every push runs on.

    channels-redis keeps its connection pool per event loop; `async_to_sync` starts a fresh
    loop for each call, so each push used to open (and drop) a new Redis connection, a third
    of a live ingestion call. Running every send on this one loop keeps one long-lived
    connection per process (a supervisor, a web worker). A forked child starts its own.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pid: int | None = None

    def loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None or self._pid != os.getpid() or not self._loop.is_running():
                loop = asyncio.new_event_loop()
                started = threading.Event()

                def run():
                    asyncio.set_event_loop(loop)
                    loop.call_soon(started.set)
                    loop.run_forever()

                threading.Thread(target=run, name="live-sender", daemon=True).start()
                started.wait()
                self._loop, self._pid = loop, os.getpid()
            return self._loop

    def run(self, coroutine) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self.loop()).result(timeout=SEND_TIMEOUT_SECONDS)


_sender = _SenderLoop()


def run_group_name(run_id: int) -> str:
    return f"run-{run_id}"


def team_group_name(team_id: int) -> str:
    return f"team-{team_id}"


def _send(group: str, messages: list[dict]) -> None:
    _send_all({group: messages})


def _send_all(batches: dict[str, list[dict]]) -> None:
    """Send each group its messages, all in one trip to the sender loop (one push per poll for
    ingestion: the run's page and its team's run list together). The database is the source of
    truth, so a push that fails (Redis restarting) is logged and dropped, never raised: a page
    re-reads the database when it reconnects."""
    batches = {group: messages for group, messages in batches.items() if messages}
    if not batches:
        return
    layer = get_channel_layer()

    async def send():
        await asyncio.gather(*(layer.group_send(group, {"type": "run.messages", "messages": messages})
                               for group, messages in batches.items()))

    try:
        _sender.run(send())
    except Exception:  # noqa: BLE001 - see docstring
        log.exception("could not push live messages to %s", ", ".join(batches))


def push(run_id: int, messages: list[dict]) -> None:
    """Send messages to everyone watching the run."""
    _send(run_group_name(run_id), messages)


def push_team(team_id: int, messages: list[dict]) -> None:
    """Send messages to everyone watching the team (run list, alerts page)."""
    _send(team_group_name(team_id), messages)


def push_on_commit(run_id: int | None = None, team_id: int | None = None, messages: list[dict] = (),
                   team_messages: list[dict] | None = None) -> None:
    """Push once the current transaction commits, so no watcher hears of a change that
    was rolled back or reads the database before the change is visible. The team hears
    `team_messages` when given, else the same messages; both in one push."""
    messages = list(messages)
    team_messages = messages if team_messages is None else list(team_messages)
    batches = {}
    if run_id is not None:
        batches[run_group_name(run_id)] = messages
    if team_id is not None:
        batches[team_group_name(team_id)] = team_messages
    transaction.on_commit(lambda: _send_all(batches))
