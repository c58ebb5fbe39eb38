"""Headless Chromium (Debian's package) against the real daphne + Celery stack."""
import pytest

pytestmark = pytest.mark.e2e

def test_a_user_uploads_aime_launches_a_run_and_watches_it_succeed(live_stack, live_user, shared_datasets, browser_page):
    page = browser_page
    page.goto(live_stack.url + "/")
    page.fill("input[name=username]", "grace")
    page.fill("input[name=password]", "pw-for-e2e-1")
    page.click("button[type=submit]")
    page.wait_for_url(live_stack.url + "/")

    page.goto(live_stack.url + "/prompt-sets/")
    page.fill("input[name=name]", "AIME 2024")
    page.set_input_files("input[type=file]", str(shared_datasets / "aime24.json"))
    page.click("#upload-form button[type=submit]")
    assert page.inner_text("#row-count") == "30"
    assert page.inner_text("#has-labels") == "yes"

    page.click("text=Launch a run on this set")
    page.fill("input[name=name]", "browser run")
    page.select_option("#method-select", "ttrl")
    page.fill("input[name=max_steps]", "2")
    for name, value in {"n_votes": "8", "n_train": "4", "prompts_per_step": "2", "max_completion_length": "48"}.items():
        page.fill(f"input[name=hp-ttrl-{name}]", value)
    page.click("#run-form button[type=submit]")

    page.wait_for_selector("#chart-entropy")
    # The chart gains points live, without a reload.
    page.wait_for_function("() => Number(document.getElementById('chart-entropy').dataset.points || 0) >= 1", timeout=180_000)
    page.wait_for_function("() => document.getElementById('run-state').textContent === 'succeeded'", timeout=180_000)
    assert page.inner_text("#live-indicator") in ("live", "not live")
    assert int(page.get_attribute("[data-metric='label_accuracy']", "data-points")) == 2

    page.click("#rollouts-link")
    page.wait_for_selector("tr.rollout")
    first = page.locator("tr.rollout").first
    first.click()
    assert page.locator("tr.rollout-text").first.is_visible()
