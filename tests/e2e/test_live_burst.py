"""A burst of pushes reaches every viewer whole (issue 26): real daphne, real WebSocket clients, 400 separate
pushes back to back (as a reporter posting one step per request makes them). Through the channel layer each
push was one message per viewer on the process's one queue, capped at 100: most of the burst was dropped."""
import asyncio
import json

import pytest
import redis.asyncio
import websockets
from django.conf import settings

from tests.factories import make_prompt_set, team_of
from tests.waiting import wait_until_async
from webapp.accounts.models import ApiToken
from webapp.live import push, user_group_name
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]

PUSHES = 400
VIEWERS = 20


@pytest.fixture
def run(django_user_model):
    user = django_user_model.objects.create_user(username="burst", password="pw-for-tests-1")
    team_of(user)
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=PUSHES,
                              created_by=user)


def steps_seen(frames):
    steps = []
    for frame in frames:
        message = json.loads(frame)
        for one in message["messages"] if message["type"] == "batch" else [message]:
            assert one["type"] == "metrics"
            steps.append(one["step"])
    return steps


def test_every_viewer_gets_every_one_of_400_back_to_back_pushes_in_order(live_stack, run):
    headers = {"Authorization": f"Token {ApiToken.issue(run.created_by)}"}
    base = f"ws://127.0.0.1:{live_stack.port}/ws/runs/{run.pk}/"
    # a run socket joins its user's channel-layer group after it has started watching the run's stream
    # (webapp/runs/consumers.py: connect, join, then group_add): channels_redis keeps the group as this sorted set
    user_group = f"{settings.CHANNEL_LAYERS['default']['CONFIG']['prefix']}:group:{user_group_name(run.created_by_id)}"

    async def go():
        # half the viewers ask for batches as the run page does, half take one frame per message
        sockets = [await websockets.connect(base + ("?batch=1" if i % 2 else ""), additional_headers=headers,
                                            max_size=None) for i in range(VIEWERS)]
        groups = redis.asyncio.Redis.from_url(settings.REDIS_URL)

        async def every_socket_joined():
            return await groups.zcard(user_group) >= VIEWERS

        try:
            await wait_until_async(every_socket_joined, 10, what=f"all {VIEWERS} sockets in their user's group",
                                   last=lambda: groups.zcard(user_group))
        finally:
            await groups.aclose()

        def burst():
            for step in range(1, PUSHES + 1):
                push(run.pk, [{"type": "metrics", "step": step, "time": 0.0, "values": {"entropy": 1.0}}])

        await asyncio.to_thread(burst)
        received = []
        for ws in sockets:
            frames = []
            try:
                while sum(1 for _ in steps_seen(frames)) < PUSHES:
                    frames.append(await asyncio.wait_for(ws.recv(), timeout=5))
            except TimeoutError:
                pass
            received.append(steps_seen(frames))
            await ws.close()
        return received

    received = asyncio.run(go())
    assert [len(steps) for steps in received] == [PUSHES] * VIEWERS
    assert all(steps == list(range(1, PUSHES + 1)) for steps in received)
