"""The run page's collapse forecast (issue 36, item 4), against the real stack: a running run's entropy falls 5% a step,
ingestion's engine opens entropy_collapse_forecast, and the page shows "collapse expected around step N (A–B at 80%)"
as the server says it, live, and drops it once the collapse comes and the forecast alert resolves."""
import math

import pytest

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import make_prompt_set
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def falling(first: int, last: int) -> list[dict]:
    """Steps first..last of a trainer's log whose entropy is 0.1·e^(−0.05 t) and whose policy moved: the forecast's
    worked example (tests/alerts/test_forecast.py), entropy_collapse's condition due at step 16."""
    return [{"seq": step, "time": 1_700_000_000.0 + step, "type": "metrics", "step": step,
             "values": {"entropy": 0.1 * math.exp(-0.05 * step), "kl": 0.01}} for step in range(first, last + 1)]


def test_the_forecast_line_follows_the_forecast_alert_live(live_stack, live_user, session_key, browser_page):
    page = browser_page
    run = Run.objects.create(name="falling", method="ttrl", prompt_set=make_prompt_set(live_user), max_steps=40,
                             created_by=live_user, state=Run.RUNNING)
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    assert page.is_hidden("#collapse-forecast")

    off_loop(ingest_events, run, falling(1, 8))  # eight steps: the fewest the fit takes
    page.wait_for_selector("#collapse-forecast", state="visible")
    assert page.inner_text("#collapse-forecast-text") == "collapse expected around step 16 (16–16 at 80%)"
    page.wait_for_selector('#alerts li[data-rule="entropy_collapse_forecast"][data-state="open"]')

    # the condition holds from step 16; the alert resolves after five quiet steps, at step 20
    off_loop(ingest_events, run, falling(9, 20))
    page.wait_for_selector("#collapse-forecast", state="hidden")
    page.wait_for_selector('#alerts li[data-rule="entropy_collapse_forecast"][data-state="resolved"]')
    page.reload()
    assert page.is_hidden("#collapse-forecast")
