"""/teams/{id}/alerts/backtest/: replay the alert rules, with thresholds the page sets (never saved), over the
labelled corpus or the team's own past runs (runs trained elsewhere included), and show when each rule would have
opened; over the corpus, how each rule scores against the labels. Read-only: every member of the team, viewers
included. The replay is webapp/alerts/backtest.py; the rules' fields are the alert settings page's."""
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from rl.params import FieldError
from webapp.accounts.access import team_or_404
from webapp.alerts import backtest, corpus, past_runs
from webapp.alerts.engine import team_overrides
from webapp.alerts.rule_forms import overrides_from_form, rule_rows
from webapp.alerts.rule_specs import STEP_RULE_KINDS, resolve_thresholds
from webapp.numbers import whole_number

from .models import Run

MAX_RUNS = 50  # a team's runs replayed at once; the newest are offered


@login_required
def team_backtest(request, pk):
    team = team_or_404(request.user, pk)
    asked = request.GET
    source = "team" if asked.get("source") == "team" else "corpus"
    kinds = [k for k in asked.getlist("rule") if k in STEP_RULE_KINDS] or list(STEP_RULE_KINDS)
    offered = list(Run.objects.filter(team=team).exclude(last_step=None).order_by("-pk")[:MAX_RUNS])
    chosen_ids = {whole_number(v) for v in asked.getlist("run")} - {None}
    error = field = None
    overrides = team_overrides(team.pk)
    replayed, scores = [], None
    if asked.get("go"):
        try:
            # the form's threshold fields start from the team's; a link without them (?go=1) means the team's
            if asked.get("thresholds"):
                overrides = overrides_from_form(asked, STEP_RULE_KINDS)
            thresholds = resolve_thresholds(overrides)
        except FieldError as exc:
            error, field = exc.message, exc.field
        else:
            if source == "corpus":
                trajectories = backtest.corpus_trajectories()
            else:
                trajectories = [past_runs.trajectory_of(run) for run in offered
                                if not chosen_ids or run.pk in chosen_ids]
            replayed = [(t, backtest.replay(t, thresholds, kinds)) for t in trajectories]
            if source == "corpus":
                scores = [*backtest.score(replayed, kinds).values(), backtest.any_collapse_rule(replayed)]
    return render(request, "alerts/backtest.html", {
        "team": team,
        "source": source,
        "kinds": kinds,
        "all_kinds": STEP_RULE_KINDS,
        "offered": offered,
        "chosen_ids": chosen_ids,
        "rule_rows": rule_rows(overrides, STEP_RULE_KINDS),
        "error": error,
        "field": field,
        "rows": [_row(t, openings, kinds) for t, openings in replayed],
        "scores": scores,
        "corpus_size": len(corpus.names()),
        "went": bool(asked.get("go")),
    }, status=400 if error else 200)


def _row(trajectory, openings, kinds) -> dict:
    found = backtest.openings_by_rule(openings)
    return {"trajectory": trajectory, "cells": [{"kind": kind, "openings": found.get(kind, []),
                                                  "text": backtest.spans(found.get(kind, []))} for kind in kinds]}
