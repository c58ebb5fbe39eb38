"""ws/runs/{id}/: a socket whose process read the run's stream too late (entries it should have had were
trimmed away first) is told so, `{"type": "behind"}`, before the entries that are left, which still arrive in
order (issue 26). Here the process is the test's own event loop, kept busy by pushes made on it."""
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


@pytest.fixture
def run(django_user_model):
    user = django_user_model.objects.create_user(username="slow", password="pw-for-tests-1")
    team_of(user)
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=30, created_by=user)


def messages_of(frames):
    out = []
    for frame in frames:
        message = json.loads(frame)
        out += message["messages"] if message["type"] == "batch" else [message]
    return out


def watch_20_pushes(run, query: str = "") -> list[dict]:
    """The messages a socket of the run gets while 20 steps are pushed on the reader's own event loop (so it
    cannot read until all 20 are in)."""
    headers = [(b"authorization", f"Token {ApiToken.issue(run.created_by)}".encode())]

    async def go():
        communicator = WebsocketCommunicator(application, f"/ws/runs/{run.pk}/{query}", headers=headers)
        connected, _ = await communicator.connect(timeout=5)
        assert connected
        # watching the run's stream already, in this loop's Hub: the consumer joins it before it accepts
        assert len(Hub.of_this_loop().watches.get(run.pk, {})) == 1
        for step in range(1, 21):
            push(run.pk, [{"type": "metrics", "step": step}])
        frames = []
        while not await communicator.receive_nothing(timeout=0.5):
            frames.append(await communicator.receive_from(timeout=1))
        await communicator.disconnect()
        return messages_of(frames)

    return async_to_sync(go)()


def test_a_socket_whose_entries_were_trimmed_before_it_read_them_is_told_it_fell_behind(run, settings):
    settings.LIVE_STREAM_MAXLEN = 5  # 15 of the 20 are trimmed before the reader runs
    messages = watch_20_pushes(run, "?batch=1")
    assert {"type": "behind"} in messages
    after = messages[messages.index({"type": "behind"}) + 1:]
    assert [m["step"] for m in after] == [16, 17, 18, 19, 20]
    assert [m["step"] for m in messages if m["type"] == "metrics"] == sorted(m["step"] for m in messages
                                                                             if m["type"] == "metrics")


def test_a_socket_that_kept_up_is_never_told_it_fell_behind(run):
    assert watch_20_pushes(run) == [{"type": "metrics", "step": step} for step in range(1, 21)]
