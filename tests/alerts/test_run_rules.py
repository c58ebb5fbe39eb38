"""The rules about a run rather than its trend (webapp/alerts/rules.py): stalled, run_failed, and findings as
JSON."""

import json
import math

from webapp.alerts.rule_specs import defaults, resolve_thresholds
from webapp.alerts.rules import Finding, evaluate_run_failed, evaluate_stalled

from tests.alerts.rule_streams import converging, falling, judge, wobble


# ------------------------------------------------------------------------ stalled and run_failed


def test_stalled_fires_after_fifteen_silent_minutes():
    finding = evaluate_stalled(23 * 60, 41, defaults())
    assert (finding.kind, finding.severity, finding.step) == ("stalled", "warning", 41)
    assert finding.message == "no event for 23 minutes while running (threshold 15 minutes)"
    assert finding.values == {"minutes": 23.0, "threshold_minutes": 15.0}


def test_stalled_stays_quiet_before_the_limit_and_when_disabled():
    assert evaluate_stalled(14 * 60, 41, defaults()) is None
    assert evaluate_stalled(float("nan"), 41, defaults()) is None
    assert evaluate_stalled(60 * 60, 41, resolve_thresholds({"stalled": {"enabled": False}})) is None


def test_stalled_honours_a_run_override_of_the_minutes():
    thresholds = resolve_thresholds({"stalled": {"minutes": 10}}, {"stalled": {"minutes": "45"}})
    assert evaluate_stalled(30 * 60, None, thresholds) is None
    assert evaluate_stalled(50 * 60, None, thresholds).step is None


def test_run_failed_is_always_a_critical_finding_with_the_failure_message():
    finding = evaluate_run_failed("CUDA out of memory.\n  Tried to allocate 2.00 GiB", 12, defaults())
    assert (finding.kind, finding.severity, finding.step) == ("run_failed", "critical", 12)
    assert finding.message == "run failed: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert evaluate_run_failed("", None, defaults()).message == "run failed: no message"


def test_run_failed_is_none_only_when_disabled_and_honours_the_severity_override():
    assert evaluate_run_failed("boom", 3, resolve_thresholds({"run_failed": {"enabled": False}})) is None
    assert evaluate_run_failed("boom", 3, resolve_thresholds({"run_failed": {"severity": "warning"}})).severity == "warning"


def test_run_failed_shortens_a_very_long_failure_message():
    finding = evaluate_run_failed("x" * 5000, 3, defaults())
    assert len(finding.message) < 1100 and finding.message.endswith("…")


def test_findings_serialise_to_plain_json():
    finding = judge(converging(wobble(falling(0.9, 0.09), 0.01)), "entropy_collapse")
    payload = json.loads(json.dumps(finding.to_json()))
    assert payload == {"kind": "entropy_collapse", "severity": "warning", "step": 10, "message": finding.message,
                       "values": finding.values}
    assert all(type(v) is float and math.isfinite(v) for v in payload["values"].values())
    assert isinstance(finding, Finding)
