"""Sign-in throttling through the web image's entrypoint (real daphne, the production profile): the throttle counts
failures against the address the deployment trusts (EVOLAB_TRUSTED_PROXIES), never one a client writes into
X-Forwarded-For itself. Before, daphne's --proxy-headers took the header's first entry, which the client chooses:
a new made-up address per attempt got around the limit."""
import re

import pytest
import requests

from tests.e2e.helpers import HOST, PROXIED, web_entrypoint

pytestmark = pytest.mark.e2e

PASSWORD = "right-password-1"


def attempt(base, username, password, forwarded_for):
    """One sign-in through the entrypoint, as a browser behind the TLS proxy would send it; its status code."""
    page = requests.get(f"{base}/accounts/login/", headers={**PROXIED, "X-Forwarded-For": forwarded_for}, timeout=10)
    cookie = page.cookies["csrftoken"]  # secure: requests would not send it back over http itself
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = requests.post(f"{base}/accounts/login/", timeout=10, allow_redirects=False,
                             data={"username": username, "password": password, "csrfmiddlewaretoken": token},
                             headers={**PROXIED, "X-Forwarded-For": forwarded_for, "Cookie": f"csrftoken={cookie}",
                                      "Origin": f"https://{HOST}", "Referer": f"https://{HOST}/accounts/login/"})
    assert response.status_code in (200, 302, 429), response.text[:1000]
    return response.status_code


@pytest.fixture
def account(transactional_db):
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password

    # hashed as the production profile hashes (tests/settings.py makes MD5 the tests' own), so that it can check it
    return get_user_model().objects.create(username="ada-behind-proxy",
                                           password=make_password(PASSWORD, hasher="pbkdf2_sha256")).username


def test_with_no_proxy_trusted_a_forwarded_address_does_not_get_around_the_limit(live_stack, account, tmp_path):
    with web_entrypoint(live_stack, tmp_path) as base:
        for i in range(5):  # each attempt claims to come from somewhere else
            assert attempt(base, account, "wrong", f"198.51.100.{i}") == 200
        assert attempt(base, account, PASSWORD, "198.51.100.99") == 429


def test_behind_one_proxy_the_address_it_saw_is_counted_and_not_what_the_client_wrote(live_stack, account, tmp_path):
    with web_entrypoint(live_stack, tmp_path, EVOLAB_TRUSTED_PROXIES="1") as base:
        for i in range(5):  # the proxy appends the address it saw connect: 203.0.113.7
            assert attempt(base, account, "wrong", f"198.51.100.{i}, 203.0.113.7") == 200
        assert attempt(base, account, PASSWORD, "10.0.0.1, 203.0.113.7") == 429
        assert attempt(base, account, PASSWORD, "203.0.113.8") == 302  # another client is not refused
