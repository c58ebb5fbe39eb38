"""A long run's page opens on thinned series (min/max buckets) and a chart the user zooms into
reads its every point; a board of many points draws its charts as they come into view."""

import pytest

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import make_prompt_set
from webapp.runs.models import Run
from webapp.runs.views import RUN_PAGE_MAX_POINTS
from webapp.runs.ingestion import ingest_events

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]

T0 = 1_700_000_000.0


def long_log(steps, names):
    # a spike at step 501: thinning must keep it
    return [{"seq": n, "time": T0 + s, "type": "metrics", "step": s,
             "values": {name: (50.0 if s == 501 else 1.0 + (s % 7) / 10) for name in names}}
            for n, s in enumerate(range(1, steps + 1))]


def test_a_thinned_chart_keeps_its_spike_and_reads_every_point_once_zoomed(live_stack, live_user, session_key,
                                                                          browser_page):
    page = browser_page
    run = Run.objects.create(name="long", method="ttrl", prompt_set=make_prompt_set(live_user), max_steps=1200,
                             created_by=live_user, state=Run.SUCCEEDED)
    off_loop(ingest_events, run, long_log(1200, ["entropy", "kl"]))
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function(f"() => document.getElementById('chart-entropy').dataset.points === '{RUN_PAGE_MAX_POINTS}'")
    assert page.evaluate("() => Math.max(...document.getElementById('chart-entropy').data[0].y)") == 50.0

    page.evaluate("() => Plotly.relayout(document.getElementById('chart-entropy'), {'xaxis.range[0]': 400, 'xaxis.range[1]': 600})")
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '1200'")
    zoomed = page.evaluate("() => document.getElementById('chart-entropy')._fullLayout.xaxis.range.slice()")
    assert zoomed == [400, 600]  # the zoom survives the redraw with every point
    assert page.evaluate("() => document.getElementById('chart-kl').dataset.points") == str(RUN_PAGE_MAX_POINTS)


def test_a_board_of_many_points_draws_the_charts_below_the_fold_when_scrolled_to(live_stack, live_user, session_key,
                                                                                 browser_page):
    page = browser_page
    names = [f"extra/m{i:02d}" for i in range(24)]
    run = Run.objects.create(name="wide", method="ttrl", prompt_set=make_prompt_set(live_user), max_steps=250,
                             created_by=live_user, state=Run.SUCCEEDED)
    off_loop(ingest_events, run, long_log(250, names))  # 6,000 points: more than a board draws at once
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.querySelectorAll('#charts .chart').length === 24")
    first, last = page.locator("[data-metric='extra/m00']"), page.locator("[data-metric='extra/m23']")
    first.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector(\"[data-metric='extra/m00']\").dataset.points === '250'")
    assert last.get_attribute("data-points") == "0"  # not drawn while far below the viewport
    last.scroll_into_view_if_needed()
    page.wait_for_function("() => document.querySelector(\"[data-metric='extra/m23']\").dataset.points === '250'")
