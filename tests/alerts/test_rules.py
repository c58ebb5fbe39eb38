"""What the collapse-alert rules judge (webapp/alerts/rules.py, DESIGN §4.5): a trend against the run's own noise,
never one step's sample.

The streams below are small enough to check by hand. With the defaults a rule compares the median of the last 3
steps (entropy_collapse: 5) with the median of the first 5, and a change counts only beyond 2 standard errors of
the run's noise (webapp/alerts/trend.py: σ = 1.266 × the mean of the smallest 80% of the step-to-step |Δ|; a
difference of window medians has 1.2533 · σ · √(1/5 + 1/n)). `wobble` adds ±a alternately, so its |Δ| are 2a and
σ = 2.53 a. Real runs are judged in test_real_trajectories.py and on the labelled corpus (test_corpus.py).
"""

import json
import math

import pytest

from webapp.alerts.rule_specs import STEP_RULE_KINDS, defaults, resolve_thresholds
from webapp.alerts.rules import Finding, History, evaluate_run_failed, evaluate_stalled, evaluate_step_rules

from tests.alerts.rule_streams import degenerating_stream, history, judge

STEP_KINDS = STEP_RULE_KINDS


def wobble(levels: list[float], amplitude: float) -> list[float]:
    """Each level −a, +a, −a, ...: a stream with a known step-to-step noise."""
    return [round(v + (amplitude if i % 2 else -amplitude), 6) for i, v in enumerate(levels)]


def falling(start: float, end: float, n_start: int = 5, n_end: int = 5) -> list[float]:
    return [start] * n_start + [end] * n_end


MOVED = [0.01] * 10  # a KL to the start that says the policy moved


def converging(entropy: list[float], **more) -> dict:
    """A run whose entropy does what `entropy` says while its votes converge (the second signal) and its policy
    moved."""
    n = len(entropy)
    return {"entropy": entropy, "majority_ratio": wobble(falling(0.6, 0.9, 5, n - 5), 0.01), "kl": [0.01] * n,
            **more}


# ------------------------------------------------------------------------ thresholds in use


def test_thresholds_from_team_then_run_layers_take_effect():
    # entropy 0.98 at the start, 0.32 recently: 33% of the start
    stream = converging(wobble(falling(1.0, 0.3), 0.02))
    team = {"entropy_collapse": {"fraction": 0.4, "severity": "info"}, "majority_lock_in": {"enabled": False}}
    run = {"entropy_collapse": {"fraction": 0.25}}

    by_default = evaluate_step_rules(history(stream), resolve_thresholds())
    assert by_default["entropy_collapse"].severity == "warning"  # 33% is below the default 60%

    for_team = evaluate_step_rules(history(stream), resolve_thresholds(team))
    assert for_team["entropy_collapse"].severity == "info"  # 33% < the team's 40%
    assert "majority_lock_in" not in for_team  # the team disabled it

    for_run = evaluate_step_rules(history(stream), resolve_thresholds(team, run))
    assert for_run["entropy_collapse"] is None  # 33% is above the run's 25%


def test_evaluate_step_rules_fills_defaults_for_kinds_the_thresholds_leave_out():
    results = evaluate_step_rules(history({"invalid_ratio": [0.9, 0.9, 0.9, 0.9]}), {})
    assert results["invalid_answers"].severity == "warning"


def test_evaluate_step_rules_judges_only_the_kinds_asked_for():
    results = evaluate_step_rules(history({"invalid_ratio": [0.9] * 4}), defaults(), kinds=("zero_variance_groups",))
    assert results == {}


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


def test_entropy_collapse_fires_when_entropy_falls_beyond_its_noise_the_policy_moved_and_the_votes_agree():
    finding = judge(converging(wobble(falling(1.0, 0.3), 0.02)), "entropy_collapse")
    assert finding.severity == "warning" and finding.step == 10
    # start median(0.98, 1.02, 0.98, 1.02, 0.98) = 0.98; steps 6-10 (0.32, 0.28, 0.32, 0.28, 0.32): 0.32, 33%;
    # |Δ| 0.04 eight times and the fall's 0.7 once, left out: σ = 1.266 · 0.04 = 0.0506; the noise of the
    # difference 1.2533 · 0.0506 · √(2/5) = 0.0401; ±2 of them is 8.2% of 0.98
    assert finding.message == ("entropy of steps 6–10 is 33% of steps 1–5 (threshold 60%), beyond the run's noise of "
                               "±8.2%; the majority ratio rose from 0.59 to 0.91; KL to the start 0.01")
    assert finding.values["entropy"] == 0.32 and finding.values["entropy_start"] == 0.98
    assert finding.values["share"] == pytest.approx(0.32 / 0.98, abs=1e-5) and finding.values["kl"] == 0.01


def test_entropy_collapse_stays_quiet_on_a_swing_within_the_run_s_noise():
    # the Small CPU preset on two prompts a step: entropy 0.02..0.13 with which prompts were sampled
    swinging = [0.09, 0.13, 0.03, 0.12, 0.05, 0.13, 0.02, 0.11, 0.03, 0.04, 0.12, 0.03, 0.02]
    assert judge(converging(swinging), "entropy_collapse") is None


def test_entropy_collapse_stays_quiet_when_the_policy_did_not_move():
    stream = converging(wobble(falling(1.0, 0.3), 0.02), kl=[1e-6] * 10)  # lr 5e-7: KL near a millionth
    assert judge(stream, "entropy_collapse") is None
    assert judge(stream, "entropy_collapse", min_kl=0).kind == "entropy_collapse"


def test_without_kl_clipped_ratios_say_whether_the_policy_moved():
    stream = converging(wobble(falling(1.0, 0.3), 0.02))
    del stream["kl"]
    assert judge({**stream, "clip_ratio/low": [0.0] * 10, "clip_ratio/high": [0.0] * 10}, "entropy_collapse") is None
    found = judge({**stream, "clip_ratio/low": [0.0] * 10, "clip_ratio/high": [0.02] * 10}, "entropy_collapse")
    assert found.message.endswith("; clipped ratios 2%")
    assert judge(stream, "entropy_collapse").kind == "entropy_collapse"  # a run that logs neither: assumed


def test_entropy_collapse_needs_a_second_signal_to_agree_unless_told_not_to():
    alone = {"entropy": wobble(falling(1.0, 0.3), 0.02), "majority_ratio": wobble([0.6] * 10, 0.01), "kl": MOVED}
    assert judge(alone, "entropy_collapse") is None
    assert judge(alone, "entropy_collapse", confirm=False).kind == "entropy_collapse"


def test_a_run_that_logs_no_second_signal_is_judged_on_its_entropy_alone():
    # a run trained elsewhere reporting its metrics through MLflow and no rollouts: no votes to count
    finding = judge({"entropy": wobble(falling(1.0, 0.3), 0.02), "kl": MOVED}, "entropy_collapse")
    assert finding.message.endswith("beyond the run's noise of ±8.2%; KL to the start 0.01")


@pytest.mark.parametrize("signal, values, said", [
    ("unique_answers", wobble(falling(4.0, 2.0), 0.1), "distinct answers per prompt fell from 3.9 to 2.1"),
    ("majority_flip_rate", wobble(falling(0.4, 0.0), 0.02) , "the prompts' majority answers changed between visits "
                                                             "2% of the time, from 38%"),
])
def test_fewer_distinct_answers_or_majorities_that_no_longer_change_agree_too(signal, values, said):
    stream = {"entropy": wobble(falling(1.0, 0.3), 0.02), signal: values, "kl": MOVED}
    assert said in judge(stream, "entropy_collapse").message


def test_entropy_collapse_says_when_most_answers_are_invalid_too():
    # narrower sampling onto no answer at all is not rollouts agreeing: the message gives the invalid share
    stream = converging(wobble(falling(1.0, 0.3), 0.02), invalid_ratio=falling(0.1, 0.9))
    finding = judge(stream, "entropy_collapse")
    assert finding.message.endswith("; 90% of answers invalid") and finding.values["invalid_ratio"] == 0.9


def test_entropy_collapse_turns_critical_below_a_twentieth_of_its_start():
    finding = judge(converging(wobble(falling(1.0, 0.03), 0.005)), "entropy_collapse")
    assert finding.severity == "critical" and "critical below 5%" in finding.message


def test_entropy_collapse_is_absent_before_both_windows_are_full():
    assert judge(converging(wobble(falling(1.0, 0.1, 5, 4), 0.01)), "entropy_collapse") == "absent"
    assert judge(converging(wobble(falling(1.0, 0.1, 5, 5), 0.01)), "entropy_collapse").kind == "entropy_collapse"


def test_entropy_collapse_resolves_when_entropy_recovers_as_evol_rl_does_after_its_evolving_point():
    # EVOL-RL Fig. 3: a dip, then recovery to 80% of the start
    stream = wobble(falling(1.0, 0.2) + [0.8] * 3, 0.02)
    assert judge(converging(stream[:10]), "entropy_collapse").kind == "entropy_collapse"
    assert judge(converging(stream), "entropy_collapse") is None


def test_one_noisy_entropy_step_neither_fires_nor_resolves():
    assert judge(converging(wobble([1.0] * 9, 0.02) + [0.001]), "entropy_collapse") is None
    collapsed = wobble(falling(1.0, 0.1, 5, 6), 0.01)
    assert judge(converging(collapsed + [5.0]), "entropy_collapse").kind == "entropy_collapse"


def test_entropy_collapse_skips_missing_and_nan_values():
    # logged: 0.98, 1.02, 0.98, 1.02, 0.98, then 0.1, 0.12, 0.1, 0.12, 0.1 (ten values)
    stream = [0.98, float("nan"), 1.02, 0.98, None, 1.02, 0.98, 0.1, None, 0.12, 0.1, 0.12, 0.1]
    assert judge(converging(stream), "entropy_collapse").values["entropy"] == 0.1


def test_a_zero_or_negative_start_cannot_give_a_fraction_so_entropy_collapse_is_absent():
    assert judge(converging([0.0] * 10), "entropy_collapse") == "absent"
    assert judge(converging(wobble(falling(-1.0, -2.0), 0.01)), "entropy_collapse") == "absent"


def test_entropy_collapse_is_absent_when_entropy_stopped_being_logged():
    assert judge(converging(wobble([0.9] * 7, 0.01) + [None] * 3), "entropy_collapse") == "absent"


# ------------------------------------------------------------------------ diversity_collapse


def test_diversity_collapse_fires_when_similarity_rises_to_near_duplicates():
    finding = judge({"similarity/mean": wobble(falling(0.7, 0.96), 0.005), "kl": MOVED}, "diversity_collapse")
    assert finding.message.startswith("rollouts are converging: similarity/mean of steps 8–10 is 0.965, up from "
                                      "0.695 over steps 1–5 (threshold 0.9 and +0.1), beyond the run's noise of ±")
    assert finding.values["similarity"] == 0.965 and finding.values["similarity_start"] == 0.695


def test_diversity_collapse_fires_when_unique_answers_fall_to_two_fifths_of_their_start():
    # 2.05 of 4.95 is 41%: above 40%
    assert judge({"unique_answers": wobble(falling(5.0, 2.0), 0.05), "kl": MOVED}, "diversity_collapse") is None
    finding = judge({"unique_answers": wobble(falling(5.0, 1.8), 0.05), "kl": MOVED}, "diversity_collapse")
    assert finding.message.startswith("rollouts are converging: distinct answers per prompt of steps 8–10 is 37% of "
                                      "steps 1–5 (threshold 40%), beyond the run's noise of ±")


def test_diversity_collapse_names_both_signals_when_both_hold():
    finding = judge({"similarity/mean": wobble(falling(0.7, 0.95), 0.005),
                     "unique_answers": wobble(falling(6.0, 1.0), 0.05), "kl": MOVED}, "diversity_collapse")
    assert "similarity/mean of steps" in finding.message and "distinct answers per prompt" in finding.message


def test_diversity_collapse_does_not_read_lost_answers_as_converging_ones():
    # every answer invalid: unique_answers (valid answers only) falls to 0, which is not agreement
    stream = {"unique_answers": falling(5.0, 0.0), "invalid_ratio": falling(0.1, 1.0), "kl": MOVED}
    assert judge(stream, "diversity_collapse") is None


def test_diversity_collapse_on_near_duplicate_text_without_answers_says_so_and_not_converging():
    stream = {"similarity/mean": wobble(falling(0.7, 0.95), 0.005), "unique_answers": falling(5.0, 0.0),
              "invalid_ratio": falling(0.1, 1.0), "kl": MOVED}
    finding = judge(stream, "diversity_collapse")
    assert finding.message.startswith("rollouts are near duplicates: similarity/mean")
    assert finding.message.endswith("; 100% of answers invalid")
    assert "converging" not in finding.message and finding.values["invalid_ratio"] == 1.0


def test_diversity_collapse_ignores_similarity_that_was_high_from_the_start():
    # cosine similarity of solutions to one problem starts high; 0.88 -> 0.93 is a rise of only 0.05
    assert judge({"similarity/mean": wobble(falling(0.88, 0.93), 0.005), "kl": MOVED}, "diversity_collapse") is None


def test_diversity_collapse_stays_quiet_when_the_policy_did_not_move():
    assert judge({"unique_answers": wobble(falling(5.0, 1.0), 0.05), "kl": [1e-6] * 10}, "diversity_collapse") is None


def test_diversity_collapse_stays_quiet_on_a_healthy_stream():
    healthy = {"similarity/mean": wobble([0.7, 0.72, 0.71, 0.73, 0.72, 0.74, 0.73, 0.72, 0.74], 0.005),
               "unique_answers": wobble([5, 5, 5, 4, 4, 4, 4, 4, 4], 0.1), "kl": MOVED}
    assert judge(healthy, "diversity_collapse") is None


def test_diversity_collapse_is_absent_until_either_signal_has_both_windows():
    short = {"similarity/mean": [0.7, 0.7, 0.99, 0.99, 0.99], "unique_answers": [5, 5, 1, 1, 1], "kl": MOVED}
    assert judge(short, "diversity_collapse") == "absent"


def test_diversity_collapse_resolves_when_answers_spread_out_again():
    stream = wobble(falling(5.0, 1.0) + [4.0] * 3, 0.05)
    assert judge({"unique_answers": stream[:10], "kl": MOVED}, "diversity_collapse").kind == "diversity_collapse"
    assert judge({"unique_answers": stream, "kl": MOVED + [0.01] * 3}, "diversity_collapse") is None


def test_one_noisy_similarity_step_does_not_fire_diversity_collapse():
    assert judge({"similarity/mean": wobble([0.7] * 9, 0.005) + [0.99], "kl": MOVED}, "diversity_collapse") is None


# ------------------------------------------------------------------------ majority_lock_in


def test_majority_lock_in_fires_when_training_drove_nearly_every_rollout_onto_the_majority():
    finding = judge({"majority_ratio": wobble(falling(0.6, 0.97), 0.005), "kl": MOVED}, "majority_lock_in")
    assert finding.message.startswith("majority_ratio of steps 8–10 is 0.975, up from 0.595 over steps 1–5 "
                                      "(threshold 0.95), beyond the run's noise of ±")
    assert finding.message.endswith(": nearly every rollout agrees with its prompt's majority answer; "
                                    "KL to the start 0.01")
    assert finding.values["majority_ratio"] == 0.975 and finding.values["consensus"] == 0.95


def test_a_vote_unanimous_from_the_start_was_not_locked_in_by_training():
    # a small policy on easy problems samples one answer from step 1: there is nothing for training to lock in
    assert judge({"majority_ratio": wobble([0.98] * 10, 0.01), "kl": MOVED}, "majority_lock_in") is None


def test_majority_lock_in_stays_quiet_while_rollouts_still_disagree():
    assert judge({"majority_ratio": wobble(falling(0.6, 0.85), 0.005), "kl": MOVED}, "majority_lock_in") is None


def test_majority_lock_in_is_absent_before_both_windows_are_full():
    assert judge({"majority_ratio": [0.6, 1.0, 1.0], "kl": [0.01] * 3}, "majority_lock_in") == "absent"


def test_majority_lock_in_resolves_when_disagreement_returns():
    stream = wobble(falling(0.6, 0.98) + [0.75] * 3, 0.005)
    assert judge({"majority_ratio": stream[:10], "kl": MOVED}, "majority_lock_in").kind == "majority_lock_in"
    assert judge({"majority_ratio": stream, "kl": MOVED + [0.01] * 3}, "majority_lock_in") is None


def test_one_unanimous_step_does_not_fire_majority_lock_in():
    assert judge({"majority_ratio": wobble([0.7] * 9, 0.01) + [1.0], "kl": MOVED}, "majority_lock_in") is None


# ------------------------------------------------------------------------ pass_at_k_divergence

# eight evaluations: pass@1 rises while pass@16 falls 0.1 (EVOL-RL Table 1's signature)
DIVERGING_PASS_1 = [0.30, 0.31, 0.30, 0.31, 0.30, 0.34, 0.36, 0.38]
DIVERGING_PASS_16 = [0.70, 0.71, 0.70, 0.71, 0.70, 0.62, 0.60, 0.60]


def test_pass_at_k_divergence_fires_when_pass_at_16_falls_while_pass_at_1_rises():
    # pass@16: start median(0.70, 0.71, 0.70, 0.71, 0.70) = 0.70, steps 6-8 median 0.60: −0.10 >= 0.05; its |Δ|
    # are 0.01 four times, 0.08, 0.02 and 0: the smallest six's mean 0.01, σ = 0.01266, the noise of the
    # difference 1.2533 · 0.01266 · √(1/5 + 1/3) = 0.0116, ±2 of them 0.0232
    finding = judge({"pass@1": DIVERGING_PASS_1, "pass@16": DIVERGING_PASS_16}, "pass_at_k_divergence")
    assert finding.message == ("pass@16 of steps 6–8 is 0.6, down 0.1 from 0.7 over steps 1–5 (threshold 0.05), "
                               "beyond the run's noise of ±0.0232, while pass@1 rose from 0.3 to 0.36")
    assert finding.values == {"pass_at_1": 0.36, "pass_at_1_start": 0.3, "pass_at_k": 0.6, "pass_at_k_start": 0.7,
                              "k": 16.0, "drop": 0.1, "min_drop": 0.05, "noise": finding.values["noise"]}
    assert finding.values["noise"] == pytest.approx(0.0232, abs=1e-4)


def test_a_training_batch_s_pass_at_k_is_as_noisy_as_a_share_of_its_prompts():
    # the same figures read from 4 prompts a step: pass@16 is known in quarters, and a fall of 0.1 is noise
    stream = {"pass@1": DIVERGING_PASS_1, "pass@16": DIVERGING_PASS_16}
    assert evaluate_step_rules(History(steps=list(range(1, 9)), metrics=stream, prompts_per_step=4),
                               defaults())["pass_at_k_divergence"] is None


def test_pass_at_k_divergence_stays_quiet_when_the_drop_is_within_pass_at_k_s_noise():
    noisy = [0.70, 0.62, 0.72, 0.60, 0.71, 0.60, 0.70, 0.61]
    assert judge({"pass@1": [0.3] * 8, "pass@16": noisy}, "pass_at_k_divergence") is None


def test_pass_at_k_divergence_stays_quiet_when_both_rise_as_under_evol_rl():
    healthy = {"pass@1": DIVERGING_PASS_1, "pass@16": [0.70, 0.71, 0.72, 0.74, 0.75, 0.77, 0.78, 0.80]}
    assert judge(healthy, "pass_at_k_divergence") is None


def test_pass_at_k_divergence_stays_quiet_when_pass_at_1_falls_too():
    both_fall = {"pass@1": list(reversed(DIVERGING_PASS_1)), "pass@16": DIVERGING_PASS_16}
    assert judge(both_fall, "pass_at_k_divergence") is None


def test_pass_at_k_divergence_is_absent_without_held_out_labels_or_with_too_few_points():
    assert judge({"entropy": [1.0] * 10}, "pass_at_k_divergence") == "absent"
    assert judge({"pass@1": DIVERGING_PASS_1[:7], "pass@16": DIVERGING_PASS_16[:7]}, "pass_at_k_divergence") == "absent"
    assert judge({"pass@1": DIVERGING_PASS_1}, "pass_at_k_divergence") == "absent"  # no pass@k with k > 1


def test_pass_at_k_divergence_prefers_the_largest_eval_pass_at_k_when_enough_evaluations_exist():
    def sparse(values):  # an evaluation every other step
        return [x for value in values for x in (None, value)]

    stream = {
        "pass@1": [0.3] * 16, "pass@16": [0.7] * 16,  # the training figures are flat
        "eval/pass@1": sparse(DIVERGING_PASS_1),
        "eval/pass@4": sparse([0.5] * 8),
        "eval/pass@16": sparse(DIVERGING_PASS_16),
    }
    finding = judge(stream, "pass_at_k_divergence")
    assert finding.message.startswith("eval/pass@16 of steps 12–16 is 0.6, down 0.1 from 0.7 over steps 2–10")
    assert "while eval/pass@1 rose" in finding.message and finding.values["k"] == 16.0


def test_pass_at_k_divergence_falls_back_to_training_figures_while_evaluations_are_few():
    stream = {"pass@1": DIVERGING_PASS_1, "pass@16": DIVERGING_PASS_16,
              "eval/pass@1": [None, None, 0.2, None, None, 0.2, None, None],
              "eval/pass@16": [None, None, 0.5, None, None, 0.5, None, None]}
    assert judge(stream, "pass_at_k_divergence").message.startswith("pass@16 of steps")


def test_pass_at_k_divergence_stays_open_while_pass_at_k_stays_below_its_start():
    # TTRL Fig. 3: collapsed and stuck; pass@16 plateaus at 0.60, 0.10 below its start
    stream = {"pass@1": DIVERGING_PASS_1 + [0.38] * 6, "pass@16": DIVERGING_PASS_16 + [0.60] * 6}
    assert judge(stream, "pass_at_k_divergence").values["drop"] == 0.1


def test_pass_at_k_divergence_resolves_when_pass_at_k_recovers():
    stream = {"pass@1": DIVERGING_PASS_1 + [0.40] * 3, "pass@16": DIVERGING_PASS_16 + [0.68, 0.69, 0.70]}
    assert judge(stream, "pass_at_k_divergence") is None


def test_one_noisy_pass_at_k_point_does_not_fire_the_divergence():
    noisy = {"pass@1": DIVERGING_PASS_1, "pass@16": [0.70, 0.71] * 3 + [0.70, 0.40]}
    assert judge(noisy, "pass_at_k_divergence") is None


# ------------------------------------------------------------------------ length_collapse


def test_length_collapse_fires_when_responses_shrink_below_half_their_start():
    finding = judge({"response_length/mean": wobble(falling(300, 90), 5), "kl": MOVED}, "length_collapse")
    assert finding.message.startswith("mean response length of steps 8–10 is 32% of steps 1–5 (threshold 50%), "
                                      "beyond the run's noise of ±")
    assert finding.message.endswith("; KL to the start 0.01")
    assert finding.values["length"] == 95.0 and finding.values["length_start"] == 295.0


def test_length_collapse_fires_when_half_the_rollouts_are_truncated_on_their_counts():
    # 4 prompts × 16 votes a step: steps 2-4 truncated 0.6, 0.6, 0.7 of 192 rollouts, Wilson's low end 56%
    stream = {"response_length/mean": [300, 400, 500, 600], "truncated_ratio": [0.1, 0.6, 0.6, 0.7]}
    found = evaluate_step_rules(History(steps=[1, 2, 3, 4], metrics=stream, prompts_per_step=4, n_votes=16),
                                defaults())["length_collapse"]
    assert found.message == ("responses are pinned at the length limit: 63% of steps 2–4 truncated at "
                             "max_completion_length (threshold 50%, at least 56% on 192 counted)")
    assert found.values == {"truncated_ratio": 0.633333, "pinned_ratio": 0.5}


def test_a_few_truncated_rollouts_cannot_claim_half_of_them():
    # 2 prompts × 4 votes: 24 rollouts over the window, 63% truncated, could be 44%
    stream = {"truncated_ratio": [0.1, 0.6, 0.6, 0.7]}
    found = evaluate_step_rules(History(steps=[1, 2, 3, 4], metrics=stream, prompts_per_step=2, n_votes=4),
                                defaults())["length_collapse"]
    assert found is None


def test_length_collapse_reads_the_mean_length_against_the_limit_when_truncation_is_not_logged():
    # median(1000, 1010, 1020) = 1010 >= 0.95 * 1024 = 972.8
    finding = judge({"response_length/mean": [900, 1000, 1010, 1020]}, "length_collapse", max_completion_length=1024)
    assert finding.message == ("responses are pinned at the length limit: mean length 1010 is 99% of "
                               "max_completion_length 1024 (threshold 95%)")
    assert judge({"response_length/mean": [900, 1000, 1010, 1020]}, "length_collapse") == "absent"  # no limit known


def test_length_collapse_stays_quiet_on_a_healthy_stream():
    healthy = {"response_length/mean": wobble([300, 310, 290, 280, 260, 250, 255, 260, 250], 5),
               "truncated_ratio": [0.05] * 9, "kl": MOVED}
    assert judge(healthy, "length_collapse", max_completion_length=1024) is None


def test_length_collapse_stays_quiet_when_the_policy_did_not_move():
    stream = {"response_length/mean": wobble(falling(300, 90), 5), "kl": [1e-6] * 10}
    assert judge(stream, "length_collapse") is None


def test_length_collapse_is_absent_before_both_windows_without_truncation_figures():
    assert judge({"response_length/mean": [300, 300, 300, 60, 60]}, "length_collapse") == "absent"


def test_length_collapse_resolves_when_reasoning_grows_again():
    stream = wobble(falling(300, 60) + [240] * 3, 5)
    assert judge({"response_length/mean": stream[:10], "kl": MOVED}, "length_collapse").kind == "length_collapse"
    assert judge({"response_length/mean": stream, "kl": MOVED + [0.01] * 3}, "length_collapse") is None


def test_one_short_step_does_not_fire_length_collapse():
    assert judge({"response_length/mean": wobble([300] * 9, 5) + [20], "truncated_ratio": [0.0] * 9 + [0.9],
                  "kl": MOVED}, "length_collapse") is None


# ------------------------------------------------------------------------ invalid_answers


def test_invalid_answers_fires_when_half_the_rollouts_have_no_boxed_answer():
    # 2 prompts × 16 votes: steps 3-5 at 0.7, 0.8, 0.9 of 96 rollouts: 80%, Wilson's low end 70.7%
    stream = {"invalid_ratio": [0.1, 0.2, 0.7, 0.8, 0.9]}
    finding = evaluate_step_rules(History(steps=[1, 2, 3, 4, 5], metrics=stream, prompts_per_step=2, n_votes=16),
                                  defaults())["invalid_answers"]
    assert finding.message == ("80% of rollouts over steps 3–5 have no valid boxed answer (threshold 50%, at least "
                               "71% on 96 counted)")
    assert finding.values == {"invalid_ratio": 0.8, "low": 0.707105, "max_ratio": 0.5}


def test_invalid_answers_on_a_run_of_unknown_size_is_judged_in_its_own_noise():
    assert judge({"invalid_ratio": [0.9, 0.9, 0.9, 0.9]}, "invalid_answers").message.endswith(
        "(threshold 50%, at least 90% within the run's noise)")
    assert judge({"invalid_ratio": [0.1, 0.9, 0.2, 0.9, 0.3, 0.9]}, "invalid_answers") is None  # half, but noisy


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
    stream = {"zero_variance_groups": [0.2, 0.5, 0.9, 0.95, 1.0]}
    finding = evaluate_step_rules(History(steps=[1, 2, 3, 4, 5], metrics=stream, prompts_per_step=32),
                                  defaults())["zero_variance_groups"]
    assert finding.message == ("95% of prompts over steps 3–5 gave every trained rollout the same reward, so GRPO "
                               "learns nothing from them (threshold 80%, at least 88% on 96 counted)")


def test_two_prompts_a_step_cannot_show_that_four_in_five_are_flat():
    # the Small CPU preset: every prompt flat for three steps is six prompts, which could be 60% of the run's
    stream = {"zero_variance_groups": [1.0, 1.0, 1.0, 1.0]}
    assert evaluate_step_rules(History(steps=[1, 2, 3, 4], metrics=stream, prompts_per_step=2),
                               defaults())["zero_variance_groups"] is None


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
    finding = judge(converging(wobble(falling(0.9, 0.09), 0.01)), "entropy_collapse")
    payload = json.loads(json.dumps(finding.to_json()))
    assert payload == {"kind": "entropy_collapse", "severity": "warning", "step": 10, "message": finding.message,
                       "values": finding.values}
    assert all(type(v) is float and math.isfinite(v) for v in payload["values"].values())
    assert isinstance(finding, Finding)


# ------------------------------------------------------------------------ a whole TTRL collapse


def decay(start: float, end: float, rate: float, n: int = 30) -> list[float]:
    """start at step 1, approaching end geometrically: end + (start − end) · rate^(t−1)."""
    return [round(end + (start - end) * rate ** t, 4) for t in range(n)]


def collapsing_ttrl_stream() -> dict:
    """30 steps of majority-only training collapsing as in EVOL-RL Figures 1 and 3, a little noise on each."""
    entropy = wobble(decay(1.2, 0.05, 0.8), 0.01)
    entropy[24] = 0.9  # one noisy step at step 25, deep in the collapse
    return {
        "entropy": entropy,
        "response_length/mean": wobble(decay(300, 60, 0.85), 2),
        "majority_ratio": wobble(decay(0.55, 1.0, 0.8), 0.005),
        "unique_answers": wobble(decay(6, 1, 0.8), 0.05),
        "similarity/mean": wobble(decay(0.7, 0.98, 0.85), 0.003),
        "zero_variance_groups": decay(0.05, 0.95, 0.85),
        "invalid_ratio": decay(0.1, 0.02, 0.8),
        "truncated_ratio": decay(0.15, 0.0, 0.8),
        "pass@1": decay(0.3, 0.45, 0.85),
        "pass@16": decay(0.7, 0.5, 0.85),
        "kl": [0.01] * 30,
    }


def test_a_thirty_step_ttrl_collapse_opens_the_collapse_alerts_and_they_stay_open():
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
    assert set(first_fired) == {"pass_at_k_divergence", "length_collapse", "diversity_collapse", "entropy_collapse",
                                "majority_lock_in", "zero_variance_groups"}
    # entropy: start median of steps 1-5 ≈ 0.81, below 60% of it (with the votes converging) as soon as both of
    # its windows are full
    assert first_fired["entropy_collapse"] == 10 and first_fired["pass_at_k_divergence"] <= 12
    # once open, each stays open to the end: the 0.9 entropy spike at step 25 resolves nothing
    for kind, step in first_fired.items():
        assert all(kind in open_at[n] for n in range(step, 31)), kind
    final = evaluate_step_rules(history(stream, 1024), thresholds)
    assert set(final) == set(STEP_KINDS)  # every rule could judge this run
    assert final["invalid_answers"] is None  # answers stay well formed: 2% invalid
    assert final["entropy_collapse"].severity == "warning"
