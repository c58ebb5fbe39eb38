"""The run page's charts, controls, heatmap and alerts, and the compare page, in headless
Chromium against the live daphne. No training: events are crafted and ingested here,
into the test database the server reads, and pushed live through the same Redis."""

import re

import pytest

from tests.e2e.helpers import off_loop, sign_in
from tests.factories import event_log, make_prompt_set
from webapp.runs.models import Run
from webapp.runs import lifecycle
from webapp.runs.ingestion import ingest_events

pytestmark = [pytest.mark.e2e, pytest.mark.usefixtures("transactional_db")]

SIM = {"p1": [[1.0, 0.9, 0.5], [0.9, 1.0, 0.6], [0.5, 0.6, 1.0]], "p2": [[1.0, 0.99, 0.99], [0.99, 1.0, 0.99], [0.99, 0.99, 1.0]]}


def crafted_log(steps=3, extra=None, start_seq=0, start_step=1):
    events = event_log(steps=steps, group_size=3, start_seq=start_seq, start_step=start_step)
    for e in events:
        if e["type"] == "group":
            e["similarity"] = SIM[e["prompt_id"]]
        if e["type"] == "metrics":
            e["values"].update({"kl": 0.01 * e["step"], "time/step": 2.0, **(extra or {})})
    return events


def layout(page, selector, path):
    return page.evaluate(f"() => {{ const d = document.querySelector({selector!r}); return d && d._fullLayout ? d._fullLayout.{path} : null; }}")


def test_the_run_page_groups_charts_switches_axes_marks_alerts_and_picks_heatmap_prompts(
        live_stack, live_user, session_key, browser_page):
    from webapp.alerts.models import Alert

    page = browser_page
    run = Run.objects.create(name="<i>crafted</i>", method="evol_rl", prompt_set=make_prompt_set(live_user), max_steps=3,
                             created_by=live_user, state=Run.SUCCEEDED)
    off_loop(ingest_events, run, crafted_log())
    Alert.objects.filter(run=run).delete()  # whatever the live rules made of the crafted log
    alert = Alert.objects.create(team=run.team, run=run, rule="entropy_collapse", severity="critical", step=2, last_step=3,
                                 message="entropy <b>fell</b>", values={})
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")

    # Sections per group, a chart per metric with data.
    page.wait_for_selector('details.metric-group[data-group="health"] #chart-entropy')
    page.wait_for_selector('details.metric-group[data-group="optimisation"] #chart-kl')
    page.wait_for_selector('details.metric-group[data-group="time"] [data-metric="time/step"]')
    page.wait_for_selector('details.metric-group[data-group="labels & eval"] [data-metric="label_accuracy"]')
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '3'")
    assert page.is_hidden('details.metric-group[data-group="other"]')

    # The alert: listed (escaped), acknowledgeable, and marked on the entropy chart only.
    item = page.locator(f'#alerts li[data-alert-id="{alert.pk}"]')
    assert item.get_attribute("data-rule") == "entropy_collapse" and item.get_attribute("data-state") == "open"
    assert "critical" in item.get_attribute("class")
    assert "entropy <b>fell</b>" in item.inner_text()
    assert layout(page, "#chart-entropy", "shapes.length") == 1 and layout(page, "#chart-entropy", "shapes[0].x0") == 2
    assert layout(page, "#chart-kl", "shapes.length") == 0
    item.locator("button.acknowledge").click()
    page.wait_for_selector(f'#alerts li[data-alert-id="{alert.pk}"][data-state="acknowledged"]')
    assert Alert.objects.get(pk=alert.pk).state == "acknowledged"

    # Log scale and wall-clock apply to every chart.
    assert layout(page, "#chart-entropy", "yaxis.type") == "linear"
    page.check("#chart-controls input.log-y")
    page.wait_for_function("() => document.getElementById('chart-kl')._fullLayout.yaxis.type === 'log'")
    assert layout(page, "#chart-entropy", "yaxis.type") == "log"
    steps_x = page.evaluate("() => document.getElementById('chart-entropy').data[0].x.slice()")
    assert steps_x == [1, 2, 3]
    page.select_option("#chart-controls select.x-mode", "time")
    page.wait_for_function("() => document.getElementById('chart-entropy')._fullLayout.xaxis.title.text.startsWith('elapsed')")
    elapsed = page.evaluate("() => document.getElementById('chart-entropy').data[0].x.slice()")
    # event_log writes an event every 0.5 s: 3 per step (2 groups, 1 metrics) after the first status.
    assert elapsed == [1.5, 3.0, 4.5]
    assert layout(page, "#chart-entropy", "shapes[0].x0") == 3.0  # the marker moves to the step's time

    # Smoothing keeps the raw points as a faint trace.
    page.evaluate("() => { const s = document.querySelector('#chart-controls input.smoothing'); s.value = '0.5';"
                  " s.dispatchEvent(new Event('input')); }")
    page.wait_for_function("() => document.getElementById('chart-entropy').data.length === 2")
    assert page.evaluate("() => document.getElementById('chart-entropy').data[0].opacity") < 0.5

    # Heatmap: the latest step's prompts; the picker switches between them.
    assert page.inner_text("#heatmap-step") == "3"
    assert page.eval_on_selector_all("#heatmap-prompt option", "os => os.map(o => o.value)") == ["p1", "p2"]
    assert page.get_attribute("#heatmap", "data-prompt") == "p1"
    page.select_option("#heatmap-prompt", "p2")
    page.wait_for_function("() => document.getElementById('heatmap').dataset.prompt === 'p2'")
    assert page.evaluate("() => document.getElementById('heatmap').data[0].z") == SIM["p2"]
    assert page.evaluate("() => document.getElementById('heatmap').data[0].colorbar !== undefined")
    assert page.inner_text("#live-indicator") == "not live"  # a finished run opens no socket


def test_live_messages_add_charts_markers_and_end_the_socket(live_stack, live_user, session_key, browser_page):
    page = browser_page
    run = Run.objects.create(name="live", method="evol_rl", prompt_set=make_prompt_set(live_user), max_steps=6,
                             created_by=live_user, state=Run.RUNNING)
    steady = {"entropy": 1.0}  # no collapse alert to mark the chart
    first = crafted_log(steps=2, extra=steady)[:-2]  # no checkpoint and final status yet
    off_loop(ingest_events, run, first)
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '2'")
    assert page.query_selector('[data-metric="grad_norm"]') is None

    # A resumed trainer, then a step with metrics the page has not seen, placed by the server's catalogue
    # (charts.js once had its own list, without EMPO's prefix: that chart went to "other")
    later = crafted_log(steps=1, extra={"grad_norm": 0.7, "empo/semantic_entropy_mean": 0.4, **steady},
                        start_seq=len(first) + 1, start_step=3)
    later.insert(0, {"seq": len(first), "time": later[0]["time"] - 1, "type": "status", "state": "running", "message": "resumed"})
    off_loop(ingest_events, run, later[:-2])
    page.wait_for_selector('details.metric-group[data-group="optimisation"] [data-metric="grad_norm"]')
    page.wait_for_selector('details.metric-group[data-group="rewards"] [data-metric="empo/semantic_entropy_mean"]')
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '3'")
    page.wait_for_function("() => document.getElementById('chart-kl')._fullLayout.annotations.some(a => a.text === 'resumed')")
    resumed = page.evaluate("() => { const l = document.getElementById('chart-kl')._fullLayout;"
                            " return l.shapes[l.annotations.findIndex(a => a.text === 'resumed')].x0; }")
    assert resumed == 2  # the step logged just before the trainer started again
    assert page.inner_text("#heatmap-step") == "3"

    # A plain next step (no new chart, no marker) is drawn, not just stored: Plotly redraws
    # only when told the data changed (calcdata is what it last drew).
    plain = crafted_log(steps=1, extra=steady, start_seq=len(first) + len(later), start_step=4)
    off_loop(ingest_events, run, plain[:-2])
    page.wait_for_function("() => document.getElementById('chart-entropy').calcdata[0].length === 4")

    # The run ends: its history gets the row (the message escaped), the indicator goes off and stays off.
    off_loop(lifecycle.finish, run, Run.SUCCEEDED, "done <b>at last</b>", 0, "")
    page.wait_for_function("() => document.getElementById('run-state').textContent === 'succeeded'")
    newest = page.locator("#history-rows tr").first
    newest.wait_for()
    # (the run was made running, with no row before this one: one state)
    assert newest.inner_text().split("\t")[1:4] == ["succeeded", "its trainer ended", ""]
    assert newest.locator("td").nth(4).inner_text() == "done <b>at last</b>"
    # the socket is stopped (RunSocket.stop: it never reconnects), not merely closed (which retries)
    page.wait_for_function("() => document.getElementById('live-indicator').dataset.ended === 'true'")
    assert page.inner_text("#live-indicator") == "not live"


def test_the_compare_page_overlays_two_runs_one_trace_each(live_stack, live_user, session_key, browser_page):
    page = browser_page
    prompt_set = make_prompt_set(live_user)
    a = Run.objects.create(name="alpha", method="ttrl", prompt_set=prompt_set, max_steps=3, created_by=live_user,
                           state=Run.SUCCEEDED, hyperparameters={"n_votes": 8, "n_train": 4})
    b = Run.objects.create(name="beta", method="ttrl", prompt_set=prompt_set, max_steps=2, created_by=live_user,
                           state=Run.SUCCEEDED, hyperparameters={"n_votes": 16, "n_train": 4})
    off_loop(ingest_events, a, crafted_log(steps=3, extra={"only_alpha": 1.0}))
    off_loop(ingest_events, b, crafted_log(steps=2))
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/compare/?runs={a.pk},{b.pk}")
    page.wait_for_selector('details.metric-group[data-group="health"] #chart-entropy')
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.series === '2'")
    traces = page.evaluate("() => document.getElementById('chart-entropy').data.map(t => [t.name, t.x.length, t.line.color])")
    assert [(name, n) for name, n, _ in traces] == [(f"alpha #{a.pk}", 3), (f"beta #{b.pk}", 2)]
    assert traces[0][2] != traces[1][2]
    assert page.query_selector('[data-metric="only_alpha"]') is None  # logged by one run only
    assert layout(page, "#chart-entropy", "showlegend") is True

    assert page.is_visible('#hp-diff tr[data-hp="n_train"]')
    assert "differs" in page.get_attribute('#hp-diff tr[data-hp="n_votes"]', "class")
    page.check("#only-differing")
    assert page.is_hidden('#hp-diff tr[data-hp="n_train"]') and page.is_visible('#hp-diff tr[data-hp="n_votes"]')


HOSTILE = '1"] [x=\'y\'] \\'


def test_live_messages_with_quotes_and_brackets_in_their_ids_break_nothing(live_stack, live_user, session_key,
                                                                          browser_page):
    """The live page looks up what it already shows by ids from messages: those selectors are escaped
    (CSS.escape), so an id holding quotes or brackets is shown as text and throws nothing."""
    from webapp.live import push

    page = browser_page
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    run = Run.objects.create(name="hostile", method="r_zero", prompt_set=make_prompt_set(live_user), max_steps=6,
                             created_by=live_user, state=Run.RUNNING)
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    messages = [
        {"type": "group", "step": HOSTILE, "prompt_id": HOSTILE, "majority_answer": HOSTILE, "similarity": [[1.0]]},
        {"type": "alert", "id": HOSTILE, "rule": HOSTILE, "severity": "warning", "state": "open", "step": 1,
         "message": HOSTILE, "opened_at": None},
        {"type": "stage", "iteration": HOSTILE, "phase": HOSTILE, "state": "running"},
        {"type": "questions", "iteration": HOSTILE, "offset": 0},
    ]
    for _ in range(2):  # the second time each is looked up among what the first added
        off_loop(push, run.pk, messages)
    # then a message the page shows in a place of its own: messages are handled in order, so once it is
    # drawn, every hostile one before it has been handled
    off_loop(push, run.pk, [{"type": "metrics", "step": 1, "time": 1.7e9, "values": {"handled": 1.0}}])
    page.wait_for_selector('[data-metric="handled"]')
    assert errors == []
    assert page.eval_on_selector_all("#step-links a", "as => as.length") == 1
    assert page.eval_on_selector_all("#alerts li", "ls => ls.length") == 1


def test_steps_whose_live_messages_were_lost_are_read_back_when_a_later_one_arrives(live_stack, live_user, session_key,
                                                                                   browser_page, monkeypatch):
    """Redis restarting drops pushes while the page's socket stays open: the next step's message shows
    the gap, and the page reads the missing steps from the API, without a reload."""
    from webapp import live

    page = browser_page
    run = Run.objects.create(name="gap", method="evol_rl", prompt_set=make_prompt_set(live_user), max_steps=6,
                             created_by=live_user, state=Run.RUNNING)
    steady = {"entropy": 1.0}
    log = crafted_log(steps=5, extra=steady)
    by_step = {}
    for e in log:
        by_step.setdefault(e.get("step"), []).append(e)
    off_loop(ingest_events, run, [e for e in log if e.get("step") in (None, 1) and e["type"] != "checkpoint"
                                  and not (e["type"] == "status" and e["state"] != "running")])
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '1'")

    with monkeypatch.context() as lost:
        lost.setattr(live, "_send_all", lambda batches: None)  # the pushes of steps 2 and 3 never arrive
        off_loop(ingest_events, run, by_step[2] + by_step[3])
    # nothing was sent, so nothing can have arrived: the page still shows step 1 alone
    assert page.evaluate("() => document.getElementById('chart-entropy').dataset.points") == "1"
    off_loop(ingest_events, run, [e for e in by_step[4] if e["type"] != "checkpoint"])
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '4'")


def test_a_page_told_it_fell_behind_reads_what_it_missed_and_says_so(live_stack, live_user, session_key,
                                                                   browser_page, monkeypatch):
    """The web server read the run's stream too late (entries trimmed first) and says `behind`: the page
    reads the steps it missed from the API, without a reload, and shows a notice saying it did."""
    from webapp import live

    page = browser_page
    run = Run.objects.create(name="behind", method="evol_rl", prompt_set=make_prompt_set(live_user), max_steps=6,
                             created_by=live_user, state=Run.RUNNING)
    log = crafted_log(steps=3, extra={"entropy": 1.0})
    by_step = {}
    for e in log:
        by_step.setdefault(e.get("step"), []).append(e)
    off_loop(ingest_events, run, [e for e in log if e.get("step") in (None, 1) and e["type"] != "checkpoint"
                                  and not (e["type"] == "status" and e["state"] != "running")])
    sign_in(page, live_stack, session_key)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '1'")
    assert page.locator("#live-notice").is_hidden()

    with monkeypatch.context() as trimmed:
        trimmed.setattr(live, "_send_all", lambda batches: None)  # the entries of steps 2 and 3, trimmed unread
        off_loop(ingest_events, run, by_step[2] + by_step[3])
    off_loop(live.push, run.pk, [{"type": "behind"}])
    page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '3'")
    assert "missed" in page.locator("#live-notice").text_content()


def test_a_page_told_it_fell_behind_reads_the_heatmap_step_links_and_history_its_lost_messages_carried(
        live_stack, live_user, session_key, browser_page, monkeypatch):
    """Pushes numbered but trimmed from the run's stream before the web server read them: two steps' groups, a
    resumed trainer, a stage and a question set, and a cancel request. The next push shows the server the gap, the
    page is told `behind`, and reads back from the API what only those messages carried (the heatmap's step, the
    step links, the resume marker, the stage, the question set's link, the history row), without a reload; the
    prompt the user chose in the heatmap stays chosen."""
    import redis
    from django.conf import settings

    from webapp import live

    page = browser_page
    run = Run.objects.create(name="gap", method="evol_rl", prompt_set=make_prompt_set(live_user), max_steps=6,
                             created_by=live_user, state=Run.RUNNING)
    log = [e for e in crafted_log(steps=4, extra={"entropy": 1.0})
           if e["type"] != "checkpoint" and e.get("state") in (None, "running")]
    by_step = {}
    for e in log:
        by_step.setdefault(e.get("step"), []).append(e)
    # before step 3 the trainer starts again and logs a stage and a question set: seqs of their own, the later
    # events numbered after them
    seq, time = by_step[3][0]["seq"], by_step[3][0]["time"] - 0.1
    question = {"id": "q1", "question": "1 + 1?", "text": "1 + 1?", "p_hat": 1.0, "pseudo_label": "2",
                "answers": ["2"], "kept": True}
    unseen = [{"seq": seq, "time": time, "type": "status", "state": "running", "message": "resumed"},
              {"seq": seq + 1, "time": time, "type": "stage", "iteration": 1, "phase": "challenger", "state": "done"},
              {"seq": seq + 2, "time": time, "type": "questions", "iteration": 1, "offset": 0, "total": 1,
               "questions": [question]}]
    for e in by_step[3] + by_step[4]:
        e["seq"] += len(unseen)
    off_loop(ingest_events, run, by_step[None] + by_step[1])
    sign_in(page, live_stack, session_key)
    # the socket's own read when it opens is answered before anything below is written
    with page.expect_response(lambda r: r.url.endswith(f"/api/runs/{run.pk}/live-state")):
        page.goto(f"{live_stack.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
    assert page.inner_text("#heatmap-step") == "1"
    page.select_option("#heatmap-prompt", "p2")
    rows = page.locator("#history-rows tr").count()

    numbers = redis.Redis.from_url(settings.REDIS_URL)

    def trimmed_unread(batches):
        """What a push whose entry was trimmed before the server read it leaves: its number taken, no entry."""
        for group in batches:
            if group.startswith("run-"):
                numbers.incr(live.run_stream_key(int(group.removeprefix("run-"))) + ":seq")

    with monkeypatch.context() as trimmed:
        trimmed.setattr(live, "_send_all", trimmed_unread)
        off_loop(ingest_events, run, by_step[2])
        off_loop(ingest_events, run, unseen + by_step[3])
        off_loop(lifecycle.request_cancel, run.pk, live_user)
    off_loop(ingest_events, run, [e for e in by_step[4] if e["type"] == "metrics"])  # no group: the heatmap stays at 3
    page.wait_for_function("() => document.getElementById('heatmap-step').textContent === '3'")
    assert page.eval_on_selector_all("#step-links a", "links => links.map(a => a.textContent)") == ["1", "2", "3"]
    page.wait_for_function(f"() => document.querySelectorAll('#history-rows tr').length === {rows + 1}")
    assert page.locator("#history-rows tr").first.inner_text().split("\t")[1:4] == [
        "running", "cancel requested", live_user.username]
    assert "missed" in page.locator("#live-notice").text_content()
    assert page.eval_on_selector_all("#heatmap-prompt option", "os => os.map(o => o.value)") == ["p1", "p2"]
    assert page.get_attribute("#heatmap", "data-prompt") == "p2"
    page.wait_for_function("() => document.getElementById('chart-kl')._fullLayout.annotations"
                           ".filter(a => a.text === 'resumed').length === 1")
    resumed_at = page.evaluate("() => { const l = document.getElementById('chart-kl')._fullLayout;"
                               " return l.shapes[l.annotations.findIndex(a => a.text === 'resumed')].x0; }")
    assert resumed_at == 2  # the step logged just before the trainer started again
    assert page.is_visible("#stages-card")
    assert page.eval_on_selector_all("#stages li", "lis => lis.map(li => li.textContent)") == [
        "Iteration 1 · challenger: done"]
    assert page.eval_on_selector_all("#iteration-links a", "links => links.map(a => a.textContent)") == [
        "Iteration 1 questions"]


def test_a_page_open_across_a_web_server_restart_catches_up_without_a_reload(live_stack, live_user, session_key,
                                                                            browser_page, tmp_path):
    """daphne restarts (a deploy) while steps are stored: the page's socket reconnects and reads the
    steps it missed from the API."""
    from scripts.stack import Stack, free_port

    web = Stack(log_dir=tmp_path / "logs", quiet=True)
    web.env.update(live_stack.stack.env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    page = browser_page
    run = Run.objects.create(name="restart", method="evol_rl", prompt_set=make_prompt_set(live_user), max_steps=6,
                             created_by=live_user, state=Run.RUNNING)
    log = crafted_log(steps=4, extra={"entropy": 1.0})
    live_steps = [e for e in log if e.get("step") in (None, 1) and e["type"] != "checkpoint"
                  and not (e["type"] == "status" and e["state"] != "running")]
    try:
        web.start_web(port)
        off_loop(ingest_events, run, live_steps)
        page.context.add_cookies([{"name": "sessionid", "value": session_key, "url": url}])
        page.goto(f"{url}/runs/{run.pk}/")
        page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'")
        page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '1'")

        web.stop()
        page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'not live'")
        off_loop(ingest_events, run, [e for e in log if e.get("step") in (2, 3) and e["type"] != "checkpoint"])
        web.start_web(port)
        page.wait_for_function("() => document.getElementById('live-indicator').textContent === 'live'", timeout=30_000)
        page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '3'")
        off_loop(ingest_events, run, [e for e in log if e.get("step") == 4 and e["type"] != "checkpoint"])
        page.wait_for_function("() => document.getElementById('chart-entropy').dataset.points === '4'")
    finally:
        web.stop()


def test_the_history_shows_a_change_made_between_the_pages_render_and_its_socket(
        live_stack, live_user, session_key, browser_page):
    page = browser_page
    # launched as launch_run does, but with no task sent: the test's worker would take it
    run = Run.objects.create(name="fresh", method="ttrl", prompt_set=make_prompt_set(live_user), max_steps=3,
                             created_by=live_user)
    lifecycle.queued(run, by=live_user)
    sign_in(page, live_stack, session_key)

    def claim_before_the_socket(ws):
        off_loop(lifecycle.claim, run.pk, "host-a:1:abc")  # a worker takes the run: its message reaches nobody
        ws.connect_to_server()

    page.route_web_socket(re.compile(r".*/ws/runs/.*"), claim_before_the_socket)
    page.goto(f"{live_stack.url}/runs/{run.pk}/")  # rendered with one row, before the claim
    page.wait_for_function("() => document.querySelectorAll('#history-rows tr').length === 2")
    assert page.locator("#history-rows tr").first.inner_text().split("\t")[1:4] == [
        "queued → running", "taken by a worker", "worker host-a:1:abc"]
    off_loop(lifecycle.finish, run, Run.CANCELLED, "cancelled", -15, "", owner="host-a:1:abc")
    page.wait_for_function("() => document.querySelectorAll('#history-rows tr').length === 3")
