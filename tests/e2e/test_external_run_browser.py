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
    page.wait_for_function("() => document.getElementById('chart-entropy')?.dataset.points === '2'")
    # step 1 is grouped once step 2 arrived, embedded after: its heatmap and majority come in live
    page.wait_for_selector("#heatmap-card:not([hidden])", timeout=60_000)
    assert page.inner_text("#heatmap-step") == "1" and page.inner_text("#heatmap-majority") == "4"
    page.wait_for_selector('details.metric-group[data-group="health"] [data-metric="majority_ratio"]')
    client.log_metrics(run.mlflow_run_id, 3, {"actor/entropy": 0.7})  # logged while the page is open
    page.wait_for_function("() => document.getElementById('chart-entropy')?.dataset.points === '3'")

    page.goto(f"{live_stack.url}/runs/{run.id}/rollouts/?step=1")
    page.wait_for_selector("text=What is 2 + 2?")
    page.click('tr.rollout[data-index="0"]')  # unfolds its text
    text = page.locator('tr.rollout[data-index="0"] + tr.rollout-text pre')
    assert text.inner_text().startswith("<img src=x onerror=")
    assert page.locator("img[src=x]").count() == 0 and page.title() != "pwned"

    # the MLflow client prints "View run ... at: HOST/mlflow/#/experiments/E/runs/R"
    page.goto(f"{live_stack.url}/mlflow/#/experiments/3/runs/{run.mlflow_run_id}")
    page.wait_for_url(f"{live_stack.url}/runs/{run.id}/")


def test_the_links_the_mlflow_client_prints_survive_a_sign_in_and_the_evaluation_reads_as_chat(
        live_stack, live_user, browser_page):
    import json

    import requests

    from webapp.accounts.models import ApiToken

    token = ApiToken.issue(live_user)
    client = Evolab(url=live_stack.url, token=token, retry_for=5)
    run = client.create_run("verl-ttrl", experiment="gsm8k", tags={"evolab.trainer": "verl"})
    elsewhere = client.create_run("another-experiments-run", experiment="math")
    experiment_id, = {r["run"]["info"]["experiment_id"] for r in [requests.get(
        f"{live_stack.url}/mlflow/api/2.0/mlflow/runs/get", params={"run_id": run.mlflow_run_id},
        headers={"Authorization": f"Bearer {token}"}, timeout=10).json()]}
    # verl's validation file, as its MLflow logger uploads it: a ChatML prompt, and output that is markup
    rows = [{"input": "<|im_start|>system\nReason step by step.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
                      "<|im_start|>assistant\n",
             "output": "<img src=x onerror=\"document.title='pwned'\"> so \\boxed{5}", "score": 1.0}]
    uploaded = requests.put(f"{live_stack.url}/mlflow/api/2.0/mlflow-artifacts/artifacts/{experiment_id}/"
                            f"{run.mlflow_run_id}/artifacts/val_step4.json", data=json.dumps(rows),
                            headers={"Authorization": f"Bearer {token}"}, timeout=10)
    assert uploaded.status_code == 200, uploaded.text

    page = browser_page  # signed out
    page.goto(f"{live_stack.url}/mlflow/#/experiments/{experiment_id}/runs/{run.mlflow_run_id}")
    page.wait_for_url("**/accounts/login/**")
    page.fill("input[name=username]", "grace")
    page.fill("input[name=password]", "pw-for-e2e-1")
    page.click("form button[type=submit], form input[type=submit]")
    page.wait_for_url(f"{live_stack.url}/runs/{run.id}/")

    # "View experiment at: HOST/mlflow/#/experiments/E": the experiment's runs, not every run
    page.goto(f"{live_stack.url}/mlflow/#/experiments/{experiment_id}")
    page.wait_for_url(f"**/?team=*&experiment={experiment_id}")
    assert page.locator(f'tr[data-run-id="{run.id}"]').count() == 1
    assert page.locator(f'tr[data-run-id="{elsewhere.id}"]').count() == 0
    assert page.locator("#experiment-filter option:checked").inner_text() == "gsm8k"

    page.goto(f"{live_stack.url}/runs/{run.id}/")
    page.click("#eval-generations-link a")
    page.wait_for_selector(".eval-generation")
    assert page.locator(".chat-role").all_text_contents() == ["system", "user"]
    assert page.locator(".chat-turn pre").all_inner_texts() == ["Reason step by step.", "What is 2+3?"]
    assert "<|im_start|>" not in page.inner_text(".eval-generation")
    assert page.inner_text(".eval-generation .answer") == "5"
    assert page.inner_text(".eval-generation pre.output").startswith("<img src=x onerror=")
    assert page.locator("img[src=x]").count() == 0 and page.title() != "pwned"
