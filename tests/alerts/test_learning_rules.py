"""What the learning and output rules judge (webapp/alerts/rules.py, DESIGN §4.5): pass@k divergence, length
collapse, invalid answers and zero-variance groups, each a trend against the run's own noise. How the streams are
built: test_rules.py's docstring."""

import pytest

from webapp.alerts.rule_specs import defaults
from webapp.alerts.rules import History, evaluate_step_rules

from tests.alerts.rule_streams import MOVED, falling, judge, wobble


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
