"""`manage.py add_member TEAM USER --create` prints a one-time set-password link for the user it creates
(webapp/accounts/set_password.py); the site's /accounts/set-password/ page, Django's own confirm view, lets them
choose a password and signs them in. The link stops working once used, and after EVOLAB_SET_PASSWORD_DAYS."""
import io
import re

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client

from tests.factories import make_team
from webapp.accounts.models import Membership

pytestmark = pytest.mark.django_db

NEW = {"new_password1": "alice's long password", "new_password2": "alice's long password"}


def add_member(*args) -> str:
    out = io.StringIO()
    call_command("add_member", *args, stdout=out)
    return out.getvalue()


def link_in(output: str) -> str:
    return re.search(r"(https?://\S+/accounts/set-password/\S+/)", output)[1]


def path_of(link: str) -> str:
    return "/" + link.split("://", 1)[1].split("/", 1)[1]


def choose_password(client: Client, link: str, fields=NEW):
    """Open the link as a browser does (Django moves the token out of the address into the session), then post."""
    form_page = client.get(path_of(link), follow=True)
    return form_page, client.post(form_page.redirect_chain[-1][0] if form_page.redirect_chain else path_of(link), fields)


def test_a_created_user_gets_a_link_on_the_sites_base_url(django_user_model):
    output = add_member("lab", "alice", "--create")
    assert link_in(output).startswith(settings.EVOLAB_BASE_URL.rstrip("/") + "/accounts/set-password/")
    assert Membership.objects.filter(team__name="lab", user__username="alice").exists()
    assert not django_user_model.objects.get(username="alice").has_usable_password()
    other = link_in(add_member("lab", "bob", "--create", "--base-url", "https://evolab.example.org/"))
    assert other.startswith("https://evolab.example.org/accounts/set-password/")


def test_an_existing_user_gets_no_link(django_user_model):
    make_team("lab", alice="member")
    assert "set-password" not in add_member("lab", "alice", "--role", "admin")


def test_the_link_sets_the_password_and_signs_the_user_in(django_user_model):
    link = link_in(add_member("lab", "alice", "--create"))
    client = Client()
    form_page, response = choose_password(client, link)
    assert form_page.status_code == 200 and 'name="new_password1"' in form_page.content.decode()
    assert response.status_code == 302
    assert django_user_model.objects.get(username="alice").check_password(NEW["new_password1"])
    team = Membership.objects.get(user__username="alice").team
    assert client.get(f"/teams/{team.pk}/").status_code == 200  # signed in


def test_the_link_works_once(django_user_model):
    link = link_in(add_member("lab", "alice", "--create"))
    choose_password(Client(), link)
    again = Client().get(path_of(link), follow=True)
    assert again.status_code == 404 and "not valid" in again.content.decode()
    assert 'name="new_password1"' not in again.content.decode()


def test_a_weak_or_mismatched_password_is_refused_naming_the_field(django_user_model):
    link = link_in(add_member("lab", "alice", "--create"))
    client = Client()
    _, response = choose_password(client, link, {"new_password1": "short", "new_password2": "short"})
    assert response.status_code == 400 and 'id="error-new_password2"' in response.content.decode()
    assert "too short" in response.content.decode()
    assert not django_user_model.objects.get(username="alice").has_usable_password()
