"""A prompt file over the inline size (1 MB) is read by the uploads worker while its page shows the
progress, then opens the set; a refused one shows the line and field. Real daphne, Celery and Chromium."""
import json

import pytest

pytestmark = pytest.mark.e2e

ROWS = 12_000  # ~1.6 MB of JSONL


def big_jsonl(path, bad_line=None):
    with path.open("w") as f:
        for i in range(1, ROWS + 1):
            row = {"id": f"q{i}", "prompt": f"Tom has {i} apples and buys {i % 7} more. How many apples now?" + " " * 60,
                   "answer": str(i + i % 7)}
            if i == bad_line:
                row["prompt"] = ""
            f.write(json.dumps(row) + "\n")
    assert path.stat().st_size > 1024 * 1024
    return path


def sign_in(page, url):
    page.goto(url + "/")
    page.fill("input[name=username]", "grace")
    page.fill("input[name=password]", "pw-for-e2e-1")
    page.click("button[type=submit]")
    page.wait_for_url(url + "/")


def test_a_large_file_is_read_by_a_worker_while_its_page_shows_progress(live_stack, live_user, browser_page, tmp_path):
    page = browser_page
    sign_in(page, live_stack.url)
    page.goto(live_stack.url + "/prompt-sets/")
    page.fill("input[name=name]", "twelve thousand")
    page.set_input_files("input[type=file]", str(big_jsonl(tmp_path / "big.jsonl")))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/prompt-sets/uploads/*/")
    # the page follows the worker and opens the set once it is saved
    page.wait_for_selector("#row-count", timeout=120_000)
    assert page.inner_text("#row-count") == str(ROWS)
    assert page.inner_text("h1") == "twelve thousand"


def test_a_refused_large_file_shows_the_line_and_field(live_stack, live_user, browser_page, tmp_path):
    page = browser_page
    sign_in(page, live_stack.url)
    page.goto(live_stack.url + "/prompt-sets/")
    page.set_input_files("input[type=file]", str(big_jsonl(tmp_path / "bad.jsonl", bad_line=11_000)))
    page.click("#upload-form button[type=submit]")
    page.wait_for_url("**/prompt-sets/uploads/*/")
    page.wait_for_selector("#upload-error:not([hidden])", timeout=120_000)
    assert page.inner_text("#upload-error") == "bad.jsonl: line 11000: empty prompt"
    assert page.inner_text("#upload-state") == "failed"
