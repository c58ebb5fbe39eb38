"""The run list (`/`): filters, team isolation, health figures, alert counts, compare.
The live updates are driven in a browser by tests/e2e/test_run_list_browser.py."""
import re

import pytest

from tests.factories import event_log, make_prompt_set, make_team
from webapp.accounts.teams import SESSION_KEY
from webapp.alerts.models import Alert
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model):
    """ada is in `lab` (admin) and `side` (member); bob is in `lab` and `other`; eve's
    team `secret` is nobody else's."""
    lab = make_team("lab", ada="admin", bob="member")
    side = make_team("side", ada="member")
    other = make_team("other", bob="admin")
    secret = make_team("secret", eve="admin")
    users = {u.username: u for u in django_user_model.objects.all()}
    sets = {
        "arith": make_prompt_set(users["ada"], name="arith", team=lab),
        "algebra": make_prompt_set(users["ada"], name="algebra", team=lab),
        "side-set": make_prompt_set(users["ada"], name="side-set", team=side),
        "other-set": make_prompt_set(users["bob"], name="other-set", team=other),
        "secret-set": make_prompt_set(users["eve"], name="secret-set", team=secret),
    }
    return {"teams": {"lab": lab, "side": side, "other": other, "secret": secret}, "users": users, "sets": sets}


def make_run(world, name, prompt_set="arith", by="ada", **fields):
    fields.setdefault("method", "ttrl")
    fields.setdefault("max_steps", 5)
    fields.setdefault("state", Run.SUCCEEDED)
    return Run.objects.create(name=name, prompt_set=world["sets"][prompt_set], created_by=world["users"][by], **fields)


def listed(client, user, query="", team=None):
    client.force_login(user)
    if team is not None:
        session = client.session
        session[SESSION_KEY] = team.pk
        session.save()
    response = client.get("/" + query)
    assert response.status_code == 200
    page = response.content.decode()
    return page, [int(pk) for pk in re.findall(r'<tr data-run-id="(\d+)"', page)]


def test_the_list_defaults_to_the_current_team(client, world):
    lab_run = make_run(world, "in-lab")
    side_run = make_run(world, "in-side", prompt_set="side-set")
    _, ids = listed(client, world["users"]["ada"], team=world["teams"]["lab"])
    assert ids == [lab_run.pk]
    _, ids = listed(client, world["users"]["ada"], team=world["teams"]["side"])
    assert ids == [side_run.pk]


def test_all_my_teams_lists_the_runs_of_every_team_of_the_user(client, world):
    lab_run = make_run(world, "in-lab")
    side_run = make_run(world, "in-side", prompt_set="side-set")
    make_run(world, "in-other", prompt_set="other-set", by="bob")
    page, ids = listed(client, world["users"]["ada"], "?team=all")
    assert sorted(ids) == sorted([lab_run.pk, side_run.pk])
    assert ">side<" in page and ">lab<" in page  # the team column


@pytest.mark.parametrize("query, expected", [
    ("?team=all&method=evol_rl", {"evol"}),
    ("?team=all&state=running", {"running"}),
    ("?team=all&prompt_set={algebra}", {"on-algebra"}),
    ("?team={side}", {"in-side"}),
    ("?team=all&created_by=bob", {"bobs"}),
    ("?team=all&tag=baseline", {"tagged"}),
    ("?team=all&method=ttrl&created_by=bob&tag=aime", {"bobs"}),
])
def test_each_filter_narrows_the_list_and_filters_combine(client, world, query, expected):
    make_run(world, "plain")
    make_run(world, "evol", method="evol_rl")
    make_run(world, "running", state=Run.RUNNING)
    make_run(world, "on-algebra", prompt_set="algebra")
    make_run(world, "in-side", prompt_set="side-set")
    make_run(world, "bobs", by="bob", tags=["aime"])
    make_run(world, "tagged", tags=["baseline", "aime-2024"])  # "baseline" only: a tag matches whole
    query = query.format(algebra=world["sets"]["algebra"].pk, side=world["teams"]["side"].pk)
    _, ids = listed(client, world["users"]["ada"], query)
    assert set(Run.objects.filter(pk__in=ids).values_list("name", flat=True)) == expected


def test_a_tag_filter_matches_whole_tags_only(client, world):
    make_run(world, "tagged", tags=["aime-2024"])
    _, ids = listed(client, world["users"]["ada"], "?team=all&tag=aime")
    assert ids == []


def test_a_run_of_another_team_is_never_listed(client, world):
    secret = make_run(world, "eves-run", prompt_set="secret-set", by="eve")
    other = make_run(world, "bobs-other", prompt_set="other-set", by="bob")
    for query in ("", "?team=all", f"?team={world['teams']['secret'].pk}", f"?team={world['teams']['other'].pk}",
                  f"?team=all&prompt_set={world['sets']['secret-set'].pk}", "?team=all&created_by=eve"):
        page, ids = listed(client, world["users"]["ada"], query)
        assert secret.pk not in ids and other.pk not in ids, query
        assert "eves-run" not in page and "secret-set" not in page and "bobs-other" not in page
    # The filter bar offers only the user's teams.
    page, _ = listed(client, world["users"]["ada"], "?team=all")
    assert ">secret<" not in page and ">other<" not in page


def test_each_row_shows_the_last_health_figures_and_its_active_alerts(client, world):
    run = make_run(world, "watched", state=Run.RUNNING)
    ingest_events(run, event_log(steps=3))  # entropy 1/step, length 20 + step, majority 0.5
    for rule, severity, state in (("entropy_collapse", "warning", Alert.OPEN),
                                  ("length_collapse", "critical", Alert.ACKNOWLEDGED),
                                  ("majority_lock_in", "critical", Alert.RESOLVED)):
        Alert.objects.create(team=run.team, run=run, rule=rule, severity=severity, state=state, message="m")
    quiet = make_run(world, "quiet")
    page, _ = listed(client, world["users"]["ada"], "?team=all")
    row = re.search(rf'<tr data-run-id="{run.pk}".*?</tr>', page, re.S).group(0)
    assert 'data-health="entropy" class="num">0.333<' in row
    assert 'data-health="response_length/mean" class="num">23<' in row
    assert 'data-health="majority_ratio" class="num">0.50<' in row
    # Two active alerts (the resolved one does not count), styled by the worst.
    assert re.search(r'class="alert-count severity-critical".*?<span class="badge severity-critical">2</span>', row, re.S)
    assert f'href="/runs/{run.pk}/#alerts"' in row
    assert "3 / 5" in row
    quiet_row = re.search(rf'<tr data-run-id="{quiet.pk}".*?</tr>', page, re.S).group(0)
    assert 'data-health="entropy" class="num">—<' in quiet_row and "alert-count" not in quiet_row


def test_health_figures_and_alerts_take_the_same_queries_for_one_run_or_many(client, world):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(world["users"]["ada"])
    first = make_run(world, "r0")
    ingest_events(first, event_log(steps=2))

    def count():
        with CaptureQueriesContext(connection) as queries:
            assert client.get("/?team=all").status_code == 200
        return len(queries)

    one = count()
    for n in range(1, 12):
        run = make_run(world, f"r{n}")
        ingest_events(run, event_log(steps=2))
        Alert.objects.create(team=run.team, run=run, rule="entropy_collapse", severity="warning", message="m")
    assert count() == one


def test_rows_have_a_checkbox_and_a_compare_button_for_the_compare_page(client, world):
    a, b = make_run(world, "a"), make_run(world, "b")
    page, _ = listed(client, world["users"]["ada"])
    for run in (a, b):
        assert f'<input type="checkbox" name="runs" value="{run.pk}" class="run-select"' in page
    assert '<form method="get" action="/compare/" id="compare-form">' in page
    assert re.search(r'<button type="submit" id="compare-button" disabled', page)


def test_names_and_tags_are_escaped(client, world):
    make_run(world, "<script>alert(1)</script>", tags=["<b>x</b>"])
    page, _ = listed(client, world["users"]["ada"])
    assert "<script>alert(1)</script>" not in page and "<b>x</b>" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_fragment_is_the_table_body_alone_with_the_same_filters(client, world):
    make_run(world, "evol", method="evol_rl")
    keep = make_run(world, "ttrl")
    client.force_login(world["users"]["ada"])
    body = client.get("/?team=all&method=ttrl&fragment=1").content.decode()
    assert body.strip().startswith('<tbody id="run-rows">') and body.strip().endswith("</tbody>")
    assert re.findall(r'<tr data-run-id="(\d+)"', body) == [str(keep.pk)]


def test_the_page_opens_a_socket_for_each_team_shown(client, world):
    page, _ = listed(client, world["users"]["ada"], "?team=all")
    config = re.search(r'<script id="run-list-config" type="application/json">(.*?)</script>', page, re.S).group(1)
    import json

    assert sorted(json.loads(config)["teams"]) == sorted([world["teams"]["lab"].pk, world["teams"]["side"].pk])
    page, _ = listed(client, world["users"]["ada"], f"?team={world['teams']['side'].pk}")
    config = re.search(r'<script id="run-list-config" type="application/json">(.*?)</script>', page, re.S).group(1)
    assert json.loads(config)["teams"] == [world["teams"]["side"].pk]


# a NUL cannot be sent to PostgreSQL, '²' passes isdigit() but not int(), 30 digits pass a bigint
@pytest.mark.parametrize("field", ["team", "method", "state", "source", "prompt_set", "created_by", "tag"])
@pytest.mark.parametrize("value", ["%00", "a%00b", "%C2%B2", "9" * 30])
def test_a_hostile_filter_value_is_answered_and_never_a_500(client, world, field, value):
    make_run(world, "kept")
    client.force_login(world["users"]["ada"])
    response = client.get(f"/?{field}={value}")
    assert response.status_code in (200, 400), response.status_code
