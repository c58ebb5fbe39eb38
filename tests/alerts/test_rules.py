"""What the collapse-alert rules judge (the diversity ones here; the learning and output rules in
test_learning_rules.py, stalled and run_failed in test_run_rules.py) (webapp/alerts/rules.py, DESIGN §4.5): a trend against the run's own noise,
never one step's sample.

The streams below are small enough to check by hand. With the defaults a rule compares the median of the last 3
steps (entropy_collapse: 5) with the median of the first 5, and a change counts only beyond 2 standard errors of
the run's noise (webapp/alerts/trend.py: σ = 1.266 × the mean of the smallest 80% of the step-to-step |Δ|; a
difference of window medians has 1.2533 · σ · √(1/5 + 1/n)). `wobble` adds ±a alternately, so its |Δ| are 2a and
σ = 2.53 a. Real runs are judged in test_real_trajectories.py and on the labelled corpus (test_corpus.py).
"""

import pytest

from webapp.alerts.rule_specs import STEP_RULE_KINDS, defaults, resolve_thresholds
from webapp.alerts.rules import History, evaluate_step_rules

from tests.alerts.rule_streams import MOVED, converging, degenerating_stream, falling, history, judge, wobble

STEP_KINDS = STEP_RULE_KINDS

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
