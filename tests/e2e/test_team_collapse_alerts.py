"""Issue 7's scenario end to end, in headless Chromium against the real stack: a member of
team A launches a run that collapses (the tiny policy at a high learning rate: its answers
turn invalid and its length pins at the limit within a few steps), sees the alert appear
live on the run page and the team's alerts page, the team's webhook receiver gets it, and
they acknowledge it; they compare two runs; a member of team B sees none of it."""
import pytest
import requests
from django.contrib.auth import get_user_model
from websockets.sync.client import connect

from tests.alerts.receiver import Receiver
from tests.e2e.helpers import Api
from tests.factories import make_prompt_set, make_team
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Webhook

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

# Collapses in ~3 steps on the default policy: at lr 1e-2 its completions stop ending and
# run to the 32-token limit without a boxed answer.
COLLAPSING = {"n_votes": 4, "n_train": 2, "prompts_per_step": 2, "max_completion_length": 32, "learning_rate": 1e-2,
              "save_every": 0}


def sign_in(page, base, username, password):
    page.goto(base + "/accounts/login/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/")


def test_team_a_sees_its_collapsing_run_alert_live_and_team_b_sees_nothing(live_stack, transactional_db, browser_page):
    User = get_user_model()
    team_a = make_team("team-a", alice="member")
    make_team("team-b", bob="member")
    alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
    for user in (alice, bob):
        user.set_password("pw-for-e2e-1")
        user.email = f"{user.username}@example.org"
        user.save()
    prompt_set = make_prompt_set(alice, team=team_a, name="arith-a", rows=[
        ("p1", "Tom has 3 apples and gets 4 more. How many apples does Tom have?", "7"),
        ("p2", "What is 12 - 5?", "7"),
        ("p3", "What is 6 + 9?", "15"),
        ("p4", "Sara has 10 pens and gives away 4. How many pens does she have?", "6"),
    ])
    alice_api = Api(live_stack.url, ApiToken.issue(alice))
    bob_token = ApiToken.issue(bob)
    page = browser_page
    base = live_stack.url

    with Receiver() as receiver:
        Webhook.objects.create(team=team_a, url=receiver.url)
        sign_in(page, base, "alice", "pw-for-e2e-1")
        run = alice_api.post("/runs", json={"name": "collapsing", "method": "ttrl", "prompt_set": prompt_set.pk,
                                             "max_steps": 8, "hyperparameters": COLLAPSING})
        page.goto(f"{base}/runs/{run['id']}/")
        # The alert appears on the open page without a reload.
        page.wait_for_selector("#alerts li[data-rule][data-state=open]", timeout=300_000)
        rule = page.get_attribute("#alerts li[data-rule][data-state=open]", "data-rule")
        assert rule in {"invalid_answers", "length_collapse", "zero_variance_groups", "entropy_collapse",
                        "degeneration"}

        # The team's alerts page lists it, live.
        team_page = page.context.browser.new_context().new_page()
        sign_in(team_page, base, "alice", "pw-for-e2e-1")
        team_page.goto(f"{base}/teams/{team_a.pk}/alerts/")
        team_page.wait_for_selector(f"#alerts-table tr[data-rule={rule}][data-state=open]")

        # The webhook receiver got it, Slack-style.
        api_alerts = alice_api.get(f"/runs/{run['id']}/alerts")["alerts"]
        target = next(a for a in api_alerts if a["rule"] == rule)
        posts = wait_until(lambda: [r for r in receiver.received if r["body"]["alert"]["id"] == target["id"]], 30,
                           every=0.2, what=f"the webhook post of alert {target['id']}", last=lambda: receiver.received)
        assert rule in posts[0]["body"]["text"] and posts[0]["body"]["event"] == "opened"

        # Acknowledge on the run page; the team page follows live.
        page.click(f"#alerts li[data-alert-id='{target['id']}'] button")
        page.wait_for_selector(f"#alerts li[data-alert-id='{target['id']}'][data-state=acknowledged]")
        team_page.wait_for_selector(f"#alerts-table tr[data-alert-id='{target['id']}'][data-state=acknowledged]")

        final = alice_api.wait_for(run["id"], lambda r: r["state"] in ("succeeded", "failed", "cancelled"), timeout=300)
        assert final["state"] == "succeeded"

    # The alert email went to the team's members (the real file outbox of the alerts worker).
    mails = "".join(p.read_text() for p in live_stack.outbox.glob("*.log")) if live_stack.outbox.exists() else ""
    assert "alice@example.org" in mails and rule in mails and "bob@example.org" not in mails

    # Compare this run with a second one.
    second = alice_api.post(f"/runs/{run['id']}/clone", json={"name": "collapsing again"})
    alice_api.wait_for(second["id"], lambda r: r["state"] in ("succeeded", "failed", "cancelled"), timeout=300)
    page.goto(f"{base}/compare/?runs={run['id']},{second['id']}")
    page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot').length > 0")
    traces = page.evaluate("() => Math.max(...[...document.querySelectorAll('.js-plotly-plot')].map(d => d.data.length))")
    assert traces >= 2

    # Team B sees none of it: pages, API, sockets.
    bob_http = requests.Session()
    bob_http.headers["Authorization"] = f"Token {bob_token}"
    assert bob_http.get(f"{base}/api/runs/{run['id']}", timeout=10).status_code == 404
    assert bob_http.get(f"{base}/api/runs/{run['id']}/alerts", timeout=10).status_code == 404
    assert bob_http.get(f"{base}/api/alerts", timeout=10).json()["alerts"] == []
    assert bob_http.post(f"{base}/api/alerts/{target['id']}/acknowledge", timeout=10).status_code == 404
    assert all(r["id"] != run["id"] for r in bob_http.get(f"{base}/api/runs", timeout=10).json()["runs"])
    ws_base = base.replace("http://", "ws://")
    for path in (f"/ws/runs/{run['id']}/", f"/ws/teams/{team_a.pk}/"):
        with pytest.raises(Exception) as refused:
            with connect(ws_base + path, additional_headers={"Authorization": f"Token {bob_token}"}, open_timeout=10) as ws:
                ws.recv(timeout=5)
        assert "4404" in str(refused.value)
    bob_page = page.context.browser.new_context().new_page()
    sign_in(bob_page, base, "bob", "pw-for-e2e-1")
    assert "collapsing" not in bob_page.content()
    assert bob_page.goto(f"{base}/runs/{run['id']}/").status == 404
    assert bob_page.goto(f"{base}/teams/{team_a.pk}/alerts/").status == 404
