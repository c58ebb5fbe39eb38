import pytest
from django.contrib.auth import get_user_model

from tests.e2e.helpers import Api
from webapp.accounts.models import ApiToken


@pytest.fixture
def live_user(transactional_db):
    from tests.factories import team_of

    user = get_user_model().objects.create_user(username="grace", password="pw-for-e2e-1")
    team_of(user)
    return user


@pytest.fixture
def api(live_stack, live_user):
    return Api(live_stack.url, ApiToken.issue(live_user))


@pytest.fixture
def session_key(live_user):
    """A signed-in session for the WebSocket, made the way Django's test client does."""
    from django.test import Client

    client = Client()
    client.force_login(live_user)
    return client.cookies["sessionid"].value
