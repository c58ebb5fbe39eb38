"""The admin's API token list: a token's name says what uses it, so an admin revoking one can tell them apart (only
the digest is stored: the key itself is never shown)."""
import pytest

from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.django_db


def test_the_token_list_shows_each_tokens_name_and_finds_tokens_by_it(admin_client, django_user_model):
    ada = django_user_model.objects.create_user(username="ada", password="pw-ada-1234")
    key = ApiToken.issue_named(ada, "nightly sync")
    ApiToken.issue_named(ada, "laptop")
    page = admin_client.get("/admin/accounts/apitoken/").content.decode()
    assert "nightly sync" in page and "laptop" in page and key not in page
    found = admin_client.get("/admin/accounts/apitoken/", {"q": "nightly"}).content.decode()
    assert "nightly sync" in found and "laptop" not in found
