"""Chart settings live in the page's address (issue 25): smoothing, log scale, x-axis and hidden series
changed on the run and compare pages are written to the URL, and that URL opened in a fresh browser
(no localStorage of its own) shows the same view."""
from urllib.parse import parse_qs, urlsplit

import pytest

from tests.e2e.helpers import off_loop, sign_in
from tests.e2e.test_run_page_browser import crafted_log, layout
from tests.factories import make_prompt_set
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def fresh_page(page, live_stack, session_key):
    """A page in a new browser context: the same user, none of the first page's localStorage."""
    context = page.context.browser.new_context()
    other = context.new_page()
    other.set_default_timeout(30_000)
    sign_in(other, live_stack, session_key)
    return other


def query(url: str) -> dict:
    return parse_qs(urlsplit(url).query)


def test_a_run_page_link_opens_with_the_same_chart_settings(live_stack, live_user, session_key, browser_page):
    page = browser_page
    run = Run.objects.create(name="linked", method="evol_rl", prompt_set=make_prompt_set(live_user), max_steps=3,
                             created_by=live_user, state=Run.SUCCEEDED)
    off_loop(ingest_events, run, crafted_log())
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '3'")
    assert urlsplit(page.url).query == ""  # the defaults say nothing

    page.check("#chart-controls input.log-y")
    page.select_option("#chart-controls select.x-mode", "time")
    page.evaluate("() => { const s = document.querySelector('#chart-controls input.smoothing'); s.value = '0.6';"
                  " s.dispatchEvent(new Event('input')); }")
    page.wait_for_function("() => document.getElementById('chart-entropy').data.length === 2")
    assert query(page.url) == {"smoothing": ["0.6"], "log": ["1"], "x": ["time"]}
    assert urlsplit(page.url).path == f"/runs/{run.pk}/"

    other = fresh_page(page, live_stack, session_key)
    other.goto(page.url)
    other.wait_for_function("() => { const d = document.getElementById('chart-entropy'); return d && d._fullLayout"
                            " && d.data.length === 2; }")
    assert layout(other, "#chart-entropy", "yaxis.type") == "log"
    assert layout(other, "#chart-entropy", "xaxis.title.text").startswith("elapsed")
    assert other.is_checked("#chart-controls input.log-y")
    assert other.input_value("#chart-controls select.x-mode") == "time"
    assert other.input_value("#chart-controls input.smoothing") == "0.6"
    assert other.inner_text("#chart-controls output.smoothing-value") == "0.60"

    # Back to the defaults: the address loses the settings again.
    other.uncheck("#chart-controls input.log-y")
    other.select_option("#chart-controls select.x-mode", "step")
    other.evaluate("() => { const s = document.querySelector('#chart-controls input.smoothing'); s.value = '0';"
                   " s.dispatchEvent(new Event('input')); }")
    other.wait_for_function("() => document.getElementById('chart-entropy').data.length === 1")
    assert urlsplit(other.url).query == ""


def test_a_series_hidden_on_the_compare_page_stays_hidden_on_every_chart_and_in_the_link(
        live_stack, live_user, session_key, browser_page):
    page = browser_page
    prompt_set = make_prompt_set(live_user)
    a = Run.objects.create(name="alpha", method="ttrl", prompt_set=prompt_set, max_steps=3, created_by=live_user,
                           state=Run.SUCCEEDED)
    b = Run.objects.create(name="<b>beta</b>", method="ttrl", prompt_set=prompt_set, max_steps=3, created_by=live_user,
                           state=Run.SUCCEEDED)
    off_loop(ingest_events, a, crafted_log(steps=3))
    off_loop(ingest_events, b, crafted_log(steps=3))
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/compare/?runs={a.pk},{b.pk}")
    page.wait_for_function("() => ['entropy', 'kl'].every(n => { const d = document.getElementById('chart-' + n);"
                           " return d && d._fullLayout && d.dataset.series === '2'; })")

    page.locator("#chart-entropy g.traces").nth(1).locator("rect.legendtoggle").click()  # beta's legend entry
    page.wait_for_function(f"() => document.getElementById('chart-kl').dataset.hidden === '{b.pk}'")
    visible = "() => ['entropy', 'kl'].map(n => document.getElementById('chart-' + n).data.map(t => t.visible))"
    assert page.evaluate(visible) == [[True, "legendonly"], [True, "legendonly"]]  # every chart, not only the clicked
    assert query(page.url) == {"runs": [f"{a.pk},{b.pk}"], "hide": [str(b.pk)]}

    other = fresh_page(page, live_stack, session_key)
    other.goto(page.url)
    other.wait_for_function("() => ['entropy', 'kl'].every(n => { const d = document.getElementById('chart-' + n);"
                            " return d && d._fullLayout && d.dataset.series === '2'; })")
    assert other.evaluate(visible) == [[True, "legendonly"], [True, "legendonly"]]

    # Its legend entry shows it again, everywhere.
    other.locator("#chart-kl g.traces").nth(1).locator("rect.legendtoggle").click()
    other.wait_for_function("() => document.getElementById('chart-entropy').dataset.hidden === ''")
    assert other.evaluate(visible) == [[True, True], [True, True]]
    assert query(other.url) == {"runs": [f"{a.pk},{b.pk}"]}
