"""The run list and the launch form in headless Chromium against the live daphne. The run
list's live updates are driven from here with the real lifecycle and ingestion functions,
which write to the test database the server reads and push through the same Redis."""

import pytest
from django.conf import settings

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import event_log, make_prompt_set, make_team
from webapp.runs import lifecycle
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]


def waiting_run(user, prompt_set, name):
    """A queued run on the live worker's queue but with no task sent: it stays queued until
    this test moves it."""
    return Run.objects.create(name=name, method="ttrl", prompt_set=prompt_set, max_steps=4, created_by=user,
                              queue=settings.QUEUE_PREFIX + "cpu")


def row(run_id):
    return f'#runs tr[data-run-id="{run_id}"]'


def test_the_run_list_follows_runs_live_and_compares_two_ticked_runs(live_stack, live_user, session_key, browser_page):
    page = browser_page
    prompt_set = make_prompt_set(live_user, name="arith-list")
    first = waiting_run(live_user, prompt_set, "first")
    second = waiting_run(live_user, prompt_set, "second <b>")
    sign_in(page, live_stack, session_key)
    page.goto(live_stack.url + "/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    assert page.inner_text(f"{row(second.pk)} .run-name") == "second <b>"  # text, not markup
    assert page.inner_text(f'{row(first.pk)} [data-field="state"]') == "queued"

    # The trainer starts and logs two steps: state, step and health figures change in place.
    off_loop(lifecycle.claim, first.pk)
    page.wait_for_function(f"() => document.querySelector('{row(first.pk)} [data-field=\"state\"]').textContent === 'running'")
    assert "state-running" in page.get_attribute(f'{row(first.pk)} [data-field="state"]', "class")
    off_loop(ingest_events, Run.objects.get(pk=first.pk), event_log(steps=2))
    page.wait_for_function(f"() => document.querySelector('{row(first.pk)} [data-health=\"entropy\"]').textContent === '0.500'")
    assert page.inner_text(f'{row(first.pk)} [data-field="step"]') == "2 / 4"
    assert page.inner_text(f'{row(first.pk)} [data-health="response_length/mean"]') == "22"
    assert page.inner_text(f'{row(first.pk)} [data-health="majority_ratio"]') == "0.50"

    # It fails: the state turns and the run_failed alert counts on the row, critical.
    off_loop(lifecycle.finish, Run.objects.get(pk=first.pk), Run.FAILED, "trainer exited with code 1", 1, "")
    page.wait_for_function(f"() => document.querySelector('{row(first.pk)} [data-field=\"state\"]').textContent === 'failed'")
    page.wait_for_selector(f'{row(first.pk)} [data-field="alerts"] .badge.severity-critical')
    assert page.inner_text(f'{row(first.pk)} [data-field="alerts"]') == "1"
    assert page.get_attribute(f'{row(first.pk)} [data-field="alerts"] a', "href") == f"/runs/{first.pk}/#alerts"

    # A run launched elsewhere gets a row without a reload of the page.
    page.evaluate("() => { window.__sameDocument = true; }")
    third = off_loop(lambda: _announced_run(live_user, prompt_set, "third"))
    page.wait_for_selector(row(third))
    assert page.evaluate("() => window.__sameDocument") is True
    assert page.inner_text(f"{row(third)} .run-name") == "third"

    # Tick two runs: Compare goes to /compare/?runs=...
    assert page.is_disabled("#compare-button")
    page.check(f"{row(first.pk)} input.run-select")
    assert page.is_disabled("#compare-button")
    page.check(f"{row(second.pk)} input.run-select")
    assert page.is_enabled("#compare-button")
    page.click("#compare-button")
    page.wait_for_url("**/compare/?runs=*")
    ids = page.url.split("runs=", 1)[1].split(",")
    assert sorted(ids) == sorted([str(first.pk), str(second.pk)])


def test_a_runs_alert_count_stays_when_it_ends_until_its_alert_is_acknowledged(live_stack, live_user, session_key,
                                                                                 browser_page):
    # issue 36, item 6: after the Figure 1 run the list's alert column said "—" over six unseen alerts
    from webapp.alerts import engine
    from webapp.alerts.models import Alert

    page = browser_page
    run = waiting_run(live_user, make_prompt_set(live_user, name="arith-ends"), "collapses overnight")
    Run.objects.filter(pk=run.pk).update(state=Run.RUNNING)
    alert = Alert.objects.create(team=run.team, run=run, rule="entropy_collapse", severity="warning", step=13,
                                 last_step=40, message="entropy fell to 0.0365")
    sign_in(page, live_stack, session_key)
    page.goto(live_stack.url + "/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    alerts = f'{row(run.pk)} [data-field="alerts"]'
    assert page.inner_text(alerts) == "1"

    off_loop(lifecycle.finish, Run.objects.get(pk=run.pk), Run.SUCCEEDED, "", 0, "")
    page.wait_for_function(f"() => document.querySelector('{row(run.pk)} [data-field=\"state\"]').textContent "
                           "=== 'succeeded'")
    # the page has applied the alert's message once its row's alerts are JSON.stringify's (the server's have spaces)
    page.wait_for_function(f"() => document.querySelector('{row(run.pk)}').dataset.alerts === "
                           f"'{{\"{alert.pk}\":\"warning\"}}'")
    assert page.inner_text(alerts) == "1"  # its ended alert still counts
    assert Alert.objects.get(pk=alert.pk).state == Alert.ENDED

    off_loop(engine.acknowledge, Alert.objects.get(pk=alert.pk), live_user)  # a member, on another page
    page.wait_for_function(f"() => document.querySelector('{alerts}').textContent === '—'")


def _announced_run(user, prompt_set, name):
    run = waiting_run(user, prompt_set, name)
    lifecycle.queued(run, by=run.created_by)
    return run.pk


def test_the_launch_form_applies_presets_and_keeps_every_value_after_an_error(live_stack, live_user, session_key,
                                                                             browser_page):
    page = browser_page
    own = make_prompt_set(live_user, name="arith-form")
    annex = make_team("annex-of-grace", grace="member")
    make_prompt_set(live_user, name="annex-set", team=annex)
    make_prompt_set(live_user, name="annex-labelled", team=annex)
    sign_in(page, live_stack, session_key)
    page.goto(live_stack.url + f"/runs/new/?prompt_set={own.pk}")

    # A fresh form for the default model is on the small CPU preset.
    assert page.get_attribute('button.preset[data-preset="small_cpu"]', "aria-pressed") == "true"
    assert page.input_value("input[name=hp-ttrl-n_votes]") == "8"
    # Until a hyperparameter is edited, a fresh form follows the model: the paper's settings
    # for a real model, the small run again for the default one.
    page.fill("input[name=model]", "Qwen/Qwen3-4B-Base")
    page.dispatch_event("input[name=model]", "change")
    assert page.input_value("input[name=hp-ttrl-n_votes]") == "64"
    assert page.get_attribute('button.preset[data-preset="paper"]', "aria-pressed") == "true"
    page.fill("input[name=model]", "default")
    page.dispatch_event("input[name=model]", "change")
    assert page.input_value("input[name=hp-ttrl-n_votes]") == "8"
    page.click('button.preset[data-preset="paper"]')
    assert page.input_value("input[name=hp-ttrl-n_votes]") == "64"
    assert page.input_value("input[name=hp-ttrl-max_completion_length]") == "12288"  # EVOL-RL's comparison setup

    # EVOL-RL: its description and its own parameters show; the small preset fills them.
    page.select_option("#method-select", "evol_rl")
    assert page.is_visible('.method-info[data-method="evol_rl"]') and not page.is_visible('.method-info[data-method="ttrl"]')
    assert page.is_visible("input[name=hp-evol_rl-alpha]") and not page.is_visible("input[name=hp-ttrl-n_votes]")
    page.click('button.preset[data-preset="small_cpu"]')
    assert page.input_value("input[name=hp-evol_rl-n_votes]") == "8"
    assert page.input_value("input[name=hp-evol_rl-max_completion_length]") == "96"
    assert page.input_value("input[name=max_steps]") == "20"

    # The team select follows: another team's prompt sets, and back.
    page.select_option("#team-select", str(annex.pk))
    options = page.eval_on_selector_all("#prompt-set-select option", "os => os.map(o => o.textContent)")
    assert sorted(o.split(" (")[0] for o in options) == ["annex-labelled", "annex-set", "—"]
    page.select_option("#team-select", str(own.team_id))
    page.select_option("#prompt-set-select", str(own.pk))

    # An error (n_train above n_votes) keeps everything typed and marks the field.
    page.fill("input[name=name]", "kept <name>")
    page.fill("input[name=tags]", "baseline, small")
    page.fill("input[name=hp-evol_rl-n_train]", "12")
    page.fill("input[name=hp-evol_rl-alpha]", "0.35")
    page.uncheck("input[name=hp-evol_rl-use_novelty]")
    page.fill("input[name=alert-entropy_collapse-fraction]", "0.3")
    page.click("#launch-button")
    page.wait_for_selector("#run-error")
    assert "n_train" in page.inner_text("#run-error")
    assert page.get_attribute("input[name=hp-evol_rl-n_train]", "aria-invalid") == "true"
    assert page.is_visible("#error-hp-evol_rl-n_train")
    assert page.input_value("input[name=name]") == "kept <name>"
    assert page.input_value("input[name=tags]") == "baseline, small"
    assert page.input_value("input[name=hp-evol_rl-n_train]") == "12"
    assert page.input_value("input[name=hp-evol_rl-n_votes]") == "8"
    assert page.input_value("input[name=hp-evol_rl-alpha]") == "0.35"
    assert page.input_value("input[name=hp-evol_rl-max_completion_length]") == "96"
    assert not page.is_checked("input[name=hp-evol_rl-use_novelty]")
    assert page.is_checked("input[name=hp-evol_rl-use_entropy_bonus]")
    assert page.input_value("input[name=alert-entropy_collapse-fraction]") == "0.3"
    assert page.input_value("#method-select") == "evol_rl" and page.is_visible("input[name=hp-evol_rl-alpha]")
    assert page.input_value("#prompt-set-select") == str(own.pk)
    assert Run.objects.count() == 0
