"""Live messages to browsers and scripts: the Channels group of a run (ws/runs/{id}/) and
of a team (ws/teams/{id}/); and the group of a user's own sockets, told when the user's access
changed (a membership removed, a token revoked, the account deactivated) so each re-checks it."""
import asyncio
import json
import logging
import math
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


def user_group_name(user_id: int) -> str:
    return f"user-{user_id}"


def access_changed_on_commit(user_id: int) -> None:
    """Once the transaction commits, every open socket of the user re-checks that it may stay open (the
    consumers close those that may not, webapp/runs/consumers.py). Logged and dropped if Redis is away."""
    def send():
        layer = get_channel_layer()
        try:
            _sender.run(layer.group_send(user_group_name(user_id), {"type": "access.changed"}))
        except Exception:  # noqa: BLE001 - as _send_all
            log.exception("could not tell user %s's sockets to re-check their access", user_id)

    transaction.on_commit(send)


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
    # each message as its JSON frame, encoded once here instead of by every watcher's consumer (50
    # viewers of a 400-step catch-up encoded 20,000 frames in the web server's one event loop)
    frames = {group: [_frame(m) for m in messages] for group, messages in batches.items()}

    async def send():
        await asyncio.gather(*(layer.group_send(group, {"type": "run.messages", "frames": texts})
                               for group, texts in frames.items()))

    try:
        _sender.run(send())
    except Exception:  # noqa: BLE001 - see docstring
        log.exception("could not push live messages to %s", ", ".join(batches))


def _frame(message: dict) -> str:
    """A message as its JSON text. A NaN or infinity (a diverged loss) becomes null: JSON has no such
    value and a browser's JSON.parse refuses the `NaN` Python would write."""
    try:
        return json.dumps(message, allow_nan=False, default=str)
    except ValueError:
        return json.dumps(_finite(message), allow_nan=False, default=str)


def _finite(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


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
