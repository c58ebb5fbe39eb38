"""An invitation link opened signed out (/teams/join/<key>/): the colleague creates an account there, which signs
them in and joins the team in one POST, or signs in with the account they have and comes back to the link."""
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from tests.factories import make_team, signed_in
from webapp.accounts.models import Invitation, Membership

pytestmark = pytest.mark.django_db

GOOD = {"username": "newcomer", "email": "new@example.org", "password1": "a long enough pass", "password2": "a long enough pass"}


@pytest.fixture
def link(django_user_model):
    """The path of a pending `viewer` invitation to team lab, made by its admin ada."""
    team = make_team("lab", ada="admin")
    page = signed_in(django_user_model, "ada").post(f"/teams/{team.pk}/", {"action": "invite", "role": "viewer"})
    url = re.search(r'id="invitation-link">.*?value="([^"]+)"', page.content.decode())[1]
    return "/" + url.split("://", 1)[1].split("/", 1)[1]


def field_error(page, field: str) -> str:
    return re.search(rf'id="error-{field}"[^>]*>(.*?)</', page.content.decode(), re.S)[1]


def test_a_signed_out_visitor_sees_the_team_a_sign_up_form_and_a_sign_in_link_back_here(link):
    response = Client().get(link)
    page = response.content.decode()
    assert response.status_code == 200 and "Join team lab" in page and "<strong>viewer</strong>" in page
    assert 'id="sign-up"' in page and 'name="password2"' in page
    assert f'href="/accounts/login/?next={link}"' in page
    assert not Invitation.objects.get().accepted_at  # opening spends nothing


def test_creating_an_account_signs_the_visitor_in_and_joins_the_team_in_one_post(link, django_user_model):
    client = Client()
    response = client.post(link, GOOD)
    team = Invitation.objects.get().team
    assert response.status_code == 302 and response["Location"] == f"/teams/{team.pk}/"
    user = django_user_model.objects.get(username="newcomer")
    assert user.email == "new@example.org" and user.check_password("a long enough pass")
    assert Membership.objects.get(team=team, user=user).role == "viewer"
    assert Invitation.objects.get().accepted_by == user
    assert client.get(f"/teams/{team.pk}/").status_code == 200  # signed in as the new user


def test_the_email_is_optional(link, django_user_model):
    assert Client().post(link, {**GOOD, "email": ""}).status_code == 302
    assert django_user_model.objects.get(username="newcomer").email == ""


@pytest.mark.parametrize("change, field, said", [
    ({"username": "ada"}, "username", "already exists"),
    ({"username": ""}, "username", "required"),
    ({"password2": "another long pass"}, "password2", "didn"),
    ({"password1": "short", "password2": "short"}, "password2", "too short"),
    ({"email": "not-an-email"}, "email", "valid email"),
])
def test_a_bad_field_is_named_and_nothing_is_created_or_spent(link, django_user_model, change, field, said):
    users = django_user_model.objects.count()
    response = Client().post(link, {**GOOD, **change})
    assert response.status_code == 400 and said in field_error(response, field)
    assert django_user_model.objects.count() == users and Invitation.objects.get().accepted_at is None


def test_a_spent_link_creates_no_account(link, django_user_model):
    assert Client().post(link, GOOD).status_code == 302
    response = Client().post(link, {**GOOD, "username": "second"})
    assert response.status_code == 404 and escape(Invitation.UNUSABLE) in response.content.decode()
    assert not django_user_model.objects.filter(username="second").exists()


def test_bad_links_read_alike_signed_out_or_in(link, django_user_model):
    Invitation.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    pages = [Client().get(link), Client().post(link, GOOD), Client().get("/teams/join/made-up-key/"),
             signed_in(django_user_model, "ada").get(link)]
    assert {p.status_code for p in pages} == {404}
    said = {re.search(r'<section class="card" id="join">.*?</section>', p.content.decode(), re.S)[0] for p in pages}
    assert len(said) == 1 and 'id="sign-up"' not in said.pop()
    assert not django_user_model.objects.filter(username="newcomer").exists()
