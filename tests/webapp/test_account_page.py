"""The account page (/account/, webapp/accounts/account_views.py): a user changes their password (the current one
required) and their email, creates, names and revokes their API tokens (a key shown once), and chooses which
alert emails they get. Every refusal names its field."""
import re

import pytest
from django.test import Client

from tests.factories import make_team, signed_in
from webapp.accounts.models import AlertEmails, ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def ada(django_user_model):
    make_team("lab", ada="admin")
    user = django_user_model.objects.get(username="ada")
    user.set_password("ada's old password")
    user.email = "ada@example.org"
    user.save()
    return signed_in(django_user_model, "ada")


def field_error(response, field: str) -> str:
    return re.search(rf'id="error-{field}"[^>]*>(.*?)</', response.content.decode(), re.S)[1]


def test_the_page_is_linked_from_the_header_with_the_username_and_needs_a_sign_in(ada):
    assert '<a id="account-link" href="/account/">ada</a>' in ada.get("/teams/").content.decode()
    response = Client().get("/account/")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/?next=/account/")


def test_changing_the_password_needs_the_current_one_and_keeps_the_session(ada, django_user_model):
    wrong = ada.post("/account/", {"action": "password", "old_password": "nope", "new_password1": "a new long password",
                                   "new_password2": "a new long password"})
    assert wrong.status_code == 400 and "incorrect" in field_error(wrong, "old_password")
    short = ada.post("/account/", {"action": "password", "old_password": "ada's old password",
                                   "new_password1": "short", "new_password2": "short"})
    assert short.status_code == 400 and "too short" in field_error(short, "new_password2")
    done = ada.post("/account/", {"action": "password", "old_password": "ada's old password",
                                  "new_password1": "a new long password", "new_password2": "a new long password"})
    assert done.status_code == 302
    assert django_user_model.objects.get(username="ada").check_password("a new long password")
    assert ada.get("/account/").status_code == 200  # still signed in


def test_the_email_is_validated_and_may_be_cleared(ada, django_user_model):
    password = "ada's old password"
    bad = ada.post("/account/", {"action": "email", "email": "not an address", "password": password})
    assert bad.status_code == 400 and "valid email" in field_error(bad, "email")
    assert ada.post("/account/", {"action": "email", "email": "ada@lab.example", "password": password}).status_code == 302
    assert django_user_model.objects.get(username="ada").email == "ada@lab.example"
    ada.post("/account/", {"action": "email", "email": "", "password": password})
    assert django_user_model.objects.get(username="ada").email == ""


def test_changing_the_email_needs_the_current_password(ada, django_user_model):
    """Alert emails, and whoever reads them, follow the address: a borrowed session must not move it."""
    for given in ({}, {"password": "nope"}):
        wrong = ada.post("/account/", {"action": "email", "email": "mallory@example.org", **given})
        assert wrong.status_code == 400 and "password" in field_error(wrong, "password").lower()
        assert 'value="mallory@example.org"' in wrong.content.decode()  # what was typed is kept
    assert django_user_model.objects.get(username="ada").email == "ada@example.org"


def test_an_api_token_does_not_sign_in_to_the_pages(ada, django_user_model):
    """A token is for scripts (/api/, /mlflow/): on the account page it changed the email and minted tokens that
    outlived its own revocation."""
    key = ApiToken.issue(django_user_model.objects.get(username="ada"))
    scripted = Client(HTTP_AUTHORIZATION=f"Token {key}")
    for response in (scripted.post("/account/", {"action": "email", "email": "mallory@example.org",
                                                 "password": "ada's old password"}),
                     scripted.post("/account/", {"action": "create_token", "name": "mine now"}),
                     scripted.get("/teams/"), scripted.get("/account/")):
        assert response.status_code == 403, response.status_code
        assert "API tokens" in response.content.decode()
    user = django_user_model.objects.get(username="ada")
    assert user.email == "ada@example.org" and user.api_tokens.count() == 1
    assert scripted.get("/api/teams").status_code == 200  # the API still takes it


def test_a_named_token_is_shown_once_and_listed_without_its_key(ada):
    page = ada.post("/account/", {"action": "create_token", "name": "ci <nightly>"}).content.decode()
    key = re.search(r'id="new-token">.*?value="([0-9a-f]{40})"', page, re.S)[1]
    token = ApiToken.objects.get()
    assert token.name == "ci <nightly>" and key not in token.digest
    assert Client().get("/api/teams", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    later = ada.get("/account/").content.decode()
    assert key not in later and "ci &lt;nightly&gt;" in later and 'id="tokens"' in later


def test_a_token_needs_a_short_name(ada):
    for name in ("", "   ", "x" * 101):
        response = ada.post("/account/", {"action": "create_token", "name": name})
        assert response.status_code == 400 and field_error(response, "name")
    assert not ApiToken.objects.exists()


def test_the_api_notes_when_a_token_was_last_used(ada):
    page = ada.post("/account/", {"action": "create_token", "name": "ci"}).content.decode()
    key = re.search(r'id="new-token">.*?value="([0-9a-f]{40})"', page, re.S)[1]
    assert ApiToken.objects.get().last_used_at is None
    Client().get("/api/teams", HTTP_AUTHORIZATION=f"Token {key}")
    assert ApiToken.objects.get().last_used_at is not None


def test_revoking_a_token_stops_it_and_only_the_owner_can(ada, django_user_model):
    make_team("lab", max="member")
    page = ada.post("/account/", {"action": "create_token", "name": "ci"}).content.decode()
    key = re.search(r'id="new-token">.*?value="([0-9a-f]{40})"', page, re.S)[1]
    token = ApiToken.objects.get()
    signed_in(django_user_model, "max").post("/account/", {"action": "revoke_token", "token": token.pk})
    assert ApiToken.objects.filter(pk=token.pk).exists()  # another user's token reads like a missing one
    assert ada.post("/account/", {"action": "revoke_token", "token": token.pk}).status_code == 302
    assert not ApiToken.objects.exists()
    assert Client().get("/api/teams", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401


def test_the_alert_email_choice_is_saved_and_shown(ada, django_user_model):
    ada_user = django_user_model.objects.get(username="ada")
    assert AlertEmails.of(ada_user) == "all"  # the default: every alert email, as before the choice existed
    assert ada.post("/account/", {"action": "alert_emails", "alert_emails": "critical"}).status_code == 302
    assert AlertEmails.of(ada_user) == "critical"
    assert re.search(r'value="critical"[^>]*checked', ada.get("/account/").content.decode())
    bad = ada.post("/account/", {"action": "alert_emails", "alert_emails": "sometimes"})
    assert bad.status_code == 400 and field_error(bad, "alert_emails")
    assert AlertEmails.of(ada_user) == "critical"
