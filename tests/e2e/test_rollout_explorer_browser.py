"""The rollout explorer in headless Chromium against the live daphne (issue 10's "done when"): a
step's groups paged and folded, a heatmap cell opening its two rollouts side by side with their
differences marked, a search by text and filters paged through, a prompt's history from a result,
and an export whose rows are exactly the search's. Model output stays text throughout."""
import csv
import io

import pytest

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import make_prompt_set
from webapp.explorer import text_search
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]

WORDS = ["carry the one", "subtract seven", "multiply both sides", "the answer is boxed"]
PROMPTS = [f"p{n}" for n in range(10)]  # more than a page of groups (8)
HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=1</script>'


def events():
    out, seq = [], 0
    for step in (1, 2, 3):
        for p, prompt in enumerate(PROMPTS):
            rollouts = [{"index": i, "text": f"step {step} {prompt}: {WORDS[i % 4]} \\boxed{{{(step + i) % 3}}}"
                                             + (f" {HOSTILE}" if (p, i) == (0, 2) else ""),
                         "answer": str((step + i) % 3), "valid": True, "in_majority": i in (0, 1, 2),
                         "reward": float(i) / 4, "advantage": float(i) / 4 - 0.375, "length": 40 + i,
                         "used_for_training": True, "entropy": 0.2, "extra": {"novelty": round(0.1 * (i + p), 2)}}
                        for i in range(4)]
            out.append({"seq": seq, "time": 1.7e9 + seq, "type": "group", "step": step, "prompt_id": prompt,
                        "majority_answer": "1", "rollouts": rollouts,
                        "similarity": [[1, .9, .97, .8], [.9, 1, .95, .85], [.97, .95, 1, .9], [.8, .85, .9, 1]]})
            seq += 1
    return out


def test_a_user_explores_every_rollout_of_a_run(live_stack, live_user, session_key, browser_page):
    page = browser_page
    prompt_set = make_prompt_set(live_user, rows=[(p, f"Question {p}?", "1") for p in PROMPTS])
    run = Run.objects.create(name="explorer", method="evol_rl", prompt_set=prompt_set, max_steps=3,
                             created_by=live_user, state=Run.SUCCEEDED)
    off_loop(ingest_events, run, events())
    off_loop(text_search.catch_up, run.pk, 100)  # most texts indexed, the last 20 read directly
    sign_in(page, live_stack, session_key)
    errors = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    # A step's groups: 8 a page, folded but the first, one summary line each.
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/?step=2")
    groups = page.locator("details.group")
    assert groups.count() == 8
    assert groups.evaluate_all("gs => gs.map(g => g.open)") == [True] + [False] * 7
    assert "4 distinct answers" not in groups.nth(0).locator("summary").inner_text()  # answers 2, 0, 1, 2
    assert "3 distinct answers" in groups.nth(0).locator("summary").inner_text()
    assert "Question p0?" in groups.nth(0).inner_text()
    page.click("#expand-all")
    assert groups.evaluate_all("gs => gs.every(g => g.open)")
    page.click("#next-groups")
    page.wait_for_url("**page=2")
    assert page.locator("details.group").evaluate_all("gs => gs.map(g => g.dataset.promptId)") == ["p8", "p9"]

    # A heatmap cell opens its two rollouts side by side, the differing words marked.
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/?step=2")
    page.wait_for_function("() => document.getElementById('heatmap-1')._fullLayout")
    x, y = page.evaluate("""() => {
        const div = document.getElementById('heatmap-1'), l = div._fullLayout, box = div.getBoundingClientRect();
        return [box.left + l.margin.l + l.xaxis.l2p(2), box.top + l.margin.t + l.yaxis.l2p(0)]; }""")
    page.mouse.click(x, y)
    pair = page.locator("#pair-1")
    pair.wait_for(state="visible")
    assert pair.locator(".pair-title").inner_text() == "Rollouts 0 and 2 (similarity 0.970)"
    left, right = pair.locator(".pair-left").inner_text(), pair.locator(".pair-right").inner_text()
    assert left.startswith("step 2 p0: carry the one") and right.startswith("step 2 p0: multiply both sides")
    assert HOSTILE in right  # shown as text, not run
    marked = pair.locator(".pair-left mark.diff").all_inner_texts()
    assert "carry" in marked and "step" not in marked
    assert page.evaluate("() => window.pwned") is None

    # Search every step by text and filters, a page of 10 at a time.
    page.click("#search-panel > summary")
    page.fill("#search-q", "CARRY one")
    page.fill("#search-step-min", "2")
    page.select_option("#search-in_majority", "true")
    page.select_option("#search-order", "-novelty")
    page.select_option("#search-limit", "10")
    page.click("#search-button")
    page.wait_for_selector("#search-results")
    assert page.url.split("?", 1)[1] == "q=CARRY+one&step_min=2&in_majority=true&order=-novelty&limit=10"  # no empty fields
    found, pages = [], 0
    while True:
        pages += 1
        rows = page.locator("#search-results tr.result")
        found += rows.evaluate_all("rs => rs.map(r => [Number(r.dataset.step), r.dataset.promptId, Number(r.dataset.index)])")
        if not page.locator("#next-page").count():
            break
        page.click("#next-page")
        page.wait_for_load_state()
    assert pages == 2
    expected = {(s, p, 0) for s in (2, 3) for p in PROMPTS}  # "carry the one" is rollout 0 of each group
    assert len(found) == 20 and set(map(tuple, found)) == expected
    novelty = [int(p[1:]) for _, p, _ in found]  # rollout 0's novelty is 0.1 × its prompt's number
    assert novelty == sorted(novelty, reverse=True)

    # The export button downloads exactly the search's rollouts.
    with page.expect_download() as download:
        page.click("#search-export-csv")
    exported = list(csv.DictReader(io.StringIO(open(download.value.path()).read())))
    assert {(int(r["step"]), r["prompt_id"], int(r["index"])) for r in exported} == expected and len(exported) == 20

    # A search that matches text with markup shows it as text.
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/search/?q=onerror")
    assert HOSTILE in page.locator("#search-results td.text .rollout-text").first.inner_text()
    assert page.inner_text("#match-count").startswith("3 rollouts match")
    # The text has the table's widest column, wrapped inside it: nothing runs past its box sideways.
    widths = page.evaluate("""() => { const cell = document.querySelector('#search-results td.text'),
        box = cell.querySelector('.rollout-text'), others = [...cell.parentElement.children].filter(c => c !== cell);
        return [cell.getBoundingClientRect().width, Math.max(...others.map(c => c.getBoundingClientRect().width)),
                box.scrollWidth - box.clientWidth]; }""")
    assert widths[0] >= 300 and widths[0] > widths[1] and widths[2] == 0
    assert page.locator("#search-results tr.result").count() == 3 and page.evaluate("() => window.pwned") is None
    # A bad filter says which.
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/search/?reward_min=lots")
    assert page.locator("#search-error").get_attribute("data-field") == "reward_min"

    # From a result to its prompt's history.
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/search/?q=carry&prompt=p3")
    page.locator("#search-results a.history-link").first.click()
    page.wait_for_selector("#prompt-history tbody tr")
    assert page.locator("#prompt-history tbody tr").count() == 3 and page.inner_text("#prompt-id") == "p3"
    assert errors == []


def test_a_prompt_id_is_shown_as_text_in_the_heatmap_title(live_stack, live_user, session_key, browser_page):
    page = browser_page
    prompt_id = '<b>bold</b><a href="https://evil.example/">click</a>'
    prompt_set = make_prompt_set(live_user, rows=[(prompt_id, "Question?", "1")])
    run = Run.objects.create(name="titled", method="ttrl", prompt_set=prompt_set, max_steps=1,
                             created_by=live_user, state=Run.SUCCEEDED)
    group = {**events()[0], "prompt_id": prompt_id}
    off_loop(ingest_events, run, [group])
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/?step=1")
    page.wait_for_function("() => document.querySelector('#heatmap-1 .gtitle')")
    title = page.locator("#heatmap-1 .gtitle")
    assert title.text_content() == f"Similarity of rollouts (prompt {prompt_id})"  # Plotly's tags, written out
    assert title.locator("a").count() == 0 and title.locator("tspan[style*='bold']").count() == 0


@pytest.mark.parametrize("width", [1400, 390])
def test_the_search_table_marks_the_words_says_its_rows_and_fits_the_window(live_stack, live_user, session_key,
                                                                            browser_page, width):
    page = browser_page
    prompt_set = make_prompt_set(live_user, rows=[(p, f"Question {p}?", "1") for p in PROMPTS])
    run = Run.objects.create(name="searched", method="evol_rl", prompt_set=prompt_set, max_steps=3,
                             created_by=live_user, state=Run.SUCCEEDED)
    off_loop(ingest_events, run, events())
    sign_in(page, live_stack, session_key)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_stack.url}/runs/{run.pk}/rollouts/search/?q=carry&limit=10")
    page.click("#next-page")
    page.wait_for_selector("#search-results")
    assert page.inner_text("#match-count") == "30 rollouts match these filters: rows 11–20 of 30."
    # each text's searched word marked, shown as text; the label and whether the answer equals it have columns
    marks = page.locator("#search-results td.text mark.match").all_inner_texts()
    assert len(marks) == 10 and set(marks) == {"carry"}
    headers = page.locator("#search-results thead th").all_inner_texts()
    assert headers[3:6] == ["Answer", "Label", "Correct"]
    # a range's two ends side by side, on one line
    tops = page.evaluate("""() => ['search-step-min', 'search-step-max', 'search-reward-min', 'search-reward-max']
        .map(id => Math.round(document.getElementById(id).getBoundingClientRect().top))""")
    assert tops[0] == tops[1] and tops[2] == tops[3]
    # the table scrolls inside its card: the page itself does not scroll sideways
    assert page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")
