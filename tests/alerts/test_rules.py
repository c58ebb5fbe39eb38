"""What the collapse-alert rules judge (webapp/alerts/rules.py, DESIGN §4.5).

Every stream below is small enough to check by hand; with the default window of 3 the
smoothed value is the median of the last three steps and the start value the median of
the first three logged ones.
"""

import json
import math

import pytest

from webapp.alerts.rule_specs import STEP_RULE_KINDS, defaults, resolve_thresholds
from webapp.alerts.rules import Finding, History, evaluate_run_failed, evaluate_stalled, evaluate_step_rules

from tests.alerts.rule_streams import degenerating_stream, history, judge

STEP_KINDS = STEP_RULE_KINDS


# ------------------------------------------------------------------------ thresholds in use


def test_thresholds_from_team_then_run_layers_take_effect():
    # start 1.0, latest median 0.3: 30% of the start
    stream = {"entropy": [1.0, 1.0, 1.0, 0.3, 0.3, 0.3], "majority_ratio": [0.97] * 6}
    team = {"entropy_collapse": {"fraction": 0.4, "severity": "info"}, "majority_lock_in": {"enabled": False}}
    run = {"entropy_collapse": {"fraction": 0.25}, "majority_lock_in": {"enabled": True, "consensus": 0.99}}

    by_default = evaluate_step_rules(history(stream), resolve_thresholds())
    assert by_default["entropy_collapse"].severity == "warning"  # 30% is below the default half
    assert by_default["majority_lock_in"].kind == "majority_lock_in"

    for_team = evaluate_step_rules(history(stream), resolve_thresholds(team))
    assert for_team["entropy_collapse"].severity == "info"  # 30% < the team's 40%
    assert "majority_lock_in" not in for_team  # the team disabled it

    for_run = evaluate_step_rules(history(stream), resolve_thresholds(team, run))
    assert for_run["entropy_collapse"] is None  # 30% is above the run's 25%
    assert for_run["majority_lock_in"] is None  # re-enabled, and 0.97 < the run's 0.99


def test_evaluate_step_rules_fills_defaults_for_kinds_the_thresholds_leave_out():
    results = evaluate_step_rules(history({"invalid_ratio": [0.6, 0.6, 0.6]}), {})
    assert results["invalid_answers"].severity == "warning"


# ------------------------------------------------------------------------ absent, disabled, empty


def test_no_steps_yet_judges_nothing():
    assert evaluate_step_rules(History(steps=[], metrics={}), defaults()) == {}


@pytest.mark.parametrize("kind", STEP_KINDS)
def test_a_rule_whose_metrics_were_never_logged_is_absent(kind):
    unrelated = {"kl": [0.01] * 12, "loss": [0.1] * 12, "entropy": [None] * 12}
    assert judge(unrelated, kind) == "absent"


@pytest.mark.parametrize("kind", STEP_KINDS)
def test_a_disabled_rule_is_absent_even_when_its_condition_holds(kind):
    failed = degenerating_stream() if kind == "degeneration" else collapsing_ttrl_stream()
    assert kind in evaluate_step_rules(history(failed, 1024), defaults())
    assert kind not in evaluate_step_rules(history(failed, 1024), resolve_thresholds({kind: {"enabled": False}}))


# ------------------------------------------------------------------------ entropy_collapse


def test_entropy_collapse_fires_when_entropy_falls_below_half_its_start():
    # start = median(0.9, 0.9, 0.9) = 0.9; latest = median(0.3, 0.3, 0.3) = 0.3 = 33% < 50%: a fall by two
    # thirds, as the real TTRL runs of docs/experiments.md show (tests/alerts/test_real_trajectories.py)
    finding = judge({"entropy": [0.9, 0.9, 0.9, 0.6, 0.4, 0.3, 0.3, 0.3]}, "entropy_collapse")
    assert finding.severity == "warning" and finding.step == 8
    assert finding.message == "entropy fell to 0.3, 33% of its start 0.9 (threshold 50%)"
    assert finding.values == {"entropy": 0.3, "entropy_start": 0.9, "share": 0.333333, "fraction": 0.5,
                              "critical_fraction": 0.05}


def test_entropy_collapse_says_when_most_answers_are_invalid_too():
    # narrower sampling onto no answer at all is not rollouts agreeing: the message gives the invalid share
    finding = judge({"entropy": [0.9, 0.9, 0.9, 0.3, 0.3, 0.3], "invalid_ratio": [0.1, 0.1, 0.1, 0.8, 0.9, 0.9]},
                    "entropy_collapse")
    assert finding.message == "entropy fell to 0.3, 33% of its start 0.9 (threshold 50%); 90% of answers invalid"
    assert finding.values["invalid_ratio"] == 0.9


def test_entropy_collapse_turns_critical_below_a_twentieth_of_its_start():
    # latest 0.03 is 3.3% of 0.9, under the 5% escalation level
    finding = judge({"entropy": [0.9, 0.9, 0.9, 0.03, 0.03, 0.03]}, "entropy_collapse")
    assert finding.severity == "critical"
    assert finding.message == "entropy fell to 0.03, 3.3% of its start 0.9 (critical below 5%)"


def test_entropy_collapse_stays_quiet_while_entropy_keeps_half_its_start():
    assert judge({"entropy": [0.9, 0.9, 0.9, 0.7, 0.6, 0.5, 0.45]}, "entropy_collapse") is None


def test_entropy_collapse_is_absent_before_two_windows_of_steps():
    assert judge({"entropy": [0.9, 0.9, 0.9, 0.01, 0.01]}, "entropy_collapse") == "absent"
    assert judge({"entropy": [0.9, 0.9, 0.9, 0.01, 0.01, 0.01]}, "entropy_collapse").kind == "entropy_collapse"


def test_entropy_collapse_resolves_when_entropy_recovers_as_evol_rl_does_after_its_evolving_point():
    # EVOL-RL Fig. 3: a Stage-1 dip, then recovery: latest median 0.6 is 67% of the start
    stream = [0.9, 0.9, 0.9, 0.1, 0.1, 0.1, 0.5, 0.6, 0.7]
    assert judge({"entropy": stream[:6]}, "entropy_collapse").kind == "entropy_collapse"
    assert judge({"entropy": stream}, "entropy_collapse") is None


def test_one_noisy_entropy_step_neither_fires_nor_resolves():
    assert judge({"entropy": [0.9] * 7 + [0.001]}, "entropy_collapse") is None
    collapsed = [0.9, 0.9, 0.9, 0.05, 0.05, 0.05, 0.05]
    assert judge({"entropy": collapsed + [5.0]}, "entropy_collapse").kind == "entropy_collapse"


def test_entropy_collapse_skips_missing_and_nan_values():
    # logged: 0.9, 0.9, 0.9, 0.1, 0.1, 0.1 (six values); the last window holds 0.1, None, 0.1
    stream = [0.9, float("nan"), 0.9, 0.9, None, 0.1, 0.1, None, 0.1]
    assert judge({"entropy": stream}, "entropy_collapse").values["entropy"] == 0.1


def test_a_zero_or_negative_start_cannot_give_a_fraction_so_entropy_collapse_is_absent():
    assert judge({"entropy": [0.0] * 8}, "entropy_collapse") == "absent"
    assert judge({"entropy": [-1.0, -1.0, -1.0, -2.0, -2.0, -2.0]}, "entropy_collapse") == "absent"


def test_entropy_collapse_is_absent_when_entropy_stopped_being_logged():
    assert judge({"entropy": [0.9] * 6 + [None] * 3}, "entropy_collapse") == "absent"


# ------------------------------------------------------------------------ diversity_collapse


def test_diversity_collapse_fires_when_similarity_rises_to_near_duplicates():
    # start median 0.7, latest median 0.96: at least 0.9 and 0.26 above the start
    finding = judge({"similarity/mean": [0.7, 0.7, 0.7, 0.8, 0.9, 0.95, 0.96, 0.96]}, "diversity_collapse")
    assert finding.message == ("rollouts are converging: similarity/mean rose to 0.96 from 0.7 "
                               "(threshold 0.9 and +0.1)")
    assert finding.values["similarity"] == 0.96 and finding.values["similarity_start"] == 0.7


def test_diversity_collapse_fires_when_unique_answers_fall_to_two_fifths_of_their_start():
    # start median 5 distinct answers, latest median 2 = 40% of 5
    finding = judge({"unique_answers": [5, 5, 5, 4, 3, 2, 2, 2]}, "diversity_collapse")
    assert finding.message == ("rollouts are converging: unique answers per prompt fell to 2, 40% of its start 5 "
                               "(threshold 40%)")


def test_diversity_collapse_names_both_signals_when_both_hold():
    finding = judge({"similarity/mean": [0.7, 0.7, 0.7, 0.95, 0.95, 0.95],
                     "unique_answers": [6, 6, 6, 1, 1, 1]}, "diversity_collapse")
    assert "similarity/mean rose to 0.95" in finding.message and "unique answers per prompt fell to 1" in finding.message


def test_diversity_collapse_does_not_read_lost_answers_as_converging_ones():
    # every answer invalid: unique_answers (valid answers only) falls to 0, which is not agreement
    stream = {"unique_answers": [5, 5, 5, 0, 0, 0], "invalid_ratio": [0.1, 0.1, 0.1, 1.0, 1.0, 1.0]}
    assert judge(stream, "diversity_collapse") is None


def test_diversity_collapse_on_near_duplicate_text_without_answers_says_so_and_not_converging():
    stream = {"similarity/mean": [0.7, 0.7, 0.7, 0.95, 0.95, 0.95], "unique_answers": [5, 5, 5, 0, 0, 0],
              "invalid_ratio": [0.1, 0.1, 0.1, 1.0, 1.0, 1.0]}
    finding = judge(stream, "diversity_collapse")
    assert finding.message == ("rollouts are near duplicates: similarity/mean rose to 0.95 from 0.7 "
                               "(threshold 0.9 and +0.1); 100% of answers invalid")
    assert "converging" not in finding.message and finding.values["invalid_ratio"] == 1.0


def test_diversity_collapse_ignores_similarity_that_was_high_from_the_start():
    # cosine similarity of solutions to one problem starts high; 0.88 -> 0.93 is a rise of only 0.05
    assert judge({"similarity/mean": [0.88, 0.88, 0.88, 0.93, 0.93, 0.93]}, "diversity_collapse") is None


def test_diversity_collapse_stays_quiet_on_a_healthy_stream():
    healthy = {"similarity/mean": [0.7, 0.72, 0.71, 0.73, 0.72, 0.74, 0.73], "unique_answers": [5, 5, 5, 4, 4, 4, 4]}
    assert judge(healthy, "diversity_collapse") is None


def test_diversity_collapse_is_absent_until_either_signal_has_two_windows():
    short = {"similarity/mean": [0.7, 0.7, 0.99, 0.99, 0.99], "unique_answers": [5, 5, 1, 1, 1]}
    assert judge(short, "diversity_collapse") == "absent"


def test_diversity_collapse_resolves_when_answers_spread_out_again():
    stream = [5, 5, 5, 1, 1, 1, 4, 4, 4]
    assert judge({"unique_answers": stream[:6]}, "diversity_collapse").kind == "diversity_collapse"
    assert judge({"unique_answers": stream}, "diversity_collapse") is None


def test_one_noisy_similarity_step_does_not_fire_diversity_collapse():
    assert judge({"similarity/mean": [0.7] * 7 + [0.99]}, "diversity_collapse") is None


# ------------------------------------------------------------------------ majority_lock_in


def test_majority_lock_in_fires_when_nearly_every_rollout_agrees_for_a_window():
    # latest median(0.96, 0.97, 0.98) = 0.97 >= 0.95
    finding = judge({"majority_ratio": [0.6, 0.8, 0.9, 0.96, 0.97, 0.98]}, "majority_lock_in")
    assert finding.message == ("majority_ratio is 0.97 over the last 3 steps (threshold 0.95): "
                               "nearly every rollout agrees with its prompt's majority answer")
    assert finding.values == {"majority_ratio": 0.97, "consensus": 0.95}


def test_majority_lock_in_stays_quiet_while_rollouts_still_disagree():
    assert judge({"majority_ratio": [0.6, 0.7, 0.8, 0.85]}, "majority_lock_in") is None


def test_majority_lock_in_is_absent_with_fewer_steps_than_its_window():
    assert judge({"majority_ratio": [1.0, 1.0]}, "majority_lock_in") == "absent"


def test_majority_lock_in_resolves_when_disagreement_returns():
    stream = [0.97, 0.98, 0.99, 0.8, 0.7, 0.75]
    assert judge({"majority_ratio": stream[:3]}, "majority_lock_in").kind == "majority_lock_in"
    assert judge({"majority_ratio": stream}, "majority_lock_in") is None


def test_one_unanimous_step_does_not_fire_majority_lock_in():
    assert judge({"majority_ratio": [0.7, 0.7, 0.7, 1.0]}, "majority_lock_in") is None


# ------------------------------------------------------------------------ pass_at_k_divergence

DIVERGING_PASS_1 = [0.30, 0.31, 0.32, 0.34, 0.36, 0.38]
DIVERGING_PASS_16 = [0.70, 0.70, 0.69, 0.64, 0.62, 0.60]


def test_pass_at_k_divergence_fires_when_pass_at_16_falls_while_pass_at_1_rises():
    # smoothed points 3..6: (0.31, 0.70) (0.32, 0.69) (0.34, 0.64) (0.36, 0.62); the best pass@16 at
    # least 3 points back is 0.70 (with pass@1 0.31); now 0.62, a drop of 0.08 >= 0.05
    finding = judge({"pass@1": DIVERGING_PASS_1, "pass@16": DIVERGING_PASS_16}, "pass_at_k_divergence")
    assert finding.message == ("pass@16 fell from its best 0.7 to 0.62 (−0.08, threshold 0.05) "
                               "while pass@1 rose from 0.31 to 0.36")
    assert finding.values == {"pass_at_1": 0.36, "pass_at_1_before": 0.31, "pass_at_k": 0.62,
                              "pass_at_k_before": 0.7, "k": 16.0, "drop": 0.08, "min_drop": 0.05}


def test_pass_at_k_divergence_stays_quiet_when_both_rise_as_under_evol_rl():
    healthy = {"pass@1": DIVERGING_PASS_1, "pass@16": [0.70, 0.71, 0.72, 0.74, 0.75, 0.77]}
    assert judge(healthy, "pass_at_k_divergence") is None


def test_pass_at_k_divergence_stays_quiet_when_pass_at_1_falls_too():
    both_fall = {"pass@1": [0.38, 0.36, 0.34, 0.32, 0.31, 0.30], "pass@16": DIVERGING_PASS_16}
    assert judge(both_fall, "pass_at_k_divergence") is None


def test_pass_at_k_divergence_is_absent_without_held_out_labels_or_with_too_few_points():
    assert judge({"entropy": [1.0] * 10}, "pass_at_k_divergence") == "absent"
    assert judge({"pass@1": DIVERGING_PASS_1[:5], "pass@16": DIVERGING_PASS_16[:5]}, "pass_at_k_divergence") == "absent"
    assert judge({"pass@1": DIVERGING_PASS_1}, "pass_at_k_divergence") == "absent"  # no pass@k with k > 1


def test_pass_at_k_divergence_prefers_the_largest_eval_pass_at_k_when_enough_evaluations_exist():
    gap = [None]
    # eval every other step: six evaluations of eval/pass@1, eval/pass@4 and eval/pass@16
    def sparse(values):
        return [x for value in values for x in (gap[0], value)]
    stream = {
        "pass@1": [0.3] * 12, "pass@16": [0.7] * 12,  # the training figures are flat
        "eval/pass@1": sparse(DIVERGING_PASS_1),
        "eval/pass@4": sparse([0.5] * 6),
        "eval/pass@16": sparse(DIVERGING_PASS_16),
    }
    finding = judge(stream, "pass_at_k_divergence")
    assert finding.message.startswith("eval/pass@16 fell from its best 0.7 to 0.62")
    assert "while eval/pass@1 rose" in finding.message and finding.values["k"] == 16.0


def test_pass_at_k_divergence_falls_back_to_training_figures_while_evaluations_are_few():
    stream = {"pass@1": DIVERGING_PASS_1, "pass@16": DIVERGING_PASS_16,
              "eval/pass@1": [None, None, 0.2, None, None, 0.2], "eval/pass@16": [None, None, 0.5, None, None, 0.5]}
    assert judge(stream, "pass_at_k_divergence").message.startswith("pass@16 fell")


def test_pass_at_k_divergence_stays_open_while_pass_at_k_stays_below_its_best():
    # TTRL Fig. 3: collapsed and stuck; pass@16 plateaus at 0.60, 0.10 below its best 0.70
    stream = {"pass@1": DIVERGING_PASS_1 + [0.38] * 6, "pass@16": DIVERGING_PASS_16 + [0.60] * 6}
    assert judge(stream, "pass_at_k_divergence").values["drop"] == 0.1


def test_pass_at_k_divergence_resolves_when_pass_at_k_recovers():
    stream = {"pass@1": DIVERGING_PASS_1 + [0.40] * 3, "pass@16": DIVERGING_PASS_16 + [0.68, 0.69, 0.70]}
    assert judge(stream, "pass_at_k_divergence") is None


def test_one_noisy_pass_at_k_point_does_not_fire_the_divergence():
    noisy = {"pass@1": DIVERGING_PASS_1, "pass@16": [0.70] * 5 + [0.40]}
    assert judge(noisy, "pass_at_k_divergence") is None


# ------------------------------------------------------------------------ length_collapse


def test_length_collapse_fires_when_responses_shrink_below_half_their_start():
    # start median(300, 310, 290) = 300; latest median(100, 90, 90) = 90 = 30% < 50%
    finding = judge({"response_length/mean": [300, 310, 290, 200, 120, 100, 90, 90]}, "length_collapse")
    assert finding.message == "mean response length fell to 90, 30% of its start 300 (threshold 50%)"
    assert finding.values == {"length": 90.0, "length_start": 300.0, "fraction": 0.5}


def test_length_collapse_fires_when_half_the_rollouts_are_truncated():
    # too few lengths to compare with a start, but truncated_ratio median(0.4, 0.6, 0.7) = 0.6 >= 0.5
    stream = {"response_length/mean": [300, 400, 500, 600], "truncated_ratio": [0.1, 0.4, 0.6, 0.7]}
    finding = judge(stream, "length_collapse")
    assert finding.message == ("responses are pinned at the length limit: 60% truncated at max_completion_length "
                               "(threshold 50%)")
    assert finding.values == {"truncated_ratio": 0.6, "pinned_ratio": 0.5}


def test_length_collapse_reads_the_mean_length_against_the_limit_when_truncation_is_not_logged():
    # median(1000, 1010, 1020) = 1010 >= 0.95 * 1024 = 972.8
    finding = judge({"response_length/mean": [900, 1000, 1010, 1020]}, "length_collapse", max_completion_length=1024)
    assert finding.message == ("responses are pinned at the length limit: mean length 1010 is 99% of "
                               "max_completion_length 1024 (threshold 95%)")
    assert judge({"response_length/mean": [900, 1000, 1010, 1020]}, "length_collapse") == "absent"  # no limit known


def test_length_collapse_stays_quiet_on_a_healthy_stream():
    healthy = {"response_length/mean": [300, 310, 290, 280, 260, 250, 255], "truncated_ratio": [0.05] * 7}
    assert judge(healthy, "length_collapse", max_completion_length=1024) is None


def test_length_collapse_is_absent_before_two_windows_without_truncation_figures():
    assert judge({"response_length/mean": [300, 300, 300, 60, 60]}, "length_collapse") == "absent"


def test_length_collapse_resolves_when_reasoning_grows_again():
    stream = [300, 300, 300, 60, 60, 60, 200, 220, 240]
    assert judge({"response_length/mean": stream[:6]}, "length_collapse").kind == "length_collapse"
    assert judge({"response_length/mean": stream}, "length_collapse") is None


def test_one_short_step_does_not_fire_length_collapse():
    assert judge({"response_length/mean": [300] * 7 + [20], "truncated_ratio": [0.0] * 7 + [0.9]},
                 "length_collapse") is None


# ------------------------------------------------------------------------ invalid_answers


def test_invalid_answers_fires_when_half_the_rollouts_have_no_boxed_answer():
    # median(0.5, 0.6, 0.7) = 0.6 >= 0.5
    finding = judge({"invalid_ratio": [0.1, 0.2, 0.5, 0.6, 0.7]}, "invalid_answers")
    assert finding.message == "60% of rollouts have no valid boxed answer (threshold 50%)"
    assert finding.values == {"invalid_ratio": 0.6, "max_ratio": 0.5}


def test_invalid_answers_stays_quiet_when_most_answers_are_valid():
    assert judge({"invalid_ratio": [0.1, 0.15, 0.1, 0.2]}, "invalid_answers") is None


def test_invalid_answers_is_absent_with_fewer_steps_than_its_window():
    assert judge({"invalid_ratio": [0.9, 0.9]}, "invalid_answers") == "absent"


def test_invalid_answers_resolves_when_the_format_comes_back():
    assert judge({"invalid_ratio": [0.6, 0.7, 0.6, 0.2, 0.1, 0.1]}, "invalid_answers") is None


def test_one_step_of_invalid_answers_does_not_fire():
    assert judge({"invalid_ratio": [0.1, 0.1, 0.1, 0.9]}, "invalid_answers") is None


# ------------------------------------------------------------------------ zero_variance_groups


def test_zero_variance_groups_fires_when_four_prompts_in_five_carry_no_advantage():
    # median(0.8, 0.9, 0.95) = 0.9 >= 0.8
    finding = judge({"zero_variance_groups": [0.2, 0.5, 0.8, 0.9, 0.95]}, "zero_variance_groups")
    assert finding.message == ("90% of prompts gave every trained rollout the same reward, so GRPO learns nothing "
                               "from them (threshold 80%)")
    assert finding.values == {"zero_variance_groups": 0.9, "max_ratio": 0.8}


def test_zero_variance_groups_stays_quiet_while_most_groups_still_disagree():
    assert judge({"zero_variance_groups": [0.2, 0.3, 0.4, 0.5]}, "zero_variance_groups") is None


def test_zero_variance_groups_is_absent_with_fewer_steps_than_its_window():
    assert judge({"zero_variance_groups": [1.0, None, 1.0]}, "zero_variance_groups") == "absent"


def test_zero_variance_groups_resolves_when_rewards_vary_again():
    assert judge({"zero_variance_groups": [0.9, 0.9, 0.9, 0.4, 0.3, 0.3]}, "zero_variance_groups") is None


def test_one_unanimous_step_does_not_fire_zero_variance_groups():
    assert judge({"zero_variance_groups": [0.3, 0.3, 0.3, 1.0]}, "zero_variance_groups") is None


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
    finding = judge({"entropy": [0.9, 0.9, 0.9, 0.09, 0.09, 0.09]}, "entropy_collapse")
    payload = json.loads(json.dumps(finding.to_json()))
    assert payload == {"kind": "entropy_collapse", "severity": "warning", "step": 6, "message": finding.message,
                       "values": finding.values}
    assert all(type(v) is float and math.isfinite(v) for v in payload["values"].values())
    assert isinstance(finding, Finding)


# ------------------------------------------------------------------------ a whole TTRL collapse


def decay(start: float, end: float, rate: float, n: int = 30) -> list[float]:
    """start at step 1, approaching end geometrically: end + (start − end) · rate^(t−1)."""
    return [round(end + (start - end) * rate ** t, 4) for t in range(n)]


def collapsing_ttrl_stream() -> dict:
    """30 steps of majority-only training collapsing as in EVOL-RL Figures 1 and 3."""
    entropy = decay(1.2, 0.05, 0.8)
    entropy[24] = 0.9  # one noisy step at step 25, deep in the collapse
    return {
        "entropy": entropy,
        "response_length/mean": decay(300, 60, 0.85),
        "majority_ratio": decay(0.55, 1.0, 0.8),
        "unique_answers": decay(6, 1, 0.8),
        "similarity/mean": decay(0.7, 0.98, 0.85),
        "zero_variance_groups": decay(0.05, 0.95, 0.85),
        "invalid_ratio": decay(0.1, 0.02, 0.8),
        "truncated_ratio": decay(0.15, 0.0, 0.8),
        "pass@1": decay(0.3, 0.45, 0.85),
        "pass@16": decay(0.7, 0.5, 0.85),
    }


def test_a_thirty_step_ttrl_collapse_opens_the_expected_alerts_in_the_expected_order():
    stream = collapsing_ttrl_stream()
    thresholds = resolve_thresholds()
    first_fired, open_at = {}, {}
    for n in range(1, 31):
        results = evaluate_step_rules(
            History(steps=list(range(1, n + 1)), metrics={k: v[:n] for k, v in stream.items()},
                    max_completion_length=1024),
            thresholds,
        )
        open_at[n] = {kind for kind, finding in results.items() if finding is not None}
        for kind in open_at[n]:
            first_fired.setdefault(kind, n)

    # Worked by hand: a smoothed value is the previous step's value (median of a monotone window).
    # pass@16: smoothed 0.67 at step 3, 0.604 at step 6: −0.066 while pass@1 rose          -> step 6
    # length: start 264, half is 132; length(9) = 125.4                                        -> step 10
    # unique answers: start 5, 40% is 2; unique(9) = 1.84 (and similarity(9) = 0.904 >= 0.9)   -> step 10
    # entropy: start 0.97, half is 0.485; entropy(6) = 0.427 (entropy(5) = 0.521)               -> step 7
    # majority_ratio(11) = 0.952 >= 0.95 (majority_ratio(10) = 0.940)                          -> step 12
    # zero_variance_groups(13) = 0.822 >= 0.8 (zero_variance_groups(12) = 0.799)               -> step 14
    assert first_fired == {
        "pass_at_k_divergence": 6,
        "length_collapse": 10,
        "diversity_collapse": 10,
        "entropy_collapse": 7,
        "majority_lock_in": 12,
        "zero_variance_groups": 14,
    }
    # once open, each stays open to the end: the 0.9 entropy spike at step 25 resolves nothing
    for kind, step in first_fired.items():
        assert all(kind in open_at[n] for n in range(step, 31)), kind

    final = evaluate_step_rules(history(stream, 1024), thresholds)
    assert set(final) == set(STEP_KINDS)  # every rule could judge this run
    assert final["invalid_answers"] is None  # answers stay well formed: 2% invalid
    assert final["entropy_collapse"].severity == "warning"  # 0.0522 is 5.4% of 0.97, just above critical
    assert final["entropy_collapse"].message == "entropy fell to 0.0522, 5.4% of its start 0.97 (threshold 50%)"
    assert final["length_collapse"].message.startswith("mean response length fell to 62.5, 24% of its start 264")
    # pass@16 median(0.5025, 0.5021, 0.5018) against its best smoothed point 0.67 (step 3)
    assert final["pass_at_k_divergence"].values["pass_at_k"] == 0.5021
    assert final["pass_at_k_divergence"].values["pass_at_k_before"] == 0.67
