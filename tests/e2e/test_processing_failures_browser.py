"""No silent failure, against the real stack (issue 36, item 7): the README's report of a run trained elsewhere whose
metrics reach step 12 and whose rollouts of steps 4-7 arrive with ?complete_through=7 is grouped by the real
worker (it was not: the degeneration rule raised on the missing invalid_ratio, and the task failed on every retry
with nothing in the UI); and the run page's banner of failed processing follows the run's processing_failed alert
live, its text escaped."""
import pytest

from evolab_client import Evolab
from tests.e2e.helpers import off_loop, sign_in
from tests.waiting import wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def test_the_readmes_report_of_steps_4_to_7_is_grouped_by_the_worker_and_its_page_shows_no_failure(
        live_stack, live_user, session_key, browser_page):
    from webapp.accounts.models import ApiToken
    from webapp.alerts.models import Alert
    from webapp.runs.models import Group, Run

    client = Evolab(url=live_stack.url, token=ApiToken.issue(live_user), retry_for=5)
    run = client.create_run("outside-run", experiment="grpo", tags={"evolab.trainer": "verl"})
    for step in range(1, 13):
        client.log_metrics(run.mlflow_run_id, step, {"actor/entropy": 1.2 if step < 6 else 0.3,
                                                     "response_length/mean": 300.0 - step})
    # a worker charts them a second later, and the rules judge them then (as the README's report, the metrics come
    # first: with the rollouts' majority in the history first, the collapse rule would ask for its second signal)
    wait_until(lambda: Run.objects.get(pk=run.id).last_step == 12, 30, every=0.2, what="the metrics charted to step 12",
               last=lambda: Run.objects.get(pk=run.id).last_step)
    client.post_rollouts(run.id, [
        {"step": step, "prompt": prompt, "index": i, "completion": f"so \\boxed{{{answer}}}", "reward": 1.0,
         "label": "42"}
        for step in range(4, 8) for prompt in ("What is 6 x 7?", "What is 40 + 2?")
        for i, answer in enumerate(("42", "48"))], complete_through=7)

    wait_until(lambda: Group.objects.filter(run_id=run.id).values("step").distinct().count() >= 4, 60, every=0.2,
               what="the groups of steps 4-7")
    assert sorted({s for s in Group.objects.filter(run_id=run.id).values_list("step", flat=True)}) == [4, 5, 6, 7]
    assert not Alert.objects.filter(run_id=run.id, rule="processing_failed").exists()

    page = browser_page
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.id}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    assert page.is_hidden("#processing-failed")
    assert page.locator('#alerts li[data-rule="entropy_collapse"]').count() == 1  # the rules judged it


def test_the_banner_of_failed_processing_follows_the_runs_alert_live(live_stack, live_user, session_key,
                                                                     browser_page):
    from tests.factories import make_prompt_set
    from webapp.alerts import engine
    from webapp.runs.models import Run

    page = browser_page
    run = Run.objects.create(name="watched", method="ttrl", prompt_set=make_prompt_set(live_user), max_steps=9,
                             created_by=live_user, state=Run.RUNNING, last_step=4)
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    assert page.is_hidden("#processing-failed")

    off_loop(engine.record_failure, run, "grouping", 4, KeyError("<img src=x onerror=alert(1)>"))
    page.wait_for_selector("#processing-failed", state="visible")
    assert page.inner_text("#processing-failed-message") == (
        "grouping of reported rollouts failed at step 4: KeyError: '<img src=x onerror=alert(1)>'")
    assert page.locator("#processing-failed img").count() == 0  # text, never markup
    page.wait_for_selector('#alerts li[data-rule="processing_failed"][data-state="open"]')

    off_loop(engine.clear_failure, run.pk, "grouping")  # a retry succeeded
    page.wait_for_selector("#processing-failed", state="hidden")
    page.reload()
    assert page.is_hidden("#processing-failed")
