"""Times in the reader's zone, one way on every page (issue 40), in headless Chromium set to Tokyo's zone against the
live daphne: the run page's start and history, the run list's relative times, the alerts page's rows; the full
time in both zones on hover."""
import re

import pytest

from tests.e2e.helpers import off_loop
from tests.factories import make_prompt_set, team_of
from webapp.alerts.models import Alert
from webapp.runs import lifecycle
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]

LOCAL = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d(:\d\d)? GMT\+9$")  # Tokyo, as Chromium's en-US names the zone


@pytest.mark.parametrize("width", [1400, 390])
def test_every_page_shows_times_in_the_readers_zone_with_the_full_time_on_hover(
        live_stack, live_user, session_key, browser_page, width):
    context = browser_page.context.browser.new_context(timezone_id="Asia/Tokyo", locale="en-US", viewport={"width": width, "height": 900})
    context.add_cookies([{"name": "sessionid", "value": session_key, "url": live_stack.url}])
    page = context.new_page()
    team = team_of(live_user)
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(live_user, team=team), max_steps=3,
                             created_by=live_user, team=team)
    off_loop(lifecycle.claim, run.pk)
    Alert.objects.create(team=team, run=run, rule="entropy_collapse", message="m", step=1, last_step=1)
    try:
        page.goto(f"{live_stack.url}/runs/{run.pk}/")
        started = page.locator("#started-at time.when")
        assert LOCAL.match(started.inner_text()) and started.inner_text().count(":") == 2
        title = started.get_attribute("title")
        assert title.startswith(started.inner_text()) and title.endswith(" UTC)")
        # the history's rows, the server's and those the page draws itself alike
        history = page.locator("#history-rows time.when").all_inner_texts()
        assert history and all(LOCAL.match(t) for t in history)

        page.goto(live_stack.url + "/")
        created = page.locator(f'#runs tr[data-run-id="{run.pk}"] .created-cell time.when')
        assert created.inner_text() == "just now" and LOCAL.match(created.get_attribute("title").split(" (")[0])

        page.goto(f"{live_stack.url}/teams/{team.pk}/alerts/")
        page.wait_for_selector("#alerts-table tbody tr[data-alert-id]")
        assert all(LOCAL.match(t) for t in page.locator("#alerts-table time.when").all_inner_texts())
        assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
    finally:
        context.close()
