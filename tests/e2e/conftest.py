import os

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


CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling out on this closed
# network; the rest are what headless Chromium needs as root in a container.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def browser_page(tmp_path, monkeypatch):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's 'chromium' package (make test does it as root)")
    # Playwright's sync API runs an event loop in this thread; the test touches the
    # database only before the browser starts, so Django's guard can be relaxed.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(30_000)
        yield page
        page.screenshot(path=str(tmp_path / "last.png"))
        browser.close()
