"""DESIGN §4.3/§4.4: sockets take a session cookie (Origin checked) or a token (no Origin
needed); a run or team the user may not see closes with 4404, as if it did not exist."""
import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from tests.factories import make_prompt_set, make_team
from webapp.accounts.models import ApiToken
from webapp.asgi import application
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def world(django_user_model):
    team = make_team("team-a", alice="viewer")
    other = make_team("team-b", bob="member")
    alice = django_user_model.objects.get(username="alice")
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(alice, team=team), max_steps=1,
                             created_by=alice)
    return {"run": run, "team": team, "other": other, "alice": alice, "bob": django_user_model.objects.get(username="bob")}


def connect(path, headers):
    async def go():
        communicator = WebsocketCommunicator(application, path, headers=headers)
        connected, code = await communicator.connect(timeout=5)
        if connected:
            # A refused socket is accepted, then closed at once with its code.
            if not await communicator.receive_nothing(timeout=0.5):
                message = await communicator.receive_output(timeout=1)
                if message["type"] == "websocket.close":
                    return False, message.get("code")
            await communicator.disconnect()
        return connected, code

    return async_to_sync(go)()


def token_header(user):
    return [(b"authorization", f"Token {ApiToken.issue(user)}".encode())]


def session_headers(user, origin=b"http://127.0.0.1"):
    client = Client()
    client.force_login(user)
    headers = [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode()), (b"host", b"127.0.0.1")]
    return headers + ([(b"origin", origin)] if origin else [])


def test_a_token_opens_a_run_socket_without_an_origin(world):
    assert connect(f"/ws/runs/{world['run'].pk}/", token_header(world["alice"])) == (True, None)


def test_a_token_opens_the_team_socket(world):
    assert connect(f"/ws/teams/{world['team'].pk}/", token_header(world["alice"])) == (True, None)


def test_another_teams_run_and_team_close_with_4404_like_missing_ones(world):
    bob = token_header(world["bob"])
    assert connect(f"/ws/runs/{world['run'].pk}/", bob) == (False, 4404)
    assert connect("/ws/runs/999999/", token_header(world["bob"])) == (False, 4404)
    assert connect(f"/ws/teams/{world['team'].pk}/", token_header(world["bob"])) == (False, 4404)


def test_a_bad_token_is_refused(world):
    assert connect(f"/ws/runs/{world['run'].pk}/", [(b"authorization", b"Token nope")]) == (False, 4401)


def test_a_session_cookie_needs_an_allowed_origin(world):
    path = f"/ws/runs/{world['run'].pk}/"
    assert connect(path, session_headers(world["alice"])) == (True, None)
    assert connect(path, session_headers(world["alice"], origin=b"http://evil.example"))[0] is False
    assert connect(path, session_headers(world["alice"], origin=None))[0] is False
