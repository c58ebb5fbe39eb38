"""The team page: members and roles for everyone, editable by admins only; a team keeps at least one admin.
Its webhooks and alert rules are the alerts app's page (tests/alerts/test_team_alert_settings.py)."""
import pytest

from tests.factories import make_team, signed_in
from webapp.accounts.models import Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(django_user_model):
    team = make_team("lab", ada="admin", max="member")
    django_user_model.objects.create_user(username="newcomer")
    return team


def test_admins_see_a_link_to_webhooks_and_rules_and_members_do_not(team, django_user_model):
    admin_page = signed_in(django_user_model, "ada").get(f"/teams/{team.pk}/").content.decode()
    assert f'href="/teams/{team.pk}/alert-settings/"' in admin_page and "Alerts (0 not acknowledged)" in admin_page
    member_page = signed_in(django_user_model, "max").get(f"/teams/{team.pk}/").content.decode()
    assert 'id="members"' in member_page and "alert-settings" not in member_page


def test_an_admin_changes_a_role_and_removes_a_member(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    max_membership = Membership.objects.get(team=team, user__username="max")
    ada.post(f"/teams/{team.pk}/", {"action": "set_role", "membership": max_membership.pk, "role": "admin"})
    assert Membership.objects.get(pk=max_membership.pk).role == "admin"
    ada.post(f"/teams/{team.pk}/", {"action": "remove_member", "membership": max_membership.pk})
    assert not Membership.objects.filter(pk=max_membership.pk).exists()


def test_the_last_admin_cannot_be_removed_or_demoted(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    own = Membership.objects.get(team=team, user__username="ada")
    response = ada.post(f"/teams/{team.pk}/", {"action": "set_role", "membership": own.pk, "role": "viewer"})
    assert response.status_code == 400 and "at least one admin" in response.content.decode()
    ada.post(f"/teams/{team.pk}/", {"action": "remove_member", "membership": own.pk})
    assert Membership.objects.get(pk=own.pk).role == "admin"


def test_members_cannot_change_the_team(team, django_user_model):
    max_membership = Membership.objects.get(team=team, user__username="max")
    response = signed_in(django_user_model, "max").post(
        f"/teams/{team.pk}/", {"action": "set_role", "membership": max_membership.pk, "role": "admin"})
    assert response.status_code == 403 and Membership.objects.get(pk=max_membership.pk).role == "member"


def test_outsiders_get_404(team, django_user_model):
    make_team("other", bob="admin")
    assert signed_in(django_user_model, "bob").get(f"/teams/{team.pk}/").status_code == 404
    assert signed_in(django_user_model, "bob").post(f"/teams/{team.pk}/", {"action": "invite"}).status_code == 404


def test_the_switcher_changes_the_current_team(team, django_user_model):
    other = make_team("zeta", ada="viewer")
    ada = signed_in(django_user_model, "ada")
    ada.post("/teams/switch/", {"team": other.pk, "next": "/prompt-sets/"})
    assert "of team zeta" in ada.get("/prompt-sets/").content.decode()
    assert ada.post("/teams/switch/", {"team": 999999}).status_code == 404


def test_no_one_sees_another_members_email_on_the_page_or_in_the_api(team, django_user_model):
    for username in ("ada", "max"):
        django_user_model.objects.filter(username=username).update(email=f"{username}@private.example")
    for viewer, other in (("ada", "max"), ("max", "ada")):  # an admin and a member
        client = signed_in(django_user_model, viewer)
        page = client.get(f"/teams/{team.pk}/").content.decode()
        assert f"{other}@private.example" not in page and f"{viewer}@private.example" in page  # your own only
        members = client.get(f"/api/teams/{team.pk}").json()["members"]
        assert {m["user"]: m.get("email") for m in members} == {viewer: f"{viewer}@private.example", other: None}


@pytest.mark.django_db(transaction=True)
def test_two_admins_changes_at_once_still_leave_the_team_an_admin(team, django_user_model, monkeypatch):
    """Ada removes the other admin while demoting herself, in two requests at once: each counted the admins before
    the other had committed, saw one left, and the team ended with none."""
    import threading

    from django.db import connection

    if connection.vendor == "sqlite":
        pytest.skip("SQLite lets one transaction write at a time: the two changes cannot interleave there")
    Membership.objects.filter(team=team, user__username="max").update(role="admin")
    ada_membership = Membership.objects.get(team=team, user__username="ada")
    max_membership = Membership.objects.get(team=team, user__username="max")
    both_changed = threading.Barrier(2, timeout=3)  # each waits, after its change, for the other's

    def after(method):
        def changed(self, *args, **kwargs):
            result = method(self, *args, **kwargs)
            try:
                both_changed.wait()
            except threading.BrokenBarrierError:  # the other request waits for this one to end first
                pass
            return result
        return changed

    monkeypatch.setattr(Membership, "save", after(Membership.save))
    monkeypatch.setattr(Membership, "delete", after(Membership.delete))
    answers = []

    def post(data):
        try:
            answers.append(signed_in(django_user_model, "ada").post(f"/teams/{team.pk}/", data).status_code)
        finally:
            connection.close()

    requests = [threading.Thread(target=post, args=(data,)) for data in (
        {"action": "remove_member", "membership": max_membership.pk},
        {"action": "set_role", "membership": ada_membership.pk, "role": "member"})]
    for request in requests:
        request.start()
    for request in requests:
        request.join(30)
    assert sorted(answers) == [302, 400]  # one change is made, the other refused as leaving no admin
    assert Membership.objects.filter(team=team, role="admin").exists()
