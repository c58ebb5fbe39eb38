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


def fullwidth(text):
    """The same name in fullwidth letters: sign-in's NFKC normalisation reads it as `text`."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def test_a_username_written_differently_but_signed_in_as_the_same_counts_as_the_same(client, account, settings):
    here = address()
    spellings = [f"  {account} ", fullwidth(account), f"\t{fullwidth(account)}"]
    for i in range(settings.LOGIN_MAX_FAILURES):
        assert sign_in(client, spellings[i % len(spellings)], "wrong", here).status_code == 200
    assert sign_in(client, account, "right-password-1", here).status_code == 429


def test_failures_counted_at_the_same_time_are_all_counted(settings):
    from concurrent.futures import ThreadPoolExecutor

    from webapp.accounts.sign_in import record_failure, seconds_refused

    settings.LOGIN_MAX_FAILURES, settings.LOGIN_MAX_FAILURES_PER_ADDRESS = 64, 1000
    here, name = address(), f"parallel-{uuid.uuid4().hex[:8]}"
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda _: record_failure(name, here), range(63)))
    assert seconds_refused(name, here) == 0  # 63 counted: one under the limit, none lost or counted twice
    record_failure(name, here)
    assert seconds_refused(name, here) > 0


def test_failures_at_the_admin_sign_in_count_and_refuse_it_the_same_way(client, settings):
    name = f"root-{uuid.uuid4().hex[:8]}"
    get_user_model().objects.create_superuser(username=name, password="right-password-1")
    here = address()
    for i in range(settings.LOGIN_MAX_FAILURES):
        url = "/admin/login/" if i % 2 else "/accounts/login/"
        assert client.post(url, {"username": name, "password": "wrong"}, REMOTE_ADDR=here).status_code == 200
    refused = client.post("/admin/login/?next=/admin/", {"username": name, "password": "right-password-1"},
                          REMOTE_ADDR=here)
    assert refused.status_code == 429
    assert "Too many failed sign-ins" in refused.content.decode()
    assert "_auth_user_id" not in client.session
    elsewhere = client.post("/admin/login/?next=/admin/", {"username": name, "password": "right-password-1"},
                            REMOTE_ADDR=address())
    assert elsewhere.status_code == 302 and client.session["_auth_user_id"]


@pytest.mark.parametrize("trusted, forwarded_for, expected", [
    (0, "198.51.100.1", "192.0.2.10"),                      # no proxy trusted: the header is the client's own text
    (1, "198.51.100.1, 203.0.113.7", "203.0.113.7"),        # the address the one proxy saw connect
    (2, "198.51.100.1, 203.0.113.7, 10.0.0.2", "203.0.113.7"),  # the outer of two proxies saw 203.0.113.7
    (2, "203.0.113.7", "203.0.113.7"),                      # came in through the inner proxy only: as far as known
    (1, None, "192.0.2.10"),                                # no header: the connection's address
])
def test_the_client_address_is_the_one_the_trusted_proxies_saw(rf, settings, trusted, forwarded_for, expected):
    from webapp.accounts.sign_in import client_address

    settings.TRUSTED_PROXIES = trusted
    headers = {"HTTP_X_FORWARDED_FOR": forwarded_for} if forwarded_for else {}
    assert client_address(rf.get("/", REMOTE_ADDR="192.0.2.10", **headers)) == expected
