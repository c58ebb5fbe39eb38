"""Issue 25 in headless Chromium against the live daphne and worker: a member renames, annotates, re-tags,
archives and deletes a run from its page; a queued run's page waits for its first step; the progress bars of
the run list and the run page move as steps arrive. No training: the lifecycle and ingestion functions write
to the test database the server reads and push through the same Redis."""
from pathlib import Path

import pytest
from django.conf import settings

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import event_log, make_prompt_set
from tests.waiting import wait_until
from webapp.runs import lifecycle
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def waiting_run(user, name, max_steps=4):
    """A queued run on the live worker's queue but with no task sent: it stays queued until this test moves it."""
    return Run.objects.create(name=name, method="ttrl", prompt_set=make_prompt_set(user, name=f"arith-{name}"),
                              max_steps=max_steps, created_by=user, queue=settings.QUEUE_PREFIX + "cpu")


def row(run_id):
    return f'#runs tr[data-run-id="{run_id}"]'


def progress(page, selector):
    return page.evaluate(f"() => {{ const b = document.querySelector({selector!r}); return [b.value, b.max, b.hidden]; }}")


def test_a_member_renames_annotates_retags_archives_and_deletes_an_ended_run_from_its_page(
        live_stack, live_user, session_key, browser_page):
    page = browser_page
    run = waiting_run(live_user, "before")
    Run.objects.filter(pk=run.pk).update(state=Run.SUCCEEDED)
    run_dir = Path(settings.RUNS_DIR) / str(run.pk)
    (run_dir / "checkpoints" / "checkpoint-4").mkdir(parents=True)
    (run_dir / "events.jsonl").write_text("{}\n")
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    assert page.is_hidden("#run-notes")

    # Rename, notes holding markup, tags: saved, and shown as text after the post.
    page.click("#edit-run summary")
    page.fill("#edit-form input[name=name]", "after <b>bold</b>")
    page.fill("#edit-form input[name=tags]", "baseline, <i>x</i>")
    page.fill("#edit-form textarea[name=notes]", "first <script>window.__owned = 1</script>\nsecond line")
    page.click("#edit-form button[type=submit]")
    page.wait_for_selector("ul.messages li")
    assert page.inner_text("ul.messages") == "Saved."
    assert page.inner_text("h1").startswith("after <b>bold</b>")
    assert page.is_visible("#run-notes")
    notes = page.inner_text("#run-notes .notes")
    assert "first <script>window.__owned = 1</script>" in notes and "second line" in notes
    assert page.evaluate("() => window.__owned") is None
    assert page.query_selector("#run-notes script") is None
    page.click("#edit-run summary")
    assert page.input_value("#edit-form input[name=tags]") == "baseline, <i>x</i>"
    run.refresh_from_db()
    assert (run.name, run.tags) == ("after <b>bold</b>", ["baseline", "<i>x</i>"])

    # The list shows the new name and tags as text.
    page.goto(live_stack.url + "/")
    assert page.inner_text(f"{row(run.pk)} .run-name") == "after <b>bold</b>"
    assert page.eval_on_selector_all(f"{row(run.pk)} .tags .chip", "cs => cs.map(c => c.textContent)") == [
        "baseline", "<i>x</i>"]

    # Archived: out of the run list (one open in another tab drops its row live); the Archived filter shows it.
    listing = page.context.browser.new_page()
    sign_in(listing, live_stack, session_key)
    listing.goto(live_stack.url + "/")
    listing.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    listing.wait_for_selector(row(run.pk))
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.click("#edit-run summary")
    page.click("#archive-form button[type=submit]")
    page.wait_for_selector("#archived-badge")
    listing.wait_for_selector(row(run.pk), state="detached")
    page.goto(live_stack.url + "/")
    page.wait_for_selector("#runs tbody")
    assert page.query_selector(row(run.pk)) is None
    # "Include archived": it comes back, marked, beside an active run, and the two are compared
    active = waiting_run(live_user, "active")
    page.goto(live_stack.url + "/")
    page.wait_for_selector(row(active.pk))
    page.check("#archived-filter")
    page.click("#run-filters button[type=submit]")
    page.wait_for_url("**archived=1**")
    page.wait_for_selector(row(run.pk))
    assert page.inner_text(f'{row(run.pk)} [data-field="archived"]') == "archived"
    assert page.query_selector(f'{row(active.pk)} [data-field="archived"]') is None
    page.check(f"{row(run.pk)} .run-select")
    page.check(f"{row(active.pk)} .run-select")
    page.click("#compare-button")
    page.wait_for_url("**/compare/**")
    assert page.locator('text="after <b>bold</b>"').count() >= 1 and page.locator('text="active"').count() >= 1
    page.goto(live_stack.url + "/?archived=1")
    page.wait_for_selector(row(run.pk))

    # Delete: the box must be ticked (the browser does not send the form otherwise), then the run is gone, from the
    # list (one open in another tab drops its row live), its page, and the worker's disk.
    listing.goto(live_stack.url + "/?archived=1")
    listing.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    listing.wait_for_selector(row(run.pk))
    page.click(f"{row(run.pk)} .run-name")
    page.wait_for_url(f"**/runs/{run.pk}/")
    page.click("#edit-run summary")
    page.click("#delete-form button[type=submit]")
    assert page.url.endswith(f"/runs/{run.pk}/") and Run.objects.filter(pk=run.pk).exists()
    page.check("#delete-confirm")
    page.click("#delete-form button[type=submit]")
    page.wait_for_selector("ul.messages li")
    assert f"Run #{run.pk}" in page.inner_text("ul.messages") and "was deleted" in page.inner_text("ul.messages")
    assert page.query_selector(row(run.pk)) is None
    listing.wait_for_selector(row(run.pk), state="detached")
    page.goto(live_stack.url + "/?archived=1")
    assert page.query_selector(row(run.pk)) is None
    assert page.goto(f"{live_stack.url}/runs/{run.pk}/").status == 404
    assert not Run.objects.filter(pk=run.pk).exists()
    wait_until(lambda: not run_dir.exists(), 30, every=0.5, what="the worker to remove the deleted run's directory")


def test_an_active_run_offers_no_delete(live_stack, live_user, session_key, browser_page):
    page = browser_page
    run = waiting_run(live_user, "active")
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.click("#edit-run summary")
    assert page.query_selector("#delete-confirm") is None
    assert "can be deleted once it has ended" in page.inner_text("#delete-form")


def test_a_queued_run_waits_for_its_first_step_and_both_progress_bars_move_live(
        live_stack, live_user, session_key, browser_page):
    page = browser_page
    run = waiting_run(live_user, "progressing", max_steps=4)
    sign_in(page, live_stack, session_key)
    listing = page.context.browser.new_page()  # a second tab, signed in too
    sign_in(listing, live_stack, session_key)
    listing.goto(live_stack.url + "/")
    listing.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    bar = f'{row(run.pk)} [data-field="progress"]'
    assert progress(listing, bar) == [0, 4, False]
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")

    # Queued: the charts wait for the first step; the bar is at 0 of 4.
    assert page.is_visible("#charts-waiting")
    assert "Waiting for the first step" in page.inner_text("#charts-waiting")
    assert page.query_selector("#charts .chart, #charts [data-metric]") is None
    assert progress(page, '[data-field="progress"]') == [0, 4, False]
    assert page.inner_text("#started-at") == "—" and page.inner_text("#elapsed") == "—"

    # A worker takes it: the start shows, and stays the same after a reload.
    off_loop(lifecycle.claim, run.pk)
    page.wait_for_function("() => document.getElementById('started-at').textContent !== '—'")
    started = page.inner_text("#started-at")
    page.wait_for_function("() => document.getElementById('elapsed').textContent !== '—'")

    # Two steps arrive: the charts replace the notice, both bars move to 2 of 4 without a reload.
    log = event_log(steps=2)[:-2]  # no checkpoint and final status yet
    off_loop(ingest_events, Run.objects.get(pk=run.pk), log)
    page.wait_for_function("() => document.querySelector('[data-field=\"progress\"]').value === 2")
    page.wait_for_selector('[data-metric="entropy"]')
    assert page.is_hidden("#charts-waiting")
    assert page.inner_text("#run-step") == "2"
    assert page.text_content('[data-field="progress"]') == "50%"  # its text for a browser that draws no bar
    listing.wait_for_function(f"() => document.querySelector('{bar}').value === 2")
    assert progress(listing, bar) == [2, 4, False]
    assert listing.inner_text(f'{row(run.pk)} [data-field="step"]') == "2 / 4"

    page.reload()
    page.wait_for_function("() => document.getElementById('started-at').textContent !== '—'")
    assert page.inner_text("#started-at") == started
    assert progress(page, '[data-field="progress"]') == [2, 4, False]
    assert page.is_hidden("#charts-waiting")
    listing.reload()
    assert progress(listing, bar) == [2, 4, False]
