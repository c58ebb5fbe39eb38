"""The collapse-alert rules as data (webapp/alerts/rule_specs.py, DESIGN §4.5): kinds,
parameters and their documented defaults, override checking and threshold layers."""

import ast
import json
from pathlib import Path

import pytest

from webapp.alerts.rule_specs import (
    RULE_KINDS,
    RULES,
    SEVERITIES,
    Param,
    RuleSpec,
    defaults,
    resolve_thresholds,
    validate_overrides,
)
from rl.params import FieldError


# ------------------------------------------------------------------------ schema


def test_every_rule_kind_has_a_spec_whose_first_params_are_enabled_and_severity():
    assert tuple(RULES) == RULE_KINDS
    for kind, spec in RULES.items():
        assert isinstance(spec, RuleSpec) and spec.kind == kind
        enabled, severity = spec.params[:2]
        assert (enabled.name, enabled.type, enabled.default) == ("enabled", "bool", True)
        assert (severity.name, severity.type, severity.choices) == ("severity", "choice", SEVERITIES)
        assert severity.default in SEVERITIES
        assert len({p.name for p in spec.params}) == len(spec.params)


def test_every_rule_description_cites_its_evidence_and_every_param_is_explained():
    for spec in RULES.values():
        assert len(spec.description) > 150
        assert all(isinstance(p, Param) and p.help for p in spec.params)
    for kind in ("entropy_collapse", "diversity_collapse", "majority_lock_in", "pass_at_k_divergence", "length_collapse"):
        assert "Figure" in RULES[kind].description


def test_rule_specs_serialise_to_plain_json():
    payload = json.loads(json.dumps([spec.to_json() for spec in RULES.values()]))
    entropy = payload[0]
    assert entropy["kind"] == "entropy_collapse" and entropy["metrics"] == ["entropy"]
    fraction = next(p for p in entropy["params"] if p["name"] == "fraction")
    assert fraction == {"name": "fraction", "type": "float", "default": 0.6, "help": fraction["help"],
                        "min": 0.0, "max": 1.0, "choices": [], "nullable": False,
                        "min_exclusive": False}


def test_defaults_hold_every_param_of_every_rule_with_the_documented_values():
    values = defaults()
    assert set(values) == set(RULE_KINDS)
    for kind, spec in RULES.items():
        assert set(values[kind]) == {p.name for p in spec.params}
        assert values[kind]["enabled"] is True
    assert values["entropy_collapse"] == {"enabled": True, "severity": "warning", "window": 5, "start_window": 5,
                                          "z": 2.0, "fraction": 0.6, "critical_fraction": 0.05, "min_kl": 0.001,
                                          "confirm": True}
    # chosen on the corpus's seed-0 runs (benchmarks/bench_forecast.py); the thresholds it forecasts are
    # entropy_collapse's
    assert values["entropy_collapse_forecast"] == {"enabled": True, "severity": "warning", "horizon": 30,
                                                   "confidence": 0.8, "fit_window": 15, "window": 5,
                                                   "start_window": 5, "fraction": 0.6, "min_kl": 0.001}
    assert all(values["entropy_collapse_forecast"][name] == values["entropy_collapse"][name]
               for name in ("window", "start_window", "fraction", "min_kl"))
    assert values["majority_lock_in"]["consensus"] == 0.95
    assert values["pass_at_k_divergence"]["min_drop"] == 0.05
    assert values["invalid_answers"]["max_ratio"] == 0.5
    assert values["zero_variance_groups"]["max_ratio"] == 0.8
    assert values["degeneration"] == {"enabled": True, "severity": "critical", "window": 3, "start_window": 3,
                                      "z": 2.0, "entropy_rise": 1.5, "pinned_ratio": 0.5, "min_invalid": 0.9}
    assert values["stalled"]["minutes"] == 15.0
    assert values["run_failed"]["severity"] == "critical"
    # the training goes on when Evolab's own work on it fails (issue 36, item 7)
    assert values["processing_failed"] == {"enabled": True, "severity": "warning"}


@pytest.mark.parametrize("module", ["webapp/alerts/rule_specs.py", "webapp/alerts/rules.py", "webapp/alerts/trend.py",
                                    "webapp/alerts/forecast.py", "webapp/alerts/findings.py", "webapp/alerts/backtest.py",
                                    "webapp/alerts/corpus.py", "rl/params.py"])
def test_the_rules_never_import_django_or_numpy(module):
    # they judge a run's history, read from anywhere: a test or a script runs them without a database
    source = Path(__file__).resolve().parents[2].joinpath(module).read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert not imported & {"django", "webapp", "workers", "numpy"}


# ------------------------------------------------------------------------ overrides


def test_validate_overrides_coerces_strings_to_each_params_type():
    overrides = {
        "entropy_collapse": {"fraction": "0.3", "window": "5", "enabled": "false"},
        "majority_lock_in": {"severity": " critical ", "window": 4.0},
        "stalled": {"minutes": 30},
    }
    assert validate_overrides(overrides) == {
        "entropy_collapse": {"fraction": 0.3, "window": 5, "enabled": False},
        "majority_lock_in": {"severity": "critical", "window": 4},
        "stalled": {"minutes": 30.0},
    }


def test_validate_overrides_treats_none_as_no_overrides():
    assert validate_overrides(None) == {}
    assert validate_overrides({}) == {}


@pytest.mark.parametrize(
    "overrides, field, words",
    [
        ({"entropy_collapse": {"fraction": 1.5}}, "alert_rules.entropy_collapse.fraction", "[0, 1]"),
        ({"entropy_collapse": {"fraction": "a lot"}}, "alert_rules.entropy_collapse.fraction", "a number"),
        ({"entropy_collapse": {"window": 2.5}}, "alert_rules.entropy_collapse.window", "an integer in [1, 100]"),
        ({"entropy_collapse": {"window": 0}}, "alert_rules.entropy_collapse.window", "an integer in [1, 100]"),
        ({"entropy_collapse": {"fraction": True}}, "alert_rules.entropy_collapse.fraction", "a number"),
        ({"entropy_collapse": {"fraction": float("nan")}}, "alert_rules.entropy_collapse.fraction", "a number"),
        ({"entropy_collapse": {"enabled": "maybe"}}, "alert_rules.entropy_collapse.enabled", "true or false"),
        ({"stalled": {"severity": "fatal"}}, "alert_rules.stalled.severity", "'info', 'warning', 'critical'"),
        ({"stalled": {"minutes": 0}}, "alert_rules.stalled.minutes", "[1, 10080]"),
        ({"entropy_colapse": {}}, "alert_rules.entropy_colapse", "entropy_collapse"),
        ({"entropy_collapse": {"frac": 0.1}}, "alert_rules.entropy_collapse.frac", "fraction"),
        ({"entropy_collapse": 0.1}, "alert_rules.entropy_collapse", "object"),
        (["entropy_collapse"], "alert_rules", "object"),
    ],
)
def test_validate_overrides_errors_name_the_field_and_the_allowed_values(overrides, field, words):
    with pytest.raises(FieldError) as caught:
        validate_overrides(overrides)
    assert caught.value.field == field
    assert words in caught.value.message and str(caught.value) == caught.value.message


def test_run_overrides_win_over_team_overrides_which_win_over_defaults():
    team = {"entropy_collapse": {"fraction": 0.4, "severity": "critical"}, "majority_lock_in": {"enabled": False}}
    run = {"entropy_collapse": {"fraction": "0.25"}, "majority_lock_in": {"enabled": True}}
    resolved = resolve_thresholds(team, None, run)
    assert resolved["entropy_collapse"] == {**defaults()["entropy_collapse"], "severity": "critical",
                                            "fraction": 0.25}
    assert resolved["majority_lock_in"]["enabled"] is True
    assert resolved["length_collapse"] == defaults()["length_collapse"]
    assert resolve_thresholds() == defaults()


def test_resolve_thresholds_rejects_a_stale_invalid_layer():
    with pytest.raises(FieldError) as caught:
        resolve_thresholds({"invalid_answers": {"max_ratio": 2}})
    assert caught.value.field == "alert_rules.invalid_answers.max_ratio"
