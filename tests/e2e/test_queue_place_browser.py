"""A queued run says where it waits (issue 40), in headless Chromium against the live daphne and worker: its place in
its worker queue, the run in front and about how long, on its page and in the run list, moved when the run in front
ends. No training: the lifecycle functions write to the test database the server reads and push through Redis."""
from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import make_prompt_set
from webapp.runs import lifecycle
from webapp.runs.models import Run, RunTransition

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def waiting_run(user, name):
    """A queued run on the live worker's queue with no task sent: it stays queued until this test moves it."""
    return Run.objects.create(name=name, method="ttrl", prompt_set=make_prompt_set(user, name=f"arith-{name}"),
                              max_steps=20, created_by=user, queue=settings.QUEUE_PREFIX + "cpu")


@pytest.mark.parametrize("width", [1400, 390])
def test_a_queued_run_says_where_it_waits_and_moves_up_when_the_run_in_front_ends(
        live_stack, live_user, session_key, browser_page, width):
    page = browser_page
    first, second = waiting_run(live_user, "first"), waiting_run(live_user, "second")
    off_loop(lifecycle.claim, first.pk)  # the live worker's one slot: 10 of its 20 steps trained in 5 minutes
    RunTransition.objects.filter(run=first, cause=RunTransition.CLAIMED).update(at=timezone.now() - timedelta(minutes=5))
    Run.objects.filter(pk=first.pk).update(last_step=10)
    sign_in(page, live_stack, session_key)
    page.set_viewport_size({"width": width, "height": 900})
    listing = page.context.browser.new_page(viewport={"width": width, "height": 900})
    sign_in(listing, live_stack, session_key)

    waiting = f"1st in the cpu queue, behind run {first.pk}, ~5 min"
    page.goto(f"{live_stack.url}/runs/{second.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    assert page.is_visible("#queue-place") and page.inner_text("#queue-place") == waiting
    listing.goto(live_stack.url + "/")
    listing.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    place = f'#runs tr[data-run-id="{second.pk}"] [data-field="queue-place"]'
    assert listing.inner_text(place) == waiting
    assert listing.inner_text(f'#runs tr[data-run-id="{first.pk}"] [data-field="queue-place"]') == ""
    for shown in (page, listing):
        assert shown.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")

    if width != 1400:
        return  # the place moving is the same at any width; waiting for the page's 10 s re-read once is enough
    # The run in front ends: the list redraws its rows, the page reads its place again while it waits.
    off_loop(lifecycle.finish, Run.objects.get(pk=first.pk), Run.SUCCEEDED, "", 0, "")
    first_now = "1st in the cpu queue, starting within a minute"
    listing.wait_for_function(f"() => document.querySelector({place!r}).textContent === {first_now!r}")
    page.wait_for_function(f"() => document.getElementById('queue-place').textContent === {first_now!r}",
                           timeout=30_000)

    # A worker takes it: the place goes.
    off_loop(lifecycle.claim, second.pk)
    page.wait_for_function("() => document.getElementById('queue-place').hidden")
    listing.wait_for_function(f"() => document.querySelector({place!r}).textContent === ''")
