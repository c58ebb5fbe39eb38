"""ws/runs/{id}/: one JSON frame per message (DESIGN §4.3), or with ?batch=1 (the run page) each
push's messages as one {"type": "batch", "messages": [...]} frame."""
import asyncio
import json

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from tests.factories import make_prompt_set, team_of
from webapp.accounts.models import ApiToken
from webapp.asgi import application
from webapp.live import Hub, push
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES = [{"type": "metrics", "step": s, "values": {"entropy": 1.0 / s}} for s in (1, 2, 3)]


def frames_after_a_push(run, user, query="", messages=MESSAGES):
    headers = [(b"authorization", f"Token {ApiToken.issue(user)}".encode())]

    async def go():
        communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/{query}", headers=headers)
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        # the consumer starts watching the run's stream before it accepts (RunConsumer.join in connect), so it
        # is watching now, in this loop's Hub, and the push below reaches it
        assert len(Hub.of_this_loop().watches.get(run.pk, {})) == 1
        await asyncio.to_thread(push, run.pk, messages)
        frames = []
        while not await communicator.receive_nothing(timeout=0.5):
            frames.append(await communicator.receive_from(timeout=1))
        await communicator.disconnect()
        return frames

    return async_to_sync(go)()


@pytest.fixture
def run(django_user_model):
    user = django_user_model.objects.create_user(username="viv", password="pw-for-tests-1")
    team_of(user)
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=3, created_by=user)


def test_a_socket_gets_one_frame_per_message_by_default(run):
    frames = frames_after_a_push(run, run.created_by)
    assert [json.loads(f) for f in frames] == MESSAGES


def test_a_socket_that_asks_for_batches_gets_a_pushs_messages_in_one_frame(run):
    (frame,) = frames_after_a_push(run, run.created_by, "?batch=1")
    assert json.loads(frame) == {"type": "batch", "messages": MESSAGES}


def test_a_single_message_is_never_wrapped(run):
    (frame,) = frames_after_a_push(run, run.created_by, "?batch=1", messages=MESSAGES[:1])
    assert json.loads(frame) == MESSAGES[0]
