"""People, in headless Chromium against the live stack: an admin invites a colleague who has no account, the
colleague opens the link in their own (signed-out) browser, creates an account and lands in the team; and a user
makes an API token on their account page (shown once, it works against the API), then revokes it (401)."""
import pytest
import requests
from django.contrib.auth import get_user_model

from tests.e2e.helpers import sign_in
from tests.factories import team_of
from webapp.accounts.models import ApiToken, Membership

pytestmark = pytest.mark.e2e


def test_a_colleague_without_an_account_joins_through_the_link(live_stack, live_user, session_key, browser_page):
    page = browser_page
    team = team_of(live_user)  # grace is its admin
    sign_in(page, live_stack, session_key)
    page.goto(live_stack.url + f"/teams/{team.pk}/")
    page.click("#invite button[type=submit]")  # role: member
    link = page.input_value("#invitation-link input")

    colleague = page.context.browser.new_context().new_page()  # another browser, signed out
    colleague.set_default_timeout(30_000)
    colleague.goto(link)
    assert colleague.inner_text("#join h1") == f"Join team {team.name}"
    assert colleague.get_attribute("#sign-in-link", "href") == "/accounts/login/?next=" + link.split(live_stack.url, 1)[1]
    colleague.fill("#sign-up input[name=username]", "grace")  # taken: named on its field
    colleague.fill("#sign-up input[name=password1]", "colleague's password")
    colleague.fill("#sign-up input[name=password2]", "colleague's password")
    colleague.click("#sign-up button[type=submit]")
    assert "already exists" in colleague.inner_text("#error-username")
    colleague.fill("#sign-up input[name=username]", "hopper")
    colleague.fill("#sign-up input[name=password1]", "colleague's password")
    colleague.fill("#sign-up input[name=password2]", "colleague's password")
    colleague.fill("#sign-up input[name=email]", "hopper@example.org")
    colleague.click("#sign-up button[type=submit]")
    colleague.wait_for_url(live_stack.url + f"/teams/{team.pk}/")
    assert colleague.is_visible('#members tr[data-username="hopper"]')
    assert colleague.inner_text("#account-link") == "hopper"
    hopper = get_user_model().objects.get(username="hopper")
    assert Membership.objects.get(user=hopper, team=team).role == "member" and hopper.email == "hopper@example.org"


def test_a_token_made_on_the_account_page_works_until_it_is_revoked(live_stack, live_user, session_key, browser_page):
    page = browser_page
    sign_in(page, live_stack, session_key)
    page.goto(live_stack.url + "/runs/")
    page.click("#account-link")
    page.wait_for_url(live_stack.url + "/account/")
    page.fill("#token-form input[name=name]", "laptop <script>")
    page.click("#token-form button[type=submit]")
    key = page.input_value("#new-token input")
    assert "laptop <script>" in page.inner_text("#new-token")  # text, not markup
    api = live_stack.url + "/api/teams"
    assert requests.get(api, headers={"Authorization": f"Token {key}"}, timeout=30).status_code == 200

    page.goto(live_stack.url + "/account/")
    assert key not in page.content() and page.inner_text("#tokens tbody tr td >> nth=0") == "laptop <script>"
    assert page.inner_text("#tokens tbody tr td >> nth=2") != "never"  # the API request was noted
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#tokens button[type=submit]")
    page.wait_for_selector("#no-tokens")
    assert not ApiToken.objects.filter(user=live_user).exists()
    assert requests.get(api, headers={"Authorization": f"Token {key}"}, timeout=30).status_code == 401
