"""The imports page in headless Chromium (issue 39): a run brought in through the metrics endpoint, as `evolab sync`
sends it, is listed with its folder and what was read and skipped, fits a 1,400 px and a 390 px window without a
page-wide scroll, and shows the client's text as text."""
import json
import urllib.request

import pytest

from evolab_client import Evolab
from tests.e2e.helpers import sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def test_the_imports_page_lists_what_each_sync_read_and_skipped(live_stack, live_user, session_key, browser_page):
    from webapp.accounts.models import ApiToken

    token = ApiToken.issue(live_user)
    run = Evolab(url=live_stack.url, token=token, retry_for=5).create_run("tb-import", experiment="archive")
    folder = "/data/runs/<img src=x onerror=\"document.title='pwned'\">/" + "very-long-folder-name-" * 4
    body = {"keys": ["actor/entropy"], "points": [[0, s, 1_795_000_000_000 + s, 1.0 / s] for s in (1, 2, 3)],
            "sync": {"logger": "tensorboard", "folder": folder, "host": "gpu-07", "files": 2, "points": 3,
                     "rollouts": 0, "skipped": {"histogram": 4}}}
    request = urllib.request.Request(f"{live_stack.url}/api/runs/{run.id}/metrics", data=json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        assert json.loads(answer.read())["charted_steps"] == 3

    page = browser_page
    sign_in(page, live_stack, session_key)
    for width in (1400, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{live_stack.url}/imports/")
        row = page.locator(f'#imports tr[data-run="{run.id}"]')
        assert "tb-import" in row.inner_text() and row.locator(".logger").inner_text() == "TensorBoard"
        assert row.locator(".points").inner_text() == "3" and row.locator(".steps").inner_text() == "3"
        assert row.locator(".skipped").inner_text() == "4 histogram"
        assert row.locator(".folder code").inner_text() == f"gpu-07:{folder}"  # text, never markup
        assert page.locator("img[src=x]").count() == 0 and page.title() != "pwned"
        wide = page.evaluate("document.documentElement.scrollWidth")
        assert wide <= width, f"the page is {wide} px wide in a {width} px window"
    row.locator("a").click()
    page.wait_for_url(f"{live_stack.url}/runs/{run.id}/")
    assert "Imported from TensorBoard's files" in page.inner_text("#logger-import")
