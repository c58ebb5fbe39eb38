"""A run trained elsewhere in headless Chromium (DESIGN §4.8): the run list and its page say where it trains
and offer no cancel, resume or clone; its charts, live as its trainer logs, its heatmap and its rollouts
(model output shown as text, never markup) come from what it reported; the link the MLflow client prints
opens it."""

import pytest

from evolab_client import Evolab
from tests.e2e.helpers import sign_in

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def test_an_external_run_is_watched_like_any_run(live_stack, live_user, session_key, browser_page):
    from webapp.accounts.models import ApiToken

    client = Evolab(url=live_stack.url, token=ApiToken.issue(live_user), retry_for=5)
    run = client.create_run("verl <b>grpo</b>", experiment="gsm8k", tags={"evolab.trainer": "verl"})
    client.log_metrics(run.mlflow_run_id, 1, {"actor/entropy": 1.1, "response_length/mean": 300.0})
    hostile = "<img src=x onerror=\"document.title='pwned'\"> so \\boxed{4}"
    client.post_rollouts(run.id, [{"step": 1, "prompt": "What is 2 + 2?", "completion": text, "index": i, "reward": 1.0,
                                   "label": "4"}
                                  for i, text in enumerate([hostile, "it is \\boxed{4}", "maybe \\boxed{5}"])])
    client.log_metrics(run.mlflow_run_id, 2, {"actor/entropy": 0.9, "response_length/mean": 280.0})
    client.post_rollouts(run.id, [{"step": 2, "prompt": "What is 2 + 2?", "completion": "\\boxed{4}", "index": 0}])

    page = browser_page
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/?source=external")
    row = page.locator(f'tr[data-run-id="{run.id}"]')
    assert "elsewhere · verl" in row.inner_text() and "<b>grpo</b>" in row.locator(".run-name").inner_text()

    page.goto(f"{live_stack.url}/runs/{run.id}/")
    assert page.inner_text("#source-badge") == "trained elsewhere · verl"
    assert page.inner_text("#mlflow-run-id") == run.mlflow_run_id and page.inner_text("#mlflow-experiment") == "gsm8k"
    assert page.inner_text("#answer-rule") == "boxed"
    for action in ("#cancel-form", "#resume-form", "#clone-form"):
        assert page.locator(action).count() == 0
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '2'")
    # step 1 is grouped once step 2 arrived, embedded after: its heatmap and majority come in live
    page.wait_for_selector("#heatmap-card:not([hidden])", timeout=60_000)
    assert page.inner_text("#heatmap-step") == "1" and page.inner_text("#heatmap-majority") == "4"
    page.wait_for_selector('details.metric-group[data-group="health"] [data-metric="majority_ratio"]')
    client.log_metrics(run.mlflow_run_id, 3, {"actor/entropy": 0.7})  # logged while the page is open
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '3'")

    page.goto(f"{live_stack.url}/runs/{run.id}/rollouts/?step=1")
    page.wait_for_selector("text=What is 2 + 2?")
    page.click('tr.rollout[data-index="0"]')  # unfolds its text
    text = page.locator('tr.rollout[data-index="0"] + tr.rollout-text pre')
    assert text.inner_text().startswith("<img src=x onerror=")
    assert page.locator("img[src=x]").count() == 0 and page.title() != "pwned"

    # the MLflow client prints "View run ... at: HOST/mlflow/#/experiments/E/runs/R"
    page.goto(f"{live_stack.url}/mlflow/#/experiments/3/runs/{run.mlflow_run_id}")
    page.wait_for_url(f"{live_stack.url}/runs/{run.id}/")
