"""The backtest page (/teams/{id}/alerts/backtest/): any member replays the alert rules, with thresholds the page
sets and never saves, over the labelled corpus or the team's own past runs, and sees when each would have opened."""
import re

import pytest

from tests.alerts.streams import collapsing, metric_events
from tests.factories import make_prompt_set, make_team, signed_in
from webapp.alerts.models import TeamAlertRules
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *args, **kwargs: None)


@pytest.fixture
def team(django_user_model):
    team = make_team("lab", ada="admin", vic="viewer")
    make_team("other", eve="admin")
    return team


def cell(page: str, run: str, rule: str) -> str:
    row = re.search(rf'<tr data-run="{re.escape(run)}">(.*?)</tr>', page, re.S)[1]
    return re.sub(r"<[^>]+>", "", re.search(rf'<td data-rule="{rule}">(.*?)</td>', row, re.S)[1]).strip()


def test_a_viewer_replays_the_rules_over_the_corpus_and_sees_each_rule_s_score(team, django_user_model):
    page = signed_in(django_user_model, "vic").get(f"/teams/{team.pk}/alerts/backtest/",
                                                   {"go": "1", "source": "corpus"}).content.decode()
    # the Figure 1 TTRL run (tests/alerts/test_real_trajectories.py): open at 11, resolved at 16, again from 17
    assert cell(page, "ttrl-lr0.0001-s0", "entropy_collapse") == "11–16, 17–"
    assert cell(page, "ttrl-small-lr5e-07-s0", "entropy_collapse") == "—"  # the default launch
    scores = re.search(r'<tr data-rule="entropy_collapse">(.*?)</tr>', page.split('id="scores-table"')[1], re.S)[1]
    assert re.search(r"<td>\d+ of 20</td>", scores)


def test_thresholds_set_on_the_page_change_the_replay_and_nothing_is_saved(team, django_user_model):
    ada = signed_in(django_user_model, "ada")
    page = ada.get(f"/teams/{team.pk}/alerts/backtest/", {"go": "1", "source": "corpus", "rule": "entropy_collapse",
                                                           "thresholds": "1", "rule-entropy_collapse-fraction": "0.05",
                                                           "rule-entropy_collapse-enabled": "on",
                                                           "rule-entropy_collapse-confirm": "on"}).content.decode()
    assert cell(page, "ttrl-lr0.0001-s0", "entropy_collapse") == "—"  # 5% of the start: never
    assert 'data-rule="degeneration"' not in page.split('id="backtest-table"')[1]  # only the rules asked for
    assert not TeamAlertRules.objects.exists()


def test_a_bad_threshold_is_named_and_nothing_is_replayed(team, django_user_model):
    response = signed_in(django_user_model, "ada").get(f"/teams/{team.pk}/alerts/backtest/", {
        "go": "1", "thresholds": "1", "rule-entropy_collapse-fraction": "7"})
    assert response.status_code == 400
    page = response.content.decode()
    assert "alert_rules.entropy_collapse.fraction=&#x27;7&#x27; is invalid" in page and 'id="backtest-results"' not in page


def test_the_team_s_own_runs_are_replayed_with_its_thresholds(team, django_user_model, django_capture_on_commit_callbacks):
    ada = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="collapsing <b>run</b>", method="ttrl", prompt_set=make_prompt_set(ada, team=team),
                             max_steps=12, created_by=ada)
    with django_capture_on_commit_callbacks(execute=True):
        ingest_events(run, metric_events(collapsing()))
    client = signed_in(django_user_model, "vic")
    page = client.get(f"/teams/{team.pk}/alerts/backtest/", {"go": "1", "source": "team"}).content.decode()
    name = f"#{run.pk} collapsing &lt;b&gt;run&lt;/b&gt;"  # escaped
    assert f'href="/runs/{run.pk}/">{name}</a>' in page
    assert cell(page, f"#{run.pk} collapsing &lt;b&gt;run&lt;/b&gt;", "entropy_collapse").startswith("10–")
    TeamAlertRules.objects.create(team=team, overrides={"entropy_collapse": {"enabled": False}})
    page = client.get(f"/teams/{team.pk}/alerts/backtest/").content.decode()
    assert re.search(r'name="rule-entropy_collapse-enabled"\s*>', page)  # unticked: the team's threshold shown


def test_another_team_s_member_gets_a_404(team, django_user_model):
    assert signed_in(django_user_model, "eve").get(f"/teams/{team.pk}/alerts/backtest/").status_code == 404


def test_the_team_alerts_page_links_to_it(team, django_user_model):
    page = signed_in(django_user_model, "vic").get(f"/teams/{team.pk}/alerts/").content.decode()
    assert f'href="/teams/{team.pk}/alerts/backtest/"' in page
