"""The degeneration rule (webapp/alerts/rules.py): text that comes apart, told apart from a collapse. The real
degenerating run is replayed in test_real_trajectories.py."""
from webapp.alerts.rule_specs import resolve_thresholds
from webapp.alerts.rules import evaluate_step_rules

from tests.alerts.rule_streams import degenerating_stream, history, judge


def test_degeneration_fires_when_entropy_rises_while_the_answers_are_gone_and_says_what_was_seen():
    finding = judge(degenerating_stream(), "degeneration", max_completion_length=96)
    # entropy: start median(0.41, 0.40, 0.42) = 0.41, latest median(1.9, 2.0, 1.9) = 1.9, 4.63x;
    # invalid: start median(0.1, 0.1, 0.05) = 0.1, latest 1.0
    assert finding.severity == "critical" and finding.step == 12
    assert finding.message == ("entropy rose from 0.41 over steps 1–3 to 1.9 over steps 10–12 (4.63× its start, "
                               "threshold 1.5×); 100% of answers invalid over steps 10–12, from 10% at the start "
                               "(threshold 90%); mean length 96, at the 96-token limit; 100% truncated at the limit")
    assert finding.values == {"invalid_ratio": 1.0, "invalid_start": 0.1, "min_invalid": 0.9, "entropy": 1.9,
                              "entropy_start": 0.41, "rise": 4.63415, "entropy_rise": 1.5, "length": 96.0,
                              "max_completion_length": 96.0, "truncated_ratio": 1.0}


def test_degeneration_opens_at_the_first_step_both_signals_hold():
    stream = degenerating_stream()
    fired = [n for n in range(1, 13)
             if judge({k: v[:n] for k, v in stream.items()}, "degeneration") not in (None, "absent")]
    # at step 9 entropy and truncation are up, but the invalid share of steps 7-9 (0.7, 0.95, 1.0) is 88%, not yet 90%
    assert fired[0] == 10 and fired == list(range(10, 13))


def test_degeneration_fires_on_text_repeated_to_the_limit_even_as_entropy_falls():
    # the second phase of a real degenerating run (tests/alerts/test_real_trajectories.py): one token repeated
    stream = {"entropy": [0.4, 0.4, 0.4, 0.1, 0.02, 0.01], "invalid_ratio": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0],
              "truncated_ratio": [0.0, 0.0, 0.0, 1.0, 1.0, 1.0]}
    finding = judge(stream, "degeneration")
    assert finding.message == ("entropy fell from 0.4 over steps 1–3 to 0.02 over steps 4–6; 100% of answers invalid "
                               "over steps 4–6, from 0% at the start (threshold 90%); 100% truncated at the limit")
    assert "converging" not in finding.message


def test_a_degenerating_run_is_told_apart_from_a_collapse():
    results = evaluate_step_rules(history(degenerating_stream(), 96), resolve_thresholds())
    assert results["degeneration"].kind == "degeneration"
    assert results["entropy_collapse"] is None and results["diversity_collapse"] is None
    assert results["invalid_answers"].kind == "invalid_answers"
    assert all("converging" not in f.message for f in results.values() if f is not None)


def test_degeneration_stays_quiet_when_entropy_rises_with_valid_answers_as_after_evol_rl_s_evolving_point():
    stream = degenerating_stream()
    stream["invalid_ratio"] = [0.1] * 12  # EVOL-RL Fig. 3: entropy and length rise together, answers stay valid
    assert judge(stream, "degeneration") is None


def test_degeneration_stays_quiet_when_answers_are_invalid_but_the_text_holds():
    # neither noisier nor running on to the limit: a format problem (invalid_answers says so)
    stream = {"entropy": [0.41] * 8, "invalid_ratio": [0.1] * 3 + [1.0] * 5, "truncated_ratio": [0.0] * 8}
    assert judge(stream, "degeneration") is None


def test_answers_invalid_from_the_first_steps_are_not_degeneration():
    # a prompt without a \boxed{} instruction, or a limit too short for the policy's reasoning, from step 1
    stream = {"entropy": [0.41] * 3 + [0.9] * 5, "invalid_ratio": [1.0] * 8, "truncated_ratio": [1.0] * 8}
    assert judge(stream, "degeneration") is None


def test_degeneration_is_absent_without_invalid_ratio_or_anything_to_judge_the_text_by():
    stream = degenerating_stream()
    assert judge({"entropy": stream["entropy"]}, "degeneration") == "absent"
    # entropy needs two windows, and no truncation figure or length limit is known
    assert judge({"entropy": [0.4, 0.4, 0.4, 2.0, 2.0], "invalid_ratio": [0.1, 0.1, 0.1, 1.0, 1.0]},
                 "degeneration") == "absent"


def test_degeneration_gives_the_length_alone_when_no_limit_is_known():
    stream = {k: v for k, v in degenerating_stream().items() if k != "truncated_ratio"}
    finding = judge(stream, "degeneration")
    assert finding.message.endswith("100% of answers invalid over steps 10–12, from 10% at the start (threshold 90%); "
                                    "mean length 96")
    assert "max_completion_length" not in finding.values


def test_degeneration_resolves_when_the_answers_come_back():
    stream = degenerating_stream()
    recovered = {k: v + v[:3] for k, v in stream.items()}  # three steps like the start again
    assert judge(recovered, "degeneration") is None
