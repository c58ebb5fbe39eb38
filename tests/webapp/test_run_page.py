"""The run page (charts grouped, hyperparameters, alerts, heatmap data, run facts) and
the compare page, rendered by Django; their scripts are driven in tests/e2e."""
import json
import re
from pathlib import Path

import pytest

from tests.factories import event_log, make_prompt_set, make_team
from webapp.runs.models import Run
from webapp.runs.metric_groups import catalogue
from webapp.runs.queries import resume_points
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


def initial_of(page: str, element_id: str = "run-initial") -> dict:
    match = re.search(rf'<script id="{element_id}" type="application/json">(.*?)</script>', page, re.S)
    assert match, f"no #{element_id} on the page"
    return json.loads(match.group(1))


@pytest.fixture
def lab(django_user_model):
    """A team with an admin, a member and a viewer, and a prompt set."""
    team = make_team("lab", alice="admin", mel="member", vic="viewer")
    users = {u.username: u for u in django_user_model.objects.filter(username__in=["alice", "mel", "vic"])}
    return team, users, make_prompt_set(users["alice"], team=team)


def make_run(lab, **fields):
    team, users, prompt_set = lab
    fields.setdefault("name", "r")
    return Run.objects.create(method=fields.pop("method", "ttrl"), prompt_set=prompt_set, max_steps=fields.pop("max_steps", 2),
                              created_by=users["alice"], **fields)


def page_for(client, user, run):
    client.force_login(user)
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    return response.content.decode()


@pytest.mark.parametrize(
    "name, group",
    [("entropy", "health"), ("response_length/mean", "health"), ("majority_ratio", "health"), ("unique_answers", "health"),
     ("similarity/mean", "health"), ("invalid_ratio", "health"), ("truncated_ratio", "health"),
     ("zero_variance_groups", "health"), ("reward/mean", "rewards"), ("reward/vote_std", "rewards"),
     ("evol_rl/novelty_mean", "rewards"), ("compass/credibility_mean", "rewards"), ("darl/bonus_ratio", "rewards"),
     ("rlpr/r_ref_mean", "rewards"), ("rzero/uncertainty_mean", "rewards"), ("empo/semantic_entropy_mean", "rewards"),
     ("intuitor/self_certainty_mean", "rewards"), ("r_zero/anything", "other"), ("label_accuracy", "labels & eval"),
     ("reward_accuracy", "labels & eval"), ("maj@16", "labels & eval"), ("pass@1", "labels & eval"), ("eval/pass@16", "labels & eval"),
     ("kl", "optimisation"), ("clip_ratio/low", "optimisation"), ("loss", "optimisation"), ("grad_norm", "optimisation"),
     ("learning_rate", "optimisation"), ("entropy_loss", "optimisation"), ("time/step", "time"),
     ("time/generation", "time"), ("something_new", "other"), ("custom/thing", "other")],
)
def test_the_catalogue_places_each_metric_in_its_group(name, group):
    # as static/js/charts.js reads it: the first rule whose names hold the name, or one of whose prefixes
    # starts it; else "other"
    rules = catalogue()["rules"]
    found = next((r["group"] for r in rules if name in r["names"] or name.startswith(tuple(r["prefixes"]))), "other")
    assert found == group


def test_the_catalogue_marks_each_alert_rule_on_the_metrics_it_reads():
    rule_metrics = catalogue()["rule_metrics"]
    assert rule_metrics["entropy_collapse"] == ["entropy"]
    assert rule_metrics["pass_at_k_divergence"] == ["pass@1", "pass@16", "eval/pass@1", "eval/pass@16"]
    assert "stalled" not in rule_metrics and "run_failed" not in rule_metrics  # these mark every chart


def test_the_page_scripts_hold_no_list_of_metric_or_method_names():
    scripts = "".join(p.read_text() for p in (Path(__file__).parents[2] / "static" / "js").glob("*.js"))
    names = {*catalogue()["order"], *(n for r in catalogue()["rules"] for n in r["names"] + r["prefixes"])}
    assert sorted(n for n in names if f'"{n}"' in scripts) == []


def test_the_page_groups_every_recorded_metric(client, lab):
    run = make_run(lab)
    events = event_log(steps=2)
    events.insert(-2, {"seq": 0, "time": 0, "type": "metrics", "step": 2,
                       "values": {"kl": 0.01, "time/step": 3.5, "my_metric": 1.0, "evol_rl/novelty_mean": 0.3}})
    for n, e in enumerate(events):
        e["seq"] = n
    ingest_events(run, events)
    initial = initial_of(page_for(client, lab[1]["alice"], run))
    # the page places every name, those that first arrive live too, by the server's catalogue
    assert initial["metric_catalogue"] == catalogue()
    assert set(initial["metrics"]) >= {"entropy", "kl", "time/step", "my_metric", "label_accuracy"}
    assert initial["metrics"]["entropy"]["times"][0] > 1_000_000_000
    assert initial["time_origin"] == events[0]["time"]


def test_the_hyperparameter_table_highlights_values_that_differ_from_the_default(client, lab):
    run = make_run(lab, hyperparameters={"n_votes": 8, "n_train": 32, "temperature": 1.0,
                                         "alert_rules": {"entropy_collapse": {"fraction": 0.3}}})
    page = page_for(client, lab[1]["alice"], run)
    assert re.search(r'<tr class="hp-row differs" data-hp="n_votes"><td><code>n_votes</code></td><td class="hp-value">8</td>'
                     r'<td class="hp-default">64</td>', page)
    assert '<tr class="hp-row" data-hp="n_train">' in page and '<tr class="hp-row" data-hp="temperature">' in page
    # Every default of the method is listed, set or not; alert_rules get their own table.
    assert 'data-hp="kl_coef"' in page and 'data-hp="alert_rules"' not in page
    assert 'id="alert-rules"' in page and "<code>entropy_collapse</code></td><td>fraction</td><td>0.3</td>" in page


def test_a_clone_links_its_source(client, lab):
    source = make_run(lab, name="original <b>run</b>")
    clone = make_run(lab, name="copy", cloned_from=source)
    page = page_for(client, lab[1]["alice"], clone)
    assert f'cloned from <a href="/runs/{source.pk}/">original &lt;b&gt;run&lt;/b&gt; #{source.pk}</a>' in page
    assert "cloned from" not in page_for(client, lab[1]["alice"], source)


def test_a_viewer_sees_no_action_buttons_and_a_member_does(client, lab):
    run = make_run(lab, state=Run.RUNNING)
    viewer = page_for(client, lab[1]["vic"], run)
    for form in ("cancel-form", "resume-form", "clone-form"):
        assert f'id="{form}"' not in viewer
    assert initial_of(viewer)["role"] == "viewer" and initial_of(viewer)["can_act"] is False
    member = page_for(client, lab[1]["mel"], run)
    assert 'id="cancel-form"' in member and 'id="clone-form"' in member
    assert initial_of(member)["role"] == "member" and initial_of(member)["can_act"] is True
    assert 'id="alerts"' in member and "csrftoken" in client.cookies


def test_the_page_carries_the_runs_alerts(client, lab):
    from webapp.alerts.models import Alert

    run = make_run(lab)
    Alert.objects.create(team=run.team, run=run, rule="entropy_collapse", severity="critical", step=7, last_step=9,
                         message="entropy fell to <script>x</script>", values={"entropy": 0.01})
    alerts = initial_of(page_for(client, lab[1]["alice"], run))["alerts"]
    assert [(a["rule"], a["step"], a["state"], a["severity"]) for a in alerts] == [("entropy_collapse", 7, "open", "critical")]
    assert alerts[0]["message"] == "entropy fell to <script>x</script>"  # rendered with textContent by run_live.js


def test_the_latest_steps_similarity_matrices_start_the_heatmap(client, lab):
    run = make_run(lab, method="evol_rl")
    events = event_log(steps=2, group_size=2)
    for e in events:
        if e["type"] == "group":
            e["similarity"] = [[1.0, 0.9 + 0.01 * e["step"]], [0.9 + 0.01 * e["step"], 1.0]]
    ingest_events(run, events)
    heatmap = initial_of(page_for(client, lab[1]["alice"], run))["heatmap"]
    assert heatmap["step"] == 2
    assert [(g["prompt_id"], g["majority_answer"]) for g in heatmap["groups"]] == [("p1", "5"), ("p2", "5")]
    assert heatmap["groups"][0]["similarity"] == [[1.0, 0.92], [0.92, 1.0]]


def test_resume_points_are_the_step_logged_before_each_later_running_status(lab):
    run = make_run(lab, max_steps=4)
    first = event_log(steps=2)[:-1]  # no final status: the run was cancelled after step 2
    first.append({"seq": len(first), "time": 1_700_000_100.0, "type": "status", "state": "cancelled", "message": ""})
    resumed = [{"seq": len(first), "time": 1_700_000_200.0, "type": "status", "state": "running", "message": "resumed"}]
    resumed += event_log(steps=2, start_seq=len(first) + 1, start_step=3)
    ingest_events(run, first + resumed)
    assert [(p["step"], p["time"]) for p in resume_points(run)] == [(2, 1_700_000_200.0)]


def test_another_teams_run_page_is_a_404(client, lab, django_user_model):
    run = make_run(lab)
    outsider = django_user_model.objects.create_user(username="eve")
    make_team("eves", eve="admin")
    client.force_login(outsider)
    assert client.get(f"/runs/{run.pk}/").status_code == 404


# --- the compare page ---------------------------------------------------------------------


def test_the_compare_page_lists_the_runs_and_highlights_differing_hyperparameters(client, lab):
    a = make_run(lab, name="alpha", hyperparameters={"n_votes": 8})
    b = make_run(lab, name="beta", hyperparameters={"n_votes": 16})
    ingest_events(a, event_log(steps=2))
    ingest_events(b, event_log(steps=1))
    client.force_login(lab[1]["vic"])
    response = client.get(f"/compare/?runs={a.pk},{b.pk}")
    assert response.status_code == 200
    page = response.content.decode()
    assert re.search(r'<tr class="hp-row differs" data-hp="n_votes"><th><code>n_votes</code></th><td class="hp-cell">8</td>'
                     r'<td class="hp-cell">16</td></tr>', page)
    assert '<tr class="hp-row same" data-hp="n_train">' in page and 'id="only-differing"' in page
    initial = initial_of(page, "compare-initial")
    assert [r["name"] for r in initial["runs"]] == ["alpha", "beta"]
    assert initial["metrics"][str(a.pk)]["entropy"]["steps"] == [1, 2]
    assert initial["metrics"][str(b.pk)]["entropy"]["steps"] == [1]


def test_the_compare_page_names_every_setting_on_which_the_runs_differ(client, lab):
    # EVOL-RL against its TTRL baseline at both methods' defaults: the paper's comparison, so the response length is
    # the same (12,288) and what differs is what EVOL-RL adds; a different seed and step count are named too
    from rl.methods import validate_hyperparameters

    ttrl = make_run(lab, name="ttrl", hyperparameters=validate_hyperparameters("ttrl", {}), seed=1)
    evol = make_run(lab, name="evol", method="evol_rl", hyperparameters=validate_hyperparameters("evol_rl", {}),
                    max_steps=3)
    client.force_login(lab[1]["vic"])
    page = client.get(f"/compare/?runs={ttrl.pk},{evol.pk}").content.decode()
    summary = re.search(r'<p id="hp-differences">(.*?)</p>', page, re.S).group(1)
    named = re.findall(r"<code>([^<]+)</code>", summary)
    assert {"method", "seed", "max_steps", "epsilon_high", "entropy_coef", "alpha"} <= set(named)
    assert "max_completion_length" not in named and "n_votes" not in named
    assert re.search(r'<tr class="hp-row differs" data-hp="seed"><th><code>seed</code></th><td class="hp-cell">1</td>'
                     r'<td class="hp-cell">0</td></tr>', page)


def test_the_compare_page_says_when_nothing_differs(client, lab):
    a = make_run(lab, name="a", hyperparameters={"n_votes": 8})
    b = make_run(lab, name="b", hyperparameters={"n_votes": 8})
    client.force_login(lab[1]["vic"])
    page = client.get(f"/compare/?runs={a.pk},{b.pk}").content.decode()
    assert re.search(r'<p id="hp-differences">\s*Same method, settings and hyperparameters', page)


def test_the_compare_page_names_the_embedder_when_only_it_differs(client, lab):
    # issue 38, defect 5: two EVOL-RL runs differing only in embedding_model read "Same method, settings and
    # hyperparameters", while novelty, the method's reward, is measured by that model
    a = make_run(lab, name="a", method="evol_rl", hyperparameters={"n_votes": 8})
    b = make_run(lab, name="b", method="evol_rl", hyperparameters={"n_votes": 8}, embedding_model="models/e5-small")
    client.force_login(lab[1]["vic"])
    page = client.get(f"/compare/?runs={a.pk},{b.pk}").content.decode()
    summary = re.search(r'<p id="hp-differences">(.*?)</p>', page, re.S).group(1)
    assert re.findall(r"<code>([^<]+)</code>", summary) == ["embedding_model"]
    assert re.search(r'<tr class="hp-row differs" data-hp="embedding_model"><th><code>embedding_model</code></th>'
                     r'<td class="hp-cell">&quot;default \(MiniLM\)&quot;</td><td class="hp-cell">&quot;models/e5-small&quot;</td></tr>',
                     page)


def test_the_compare_page_is_a_404_for_a_run_of_another_team(client, lab, django_user_model):
    run = make_run(lab)
    team = make_team("elsewhere", bob="admin")
    bob = django_user_model.objects.get(username="bob")
    theirs = Run.objects.create(name="theirs", method="ttrl", prompt_set=make_prompt_set(bob, team=team, name="b"),
                                max_steps=1, created_by=bob)
    client.force_login(lab[1]["alice"])
    assert client.get(f"/compare/?runs={run.pk},{theirs.pk}").status_code == 404


def test_the_compare_page_without_runs_offers_a_picker(client, lab):
    run = make_run(lab, name="pick me")
    client.force_login(lab[1]["alice"])
    page = client.get(f"/compare/?runs={run.pk}").content.decode()
    assert f'value="{run.pk}" checked' in page and "pick me" in page
    assert client.get("/compare/?runs=" + ",".join(str(i) for i in range(1, 13))).status_code == 400
    assert client.get("/compare/").status_code == 200
