"""Joining a team by invitation (webapp/accounts/models.py::Invitation, /teams/join/<key>/): an admin makes a link
that is shown once, and the person it is for accepts it signed in as themself. No admin can put a user in a team
or learn which usernames exist (docs/security.md)."""
import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone
from django.utils.html import escape

from tests.factories import make_team, signed_in
from webapp.accounts.models import Invitation, Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(django_user_model):
    team = make_team("lab", ada="admin", max="member")
    django_user_model.objects.create_user(username="newcomer")
    django_user_model.objects.create_user(username="second")
    return team


def invite(client, team, role="member") -> str:
    """The link the team page shows after an admin asks for one."""
    page = client.post(f"/teams/{team.pk}/", {"action": "invite", "role": role}).content.decode()
    return re.search(r'id="invitation-link">.*?value="([^"]+)"', page)[1]


def path_of(link: str) -> str:
    return link.split("://", 1)[1].split("/", 1)[1].join(["/", ""])


def test_an_admin_makes_a_link_that_is_shown_once_and_stored_only_as_a_digest(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    link = invite(ada, team, role="viewer")
    key = link.rstrip("/").rsplit("/", 1)[1]
    assert link.startswith("http://testserver/teams/join/") and len(key) >= 32
    stored = Invitation.objects.get()
    assert stored.role == "viewer" and stored.created_by.username == "ada" and key not in stored.digest
    later = ada.get(f"/teams/{team.pk}/").content.decode()
    assert key not in later and 'id="invitations"' in later and "viewer" in later


def test_the_invited_person_sees_the_team_and_role_and_joins_only_by_confirming(team, django_user_model):
    link = invite(signed_in(django_user_model, "ada"), team, role="viewer")
    newcomer = signed_in(django_user_model, "newcomer")
    page = newcomer.get(path_of(link)).content.decode()
    assert "Join team lab" in page and "<strong>viewer</strong>" in page and "by ada" in page
    assert not Membership.objects.filter(user__username="newcomer").exists()  # opening a link spends nothing
    response = newcomer.post(path_of(link))
    assert response.status_code == 302 and response["Location"] == f"/teams/{team.pk}/"
    assert Membership.objects.get(team=team, user__username="newcomer").role == "viewer"
    spent = Invitation.objects.get()
    assert spent.accepted_by.username == "newcomer" and spent.accepted_at is not None


def test_a_link_works_once(team, django_user_model):
    link = invite(signed_in(django_user_model, "ada"), team)
    assert signed_in(django_user_model, "newcomer").post(path_of(link)).status_code == 302
    second = signed_in(django_user_model, "second")
    for response in (second.get(path_of(link)), second.post(path_of(link))):
        assert response.status_code == 404 and escape(Invitation.UNUSABLE) in response.content.decode()
    assert not Membership.objects.filter(user__username="second").exists()


def test_a_used_revoked_expired_or_made_up_link_reads_alike(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    revoked, expired = invite(ada, team), invite(ada, team)
    pending = Invitation.objects.order_by("created_at")
    ada.post(f"/teams/{team.pk}/", {"action": "revoke_invitation", "invitation": pending[0].pk})
    Invitation.objects.filter(pk=pending[1].pk).update(expires_at=timezone.now() - timedelta(seconds=1))
    newcomer = signed_in(django_user_model, "newcomer")
    pages = [newcomer.post(path) for path in (path_of(revoked), path_of(expired), "/teams/join/made-up-key/")]
    assert {p.status_code for p in pages} == {404}
    said = [re.search(r'<section class="card" id="join">.*?</section>', p.content.decode(), re.S)[0] for p in pages]
    assert len(set(said)) == 1 and escape(Invitation.UNUSABLE) in said[0]
    assert not Membership.objects.filter(user__username="newcomer").exists()
    assert 'id="invitations"' not in ada.get(f"/teams/{team.pk}/").content.decode()  # nothing pending is listed


def test_a_member_who_opens_a_link_keeps_their_role_and_leaves_it_unspent(team, django_user_model):
    link = invite(signed_in(django_user_model, "ada"), team, role="viewer")
    assert "already in lab" in signed_in(django_user_model, "max").get(path_of(link)).content.decode()
    signed_in(django_user_model, "max").post(path_of(link))
    assert Membership.objects.get(team=team, user__username="max").role == "member"
    assert Invitation.objects.get().accepted_at is None


def test_a_signed_out_visitor_with_an_account_signs_in_and_comes_back_to_the_link(team, django_user_model):
    link = invite(signed_in(django_user_model, "ada"), team)
    user = django_user_model.objects.get(username="newcomer")
    user.set_password("newcomer's password")
    user.save()
    visitor = Client()
    assert f'href="/accounts/login/?next={path_of(link)}"' in visitor.get(path_of(link)).content.decode()
    response = visitor.post("/accounts/login/", {"username": "newcomer", "password": "newcomer's password",
                                                 "next": path_of(link)})
    assert response.status_code == 302 and response["Location"] == path_of(link)
    assert "Signed in as <strong>newcomer</strong>" in visitor.get(path_of(link)).content.decode()


def test_only_admins_make_or_revoke_invitations(team, django_user_model):
    max_client = signed_in(django_user_model, "max")
    assert max_client.post(f"/teams/{team.pk}/", {"action": "invite", "role": "admin"}).status_code == 403
    assert not Invitation.objects.exists()
    invite(signed_in(django_user_model, "ada"), team)
    max_client.post(f"/teams/{team.pk}/", {"action": "revoke_invitation", "invitation": Invitation.objects.get().pk})
    assert Invitation.objects.get().revoked_at is None
    assert 'id="invite"' not in max_client.get(f"/teams/{team.pk}/").content.decode()


def test_an_admin_can_no_longer_add_a_username_directly(team, django_user_model):
    response = signed_in(django_user_model, "ada").post(
        f"/teams/{team.pk}/", {"action": "add_member", "username": "newcomer", "role": "admin"})
    assert response.status_code == 400 and "unknown action" in response.content.decode()
    assert not Membership.objects.filter(user__username="newcomer").exists()
    assert "no user named" not in response.content.decode()  # nor learn which usernames exist


@pytest.mark.parametrize("change", ["removed", "demoted", "deactivated"])
def test_an_admin_who_loses_the_role_cannot_rejoin_through_a_link_they_made(team, django_user_model, change):
    """Ada made herself an admin link, then lost her admin role (or her place, or her account): the link she kept
    would bring her back as an admin."""
    make_team("lab", grace="admin")
    ada = signed_in(django_user_model, "ada")
    link = invite(ada, team, role="admin")
    own = Membership.objects.get(team=team, user__username="ada")
    grace = signed_in(django_user_model, "grace")
    if change == "removed":
        grace.post(f"/teams/{team.pk}/", {"action": "remove_member", "membership": own.pk})
    elif change == "demoted":
        grace.post(f"/teams/{team.pk}/", {"action": "set_role", "membership": own.pk, "role": "viewer"})
    else:
        django_user_model.objects.filter(username="ada").update(is_active=False)
        ada = signed_in(django_user_model, "newcomer")  # the deactivated admin's link, used by someone else
    assert not Invitation.pending().filter(team=team).exists() or change == "deactivated"
    response = ada.post(path_of(link))
    assert response.status_code == 404 and escape(Invitation.UNUSABLE) in response.content.decode()
    assert Invitation.objects.get(role="admin").accepted_at is None
    assert set(Membership.objects.filter(team=team, role="admin").values_list("user__username", flat=True)) == (
        {"grace", "ada"} if change == "deactivated" else {"grace"})


def test_links_made_by_an_admin_who_stays_one_keep_working(team, django_user_model):
    make_team("lab", grace="admin")
    link = invite(signed_in(django_user_model, "ada"), team)
    max_membership = Membership.objects.get(team=team, user__username="max")
    signed_in(django_user_model, "grace").post(f"/teams/{team.pk}/", {"action": "set_role",
                                                                      "membership": max_membership.pk, "role": "viewer"})
    assert signed_in(django_user_model, "newcomer").post(path_of(link)).status_code == 302
