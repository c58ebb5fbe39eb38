"""Joining a team by invitation, in headless Chromium against the live stack: the admin makes a link on the team
page, the invited person opens it signed in as themself, sees the team and role, and joins by confirming."""
import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from tests.e2e.helpers import sign_in
from tests.factories import team_of
from webapp.accounts.models import Membership

pytestmark = pytest.mark.e2e


def test_an_admin_invites_and_the_person_joins_in_the_browser(live_stack, live_user, session_key, browser_page):
    page = browser_page
    team = team_of(live_user)  # grace is its admin
    newcomer = get_user_model().objects.create_user(username="newcomer-<i>", password="pw-for-e2e-2")
    sign_in(page, live_stack, session_key)
    page.goto(live_stack.url + f"/teams/{team.pk}/")
    page.select_option("#invite select[name=role]", "viewer")
    page.click("#invite button[type=submit]")
    link = page.input_value("#invitation-link input")
    assert link.startswith(live_stack.url + "/teams/join/")

    page.context.clear_cookies()  # the invited person, on their own session
    client = Client()
    client.force_login(newcomer)
    page.context.add_cookies([{"name": "sessionid", "value": client.cookies["sessionid"].value, "url": live_stack.url}])
    page.goto(link)
    assert page.inner_text("#join h1") == f"Join team {team.name}"
    assert "viewer" in page.inner_text("#join") and "newcomer-<i>" in page.inner_text("#join")  # text, not markup
    assert not Membership.objects.filter(user=newcomer).exists()
    page.click("#join button[type=submit]")
    page.wait_for_url(live_stack.url + f"/teams/{team.pk}/")
    assert page.is_visible('#members tr[data-username="newcomer-<i>"]')
    assert Membership.objects.get(user=newcomer, team=team).role == "viewer"
    page.goto(link)  # spent
    assert "not valid" in page.inner_text("#join")
