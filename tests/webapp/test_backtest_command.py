"""manage.py backtest: the alert rules replayed over the labelled corpus (by default) or a team's runs, with
thresholds given on the command line, and each rule scored against the corpus's labels."""
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from tests.alerts.streams import collapsing, metric_events
from tests.factories import make_prompt_set, make_team
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run


def backtest(*args) -> str:
    out = StringIO()
    call_command("backtest", *args, stdout=out)
    return out.getvalue()


def test_it_replays_corpus_runs_and_scores_the_rules_against_their_labels():
    out = backtest("--corpus", "ttrl-lr0.0001-s0", "ttrl-small-lr5e-07-s0", "--rule", "entropy_collapse")
    lines = out.splitlines()
    assert lines[0].split() == ["ttrl-lr0.0001-s0", "collapse", "at", "18", "entropy_collapse", "11–16,", "17–"]
    assert lines[1].split() == ["ttrl-small-lr5e-07-s0", "no", "learning", "no", "alert"]
    assert lines[3].split()[0] == "rule" and lines[4].split()[:2] == ["entropy_collapse", "1/1"]


def test_thresholds_given_on_the_command_line_are_tried_and_checked():
    out = backtest("--corpus", "ttrl-lr0.0001-s0", "--rule", "entropy_collapse", "--set", "entropy_collapse.fraction=0.05")
    assert out.splitlines()[0].endswith("no alert")
    with pytest.raises(CommandError, match="alert_rules.entropy_collapse.fraction=.7. is invalid"):
        backtest("--set", "entropy_collapse.fraction=7")
    with pytest.raises(CommandError, match="--rule no_rule"):
        backtest("--rule", "no_rule")


@pytest.mark.django_db
def test_it_replays_a_team_s_runs(django_user_model, monkeypatch, django_capture_on_commit_callbacks):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)
    team = make_team("lab", ada="admin")
    ada = django_user_model.objects.get(username="ada")
    run = Run.objects.create(name="falling", method="ttrl", prompt_set=make_prompt_set(ada, team=team), max_steps=12,
                             created_by=ada)
    with django_capture_on_commit_callbacks(execute=True):
        ingest_events(run, metric_events(collapsing()))
    out = backtest("--team", "lab", "--rule", "entropy_collapse")
    assert out.split() == [f"#{run.pk}", "falling", "entropy_collapse", "10–"]
    with pytest.raises(CommandError, match="no team 'nobody'"):
        backtest("--team", "nobody")
    with pytest.raises(CommandError, match="--run 99999: no such run in team lab"):
        backtest("--team", "lab", "--run", "99999")
