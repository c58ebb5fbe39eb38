"""The rollouts page, a prompt's history and the exports, in headless Chromium against the live
daphne: the heatmap's colour scale, sorting a group, the step slider, a step's rollouts downloaded as
CSV; from a group to its prompt's history (table and charts) and back to one step's group; the run
page's metrics downloaded as CSV."""
import csv
import io

import pytest

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import event_log, make_prompt_set
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def test_a_user_follows_a_prompt_over_the_run_and_exports_the_metrics(live_stack, live_user, session_key, browser_page):
    page = browser_page
    prompt_set = make_prompt_set(live_user, rows=[("p1", "What is 2 + 3?", "5"), ("q[\"2\"]", "What is 7 - 4?", "3")])
    run = Run.objects.create(name="history", method="ttrl", prompt_set=prompt_set, max_steps=3, created_by=live_user,
                             state=Run.SUCCEEDED)
    events = event_log(steps=3, prompts=("p1", 'q["2"]'), group_size=4)
    for e in events:
        if e["type"] == "group" and e["prompt_id"] == "p1":  # near-duplicates: 0.95 to 0.99
            e["similarity"] = [[1, .95, .99, .97], [.95, 1, .96, .98], [.99, .96, 1, .97], [.97, .98, .97, 1]]
    off_loop(ingest_events, run, events)
    sign_in(page, live_stack, session_key)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/?step=2")
    # one fixed 0-1 scale and the run page's colour map on every page, whatever the values there
    page.wait_for_function("() => document.getElementById('heatmap-1')._fullData")
    heat = page.evaluate("() => { const d = document.getElementById('heatmap-1')._fullData[0];"
                         " return [d.zmin, d.zmax, JSON.stringify(d.colorscale)]; }")
    assert heat == [0, 1, page.evaluate("() => JSON.stringify(window.EvolabCharts.SIMILARITY_COLORSCALE)")]
    # sorting a group by reward puts the rewarded rollouts (odd indexes) first
    group = page.locator('details.group[data-prompt-id="p1"]')
    group.locator('th[data-sort="reward"]').click()
    assert group.locator("tr.rollout").evaluate_all("rows => rows.map(r => r.dataset.index)") == ["1", "3", "0", "2"]
    # the slider shows another step
    page.locator("#step-slider").fill("3")
    page.wait_for_url("**/rollouts/?step=3")
    with page.expect_download() as download:  # this step's rollouts, as the search finds them
        page.click("#export-step-csv")
    exported = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
    assert len(exported) == 8 and {r["step"] for r in exported} == {"3"}
    assert {r["prompt_id"] for r in exported} == {"p1", 'q["2"]'}
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/?step=2")
    page.locator('details.group[data-prompt-id=\'q["2"]\'] a.history-link').click()
    page.wait_for_selector("#prompt-history tbody tr")
    assert page.inner_text("#prompt-id") == 'q["2"]' and "What is 7 - 4?" in page.content()
    rows = page.locator("#prompt-history tbody tr")
    assert rows.count() == 3
    # event_log's groups: answers 6, 5, 6, 5 with the 5s the majority; the label of q["2"] is 3
    first = rows.nth(0).inner_text().split("\t")
    assert first[:7] == ["1", "5", "0.500", "2", "—", "0.500", "4"] and first[7] == "no"
    page.wait_for_function("() => { const charts = document.querySelectorAll('.history-chart');"
                           " return charts.length === 4 && Array.from(charts).every(c => c.querySelector('.main-svg')); }")
    rows.nth(1).locator("a").click()
    page.wait_for_url("**/rollouts/?step=2&prompt=*")
    assert page.locator("details.group").count() == 1

    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    with page.expect_download() as download:
        page.click("#export-metrics-csv")
    rows = list(csv.reader(io.StringIO(open(download.value.path()).read())))
    assert rows[0] == ["name", "step", "value", "time"]
    entropy = [r for r in rows[1:] if r[0] == "entropy"]
    assert [(r[1], float(r[2])) for r in entropy] == [("1", 1.0), ("2", 0.5), ("3", 1 / 3)]
    assert download.value.suggested_filename.startswith(f"run-{run.pk}-") and rows[1][3].endswith("Z")  # ISO, UTC
    with page.expect_download() as download:  # the wide layout: a row per step
        page.click("#export-metrics-wide-csv")
    assert download.value.suggested_filename.endswith("-metrics-wide.csv")
    wide = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
    assert [(r["step"], float(r["entropy"])) for r in wide] == [("1", 1.0), ("2", 0.5), ("3", 1 / 3)]
    assert errors == []
