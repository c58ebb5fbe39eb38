"""Sign-in throttling (webapp/accounts/sign_in.py): five failures for one username from one address
refuse the next attempts with 429, whatever the password, for LOGIN_LOCKOUT_SECONDS; other addresses
are not refused; a successful sign-in clears the count. Counts live in the test Redis."""
import uuid

import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db


@pytest.fixture
def account():
    name = f"ada-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_user(username=name, password="right-password-1")
    return name


def sign_in(client, username, password, address):
    return client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def address():
    return f"10.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}.{uuid.uuid4().int % 250}"


def test_the_sixth_attempt_after_five_failures_is_refused_even_with_the_right_password(client, account, settings):
    here = address()
    for _ in range(settings.LOGIN_MAX_FAILURES):
        assert sign_in(client, account, "wrong", here).status_code == 200
    refused = sign_in(client, account, "right-password-1", here)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.content.decode() and "15 minutes" in refused.content.decode()
    assert "_auth_user_id" not in client.session


def test_another_address_can_still_sign_in(client, account, settings):
    for _ in range(settings.LOGIN_MAX_FAILURES):
        sign_in(client, account, "wrong", address())  # spread: no address reaches the limit
    assert sign_in(client, account, "right-password-1", address()).status_code == 302


def test_a_successful_sign_in_clears_the_count(client, account, settings):
    here = address()
    for _ in range(settings.LOGIN_MAX_FAILURES - 1):
        sign_in(client, account, "wrong", here)
    assert sign_in(client, account, "right-password-1", here).status_code == 302
    client.logout()
    for _ in range(settings.LOGIN_MAX_FAILURES - 1):
        assert sign_in(client, account, "wrong", here).status_code == 200
    assert sign_in(client, account, "right-password-1", here).status_code == 302
