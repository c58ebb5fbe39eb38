"""The team's alert pages in headless Chromium against the real stack (daphne, the alerts worker): acknowledging
several alerts at once on /teams/{id}/alerts/, and sending a webhook a test from /teams/{id}/alert-settings/, its
delivery listed in a table that stays inside its card."""
import pytest

from tests.alerts.receiver import Receiver
from tests.e2e.helpers import sign_in
from tests.factories import make_prompt_set, team_of
from tests.waiting import wait_until
from webapp.alerts.models import Alert, Webhook, WebhookDelivery
from webapp.runs.models import Run

pytestmark = pytest.mark.e2e


@pytest.fixture
def team(live_user):
    return team_of(live_user)  # grace is its admin, so she may act on both pages


@pytest.fixture
def alerts(team, live_user):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(live_user, team=team), max_steps=9,
                             created_by=live_user)

    def alert(rule, state="open"):
        return Alert.objects.create(team=team, run=run, rule=rule, message=f"{rule} seen", step=3, last_step=3,
                                    state=state)

    return [alert("entropy_collapse"), alert("majority_lock_in"), alert("degeneration"),
            alert("length_collapse", state="resolved")]


def test_a_member_ticks_several_alerts_and_acknowledges_them_with_one_button(
        live_stack, transactional_db, browser_page, session_key, team, alerts):
    page = browser_page
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/teams/{team.pk}/alerts/")
    first, second, third, _ = alerts
    button = page.locator("#acknowledge-selected")
    assert button.is_disabled() and page.locator("#alerts-table input.pick").count() == 3  # the resolved one is off

    page.check(f"input.pick[value='{first.pk}']")
    page.check(f"input.pick[value='{second.pk}']")
    assert button.text_content() == "Acknowledge selected (2)"
    button.click()
    for alert in (first, second):
        page.wait_for_selector(f"#alerts-table tr[data-alert-id='{alert.pk}'][data-state=acknowledged]")
    assert page.locator(f"#alerts-table tr[data-alert-id='{third.pk}'][data-state=open] input.pick").count() == 1
    assert button.is_disabled()
    assert {a.pk: a.state for a in Alert.objects.filter(pk__in=[first.pk, second.pk, third.pk])} == {
        first.pk: "acknowledged", second.pk: "acknowledged", third.pk: "open"}
    assert Alert.objects.get(pk=first.pk).acknowledged_by.username == "grace"

    # the third resolves while it is ticked on a page that has not heard yet: nothing is acknowledged and the page
    # says which alert stood in the way
    page.check("#select-all")
    Alert.objects.filter(pk=third.pk).update(state=Alert.RESOLVED)
    button.click()
    page.wait_for_selector("#bulk-error:not([hidden])")
    assert page.text_content("#bulk-error") == (f"alert {third.pk} is already resolved: only alerts not yet resolved "
                                                "or closed can be acknowledged; none was")


def test_an_alert_whose_run_ends_stays_listed_until_a_member_acknowledges_it(
        live_stack, transactional_db, browser_page, session_key, team, alerts, live_user):
    # issue 36, item 6: the overnight collapse of a run that finished before morning was only under "all"
    from tests.e2e.helpers import off_loop
    from webapp.runs import lifecycle

    page = browser_page
    first, second, _, _ = alerts
    Run.objects.filter(pk=first.run_id).update(state=Run.RUNNING)
    Alert.objects.filter(pk=second.pk).update(state=Alert.ACKNOWLEDGED)
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/teams/{team.pk}/alerts/")  # the default view: current alerts
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    ended = f"#alerts-table tr[data-alert-id='{first.pk}']"
    assert page.get_attribute(ended, "data-state") == "open"

    off_loop(lifecycle.finish, Run.objects.get(pk=first.run_id), Run.SUCCEEDED, "", 0, "")
    page.wait_for_selector(f"{ended}[data-state=ended]")  # live: still listed, said so
    assert page.locator(ended).locator("td").nth(6).text_content() == "run ended, not acknowledged"
    # the acknowledged one was seen already: it closes with its run and leaves the current view
    page.wait_for_selector(f"#alerts-table tr[data-alert-id='{second.pk}']", state="detached")

    page.check(f"{ended} input.pick")
    page.click("#acknowledge-selected")
    page.wait_for_selector(ended, state="detached")  # closed: off the current view, live
    closed = Alert.objects.get(pk=first.pk)
    assert closed.state == Alert.CLOSED and closed.acknowledged_by.username == "grace"
    page.goto(f"{live_stack.url}/teams/{team.pk}/alerts/?state=closed")
    assert page.locator(ended).locator("td").nth(6).text_content() == "closed with its run, acknowledged by grace"


def test_a_deleted_runs_alerts_leave_an_open_alerts_page(live_stack, transactional_db, browser_page, session_key, team,
                                                         alerts, live_user):
    from tests.e2e.helpers import off_loop
    from webapp.runs.actions import delete_run

    page = browser_page
    other = Run.objects.create(name="kept", method="ttrl", prompt_set=make_prompt_set(live_user, team=team),
                               max_steps=9, created_by=live_user, state=Run.SUCCEEDED)
    kept = Alert.objects.create(team=team, run=other, rule="entropy_collapse", message="seen", step=3, last_step=3,
                                state=Alert.CLOSED)
    Run.objects.filter(pk=alerts[0].run_id).update(state=Run.SUCCEEDED)
    Alert.objects.filter(run_id=alerts[0].run_id).update(state=Alert.CLOSED)
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/teams/{team.pk}/alerts/?state=all")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    assert page.locator("#alerts-table tbody tr[data-alert-id]").count() == 5
    off_loop(delete_run, Run.objects.get(pk=alerts[0].run_id), live_user)
    page.wait_for_function("() => document.querySelectorAll('#alerts-table tbody tr[data-alert-id]').length === 1")
    assert page.get_attribute("#alerts-table tbody tr[data-alert-id]", "data-alert-id") == str(kept.pk)


def test_an_admin_sends_a_webhook_a_test_and_sees_it_delivered_in_a_table_that_fits_its_card(
        live_stack, transactional_db, browser_page, session_key, team):
    page = browser_page
    sign_in(page, live_stack, session_key)
    page.set_viewport_size({"width": 1024, "height": 800})
    # the same page open on a phone before the test is sent: its table follows the delivery without a reload
    phone = page.context.browser.new_page(viewport={"width": 390, "height": 800})
    sign_in(phone, live_stack, session_key)
    with Receiver() as receiver:
        hook = Webhook.objects.create(team=team, url=receiver.url)
        # an earlier failure with a long address and reason, the kind that used to widen the table past its card
        long_hook = Webhook.objects.create(team=team, url="https://hooks.example.org/services/" + "T0ABCDEF/" * 12)
        WebhookDelivery.objects.create(webhook=long_hook, event="opened", status="failed", attempts=5,
                                       last_error="the endpoint closed the connection without answering " * 3)
        phone.goto(f"{live_stack.url}/teams/{team.pk}/alert-settings/")
        phone.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
        assert phone.locator("#deliveries tr.delivery-delivered").count() == 0
        page.goto(f"{live_stack.url}/teams/{team.pk}/alert-settings/")
        page.click(f"#webhooks tr[data-webhook='{hook.pk}'] button.send-test")
        page.wait_for_selector("text=test sent to " + receiver.url)
        wait_until(lambda: receiver.received, 60, every=0.2, what="the alerts worker to deliver the test")
    body = receiver.received[0]["body"]
    assert body["event"] == "test" and body["text"].endswith("sent by grace: this webhook works")

    # both pages, the sender's loaded while the delivery was pending, show it delivered without a reload
    for shown in (phone, page):
        shown.wait_for_selector("#deliveries tr.delivery-delivered", timeout=30_000)
        assert shown.locator("#deliveries tbody tr").count() == 2
    assert phone.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    row = page.locator("#deliveries tr.delivery-delivered")
    assert row.locator("td").nth(2).text_content() == "test" and row.locator("td.reason").text_content() == "HTTP 200"
    failed = page.locator("#deliveries tr.delivery-failed td.reason")
    assert failed.text_content().endswith("…") and len(failed.text_content()) <= 80
    fits = page.evaluate("""() => {
        const table = document.getElementById("deliveries"), card = table.closest(".card");
        return {table: table.getBoundingClientRect().right, card: card.getBoundingClientRect().right,
                scroll: document.documentElement.scrollWidth, view: document.documentElement.clientWidth};
    }""")
    assert fits["table"] <= fits["card"] and fits["scroll"] <= fits["view"], fits
