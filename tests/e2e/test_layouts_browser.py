"""Pages a new user met at 1,400 and 390 px (issue 40, item 6), in headless Chromium against the live daphne: a long
run name on /compare/, the run page's tables and the menu on a phone, the heatmap's axes, and the charts' axes (whole
steps, no negative range for a metric that never goes below zero)."""
import pytest

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import event_log, make_prompt_set
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]

LONG_NAME = "grpo-qwen3-4b-base-math500-" + "ablation-of-the-novelty-weight-" * 3 + "seed-1234567"


def no_sideways_scroll(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def too_wide(page) -> list[str]:
    """The elements wider than their box (not those that scroll on purpose), for the failure's message."""
    return page.evaluate("""() => [...document.querySelectorAll('main *')].filter(e => e.scrollWidth > e.clientWidth + 2
        && getComputedStyle(e).overflowX !== 'auto').slice(0, 8).map(e => e.tagName + '#' + e.id + '.' + e.className
        + ' ' + e.scrollWidth + '/' + e.clientWidth)""")


def trained_run(user, name, steps=3, similarity=None):
    """A run with `steps` steps of metrics and groups (16 rollouts each, with a similarity matrix when given)."""
    run = Run.objects.create(name=name, method="evol_rl", prompt_set=make_prompt_set(user, name=f"set-{name[:20]}"),
                             max_steps=steps, created_by=user, state=Run.SUCCEEDED,
                             hyperparameters={"novelty_weight": 0.5, "temperature": 1.0})
    events = event_log(steps=steps, group_size=16)
    for event in events:
        if event["type"] == "group" and similarity is not None:
            event["similarity"] = similarity
    off_loop(ingest_events, run, events)
    return run


@pytest.mark.parametrize("width", [1400, 390])
def test_a_long_run_name_wraps_on_the_compare_page_instead_of_widening_it(live_stack, live_user, session_key,
                                                                         browser_page, width):
    page = browser_page
    long, short = trained_run(live_user, LONG_NAME), trained_run(live_user, "short")
    sign_in(page, live_stack, session_key)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_stack.url}/compare/?runs={long.pk},{short.pk}")
    page.wait_for_selector("#compare-runs")
    assert no_sideways_scroll(page), too_wide(page)


@pytest.mark.parametrize("width", [1400, 390])
def test_the_run_page_fits_the_window_and_its_axes_read_true(live_stack, live_user, session_key, browser_page, width):
    page = browser_page
    n = 16
    similarity = [[1.0 if i == j else 0.9 for j in range(n)] for i in range(n)]
    run = trained_run(live_user, LONG_NAME, steps=3, similarity=similarity)
    sign_in(page, live_stack, session_key)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_selector('[data-metric="entropy"] .main-svg')
    page.wait_for_function("() => document.getElementById('heatmap') && document.getElementById('heatmap')._fullLayout")
    for section in page.locator("details").all():  # the hyperparameters, alert rules and history unfolded
        section.evaluate("d => d.open = true")
    assert no_sideways_scroll(page), too_wide(page)
    if width == 390:
        assert page.evaluate("() => document.querySelector('header.topbar').getBoundingClientRect().height") <= 96
    # the heatmap's axes hold its 16 rollouts, not a range padded past them
    x_range, y_range = page.evaluate("""() => { const l = document.getElementById('heatmap')._fullLayout;
        return [l.xaxis.range, l.yaxis.range]; }""")
    assert x_range == [-0.5, n - 0.5] and sorted(y_range) == [-0.5, n - 0.5]
    # a 3-step run's step axis has whole steps, and entropy (never below zero) no negative range
    ticks, y_low = page.evaluate("""() => { const l = document.querySelector('[data-metric="entropy"]')._fullLayout;
        return [l.xaxis._vals.map(v => v.x), l.yaxis.range[0]]; }""")
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert y_low >= 0


@pytest.mark.parametrize("width", [1400, 390])
def test_the_run_list_keeps_a_long_name_readable_and_includes_archived_runs_when_asked(
        live_stack, live_user, session_key, browser_page, width):
    from django.utils import timezone

    page = browser_page
    long, archived = trained_run(live_user, LONG_NAME, steps=1), trained_run(live_user, "archived", steps=1)
    Run.objects.filter(pk=archived.pk).update(archived_at=timezone.now())
    sign_in(page, live_stack, session_key)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(live_stack.url + "/")
    page.wait_for_selector(f'#runs tr[data-run-id="{long.pk}"]')
    assert page.query_selector(f'#runs tr[data-run-id="{archived.pk}"]') is None
    assert no_sideways_scroll(page), too_wide(page)
    lines = page.evaluate(f"""() => {{ const row = document.querySelector('#runs tr[data-run-id="{long.pk}"]');
        const lines = c => Math.round(c.getBoundingClientRect().height / parseFloat(getComputedStyle(c).lineHeight));
        return [lines(row.querySelector('.run-name')), lines(row.querySelector('.created-cell time'))]; }}""")
    # the name wrapped into a few lines (it took 13 a word at a time), the time on one
    assert lines[0] <= (5 if width == 1400 else 9) and lines[1] == 1, lines
    page.check("#archived-filter")
    page.click("#run-filters button[type=submit]")
    page.wait_for_selector(f'#runs tr[data-run-id="{archived.pk}"] [data-field="archived"]')
    assert page.query_selector(f'#runs tr[data-run-id="{long.pk}"]') is not None


@pytest.mark.parametrize("width", [1400, 390])
def test_a_refused_webhook_keeps_its_url_and_names_the_setting(live_stack, live_user, session_key, browser_page,
                                                                width):
    from tests.factories import team_of

    page = browser_page
    team = team_of(live_user)
    sign_in(page, live_stack, session_key)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_stack.url}/teams/{team.pk}/alert-settings/")
    page.fill("#add-webhook input[name=url]", "http://10.1.2.3:9000/hook")
    page.click("#add-webhook button[type=submit]")
    page.wait_for_selector("#team-error")
    assert "10.1.2.3 is not a public address" in page.inner_text("#team-error")
    assert "EVOLAB_WEBHOOK_ALLOWED_NETWORKS" in page.inner_text("#team-error")
    assert page.input_value("#add-webhook input[name=url]") == "http://10.1.2.3:9000/hook"
    assert no_sideways_scroll(page), too_wide(page)
