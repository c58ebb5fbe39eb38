"""The statistics the step rules judge with (webapp/alerts/trend.py), on worked examples."""
import math

import pytest

from webapp.alerts import trend


def test_the_noise_of_a_step_is_read_from_consecutive_differences_whatever_the_trend():
    # a straight fall of 0.1 a step: every |Δ| is 0.1, and the trend adds nothing beyond it
    assert trend.noise([1.0, 0.9, 0.8, 0.7, 0.6]) == pytest.approx(1.2658 * 0.1, abs=1e-4)
    # a sudden fall or one wild step is the largest |Δ|, left out: |Δ| = 0.1, 0.1, 5.0, 5.0, 0.1, 0.1 keeps five
    assert trend.noise([1.0, 1.1, 1.0, 6.0, 1.0, 1.1, 1.0]) == pytest.approx(1.2658 * (0.4 + 5.0) / 5, abs=1e-4)
    # a share that ties from step to step is not noiseless: |Δ| 0, 0, 0.25, 0, 0.25 keeps 0, 0, 0, 0.25
    assert trend.noise([1.0, 1.0, 1.0, 0.75, 0.75, 1.0]) == pytest.approx(1.2658 * 0.25 / 4, abs=1e-4)
    assert trend.noise([1.0, None, 1.2, 1.0]) is None  # two differences: too few to trust


def test_the_noise_of_normal_draws_is_their_standard_deviation():
    import random

    draws = random.Random(7)
    assert trend.noise([draws.gauss(0, 1) for _ in range(20_000)]) == pytest.approx(1.0, abs=0.03)


def test_a_comparison_is_of_window_medians_with_the_noise_of_their_difference():
    steps = list(range(1, 11))
    values = [1.0, 1.2, 1.0, 1.2, 1.0, 0.5, 0.7, 0.5, 0.7, 0.5]
    found = trend.compare(steps, values, start_window=5, window=5)
    sigma = 1.2658 * 0.2  # |Δ| are 0.2 eight times and 0.5 once, left out
    assert (found.start, found.recent, found.start_steps, found.recent_steps) == (1.0, 0.5, (1, 5), (6, 10))
    assert found.noise == pytest.approx(math.sqrt(math.pi / 2) * sigma * math.sqrt(2 / 5), abs=1e-4)
    assert found.beyond(2) and not found.beyond(3)  # −0.5 is 2.5 standard errors
    assert found.window_text("entropy") == "entropy of steps 6–10 is 50% of steps 1–5"
    assert f"{found.noise_share(2):.3f}" == "0.401"


def test_a_share_read_from_few_counted_things_is_at_least_that_noisy():
    steps, values = list(range(1, 9)), [1.0, 1.0, 1.0, 1.0, 1.0, 0.75, 0.75, 0.75]
    plain = trend.compare(steps, values, 5, 3)
    counted = trend.compare(steps, values, 5, 3, per_step=4)  # pass@16 of 4 prompts: p 0.906, √(p(1−p)/4) = 0.146
    assert counted.noise == pytest.approx(1.2533 * 0.1459 * math.sqrt(1 / 5 + 1 / 3), abs=1e-3)
    assert counted.noise > plain.noise


def test_a_comparison_waits_for_both_windows_and_skips_missing_steps():
    assert trend.compare([1, 2, 3, 4], [1.0, 1.0, 1.0, 1.0], 3, 3) is None
    found = trend.compare(list(range(1, 9)), [1.0, None, 1.0, 1.0, None, 0.2, 0.2, 0.2],
                          3, 3)
    assert found.start_steps == (1, 4) and found.recent_steps == (6, 8)


def test_the_wilson_interval_of_a_few_counted_things_is_wide():
    # six prompts, every one flat: the share could still be 60%
    assert trend.wilson(1.0, 6, 2) == pytest.approx((0.6, 1.0))
    assert trend.wilson(1.0, 10, 2)[0] == pytest.approx(0.714, abs=1e-3)
    low, high = trend.wilson(0.5, 100, 1.96)  # the textbook case: 0.404 to 0.596
    assert (round(low, 3), round(high, 3)) == (0.404, 0.596)


def test_a_share_s_level_is_judged_on_its_counts_when_the_run_s_size_is_known():
    counted = trend.level([1, 2, 3], [1.0, 1.0, 1.0], window=3, z=2, per_step=2)
    assert counted.mean == 1.0 and counted.counted == 6 and counted.low == pytest.approx(0.6)
    noisy = trend.level(list(range(1, 7)), [0.9, 0.7, 0.9, 0.7, 0.9, 0.7], window=3, z=2)
    assert noisy.counted is None and noisy.low < noisy.mean < noisy.high
    assert trend.level([1, 2], [0.5, 0.5], window=3, z=2) is None


def test_percentages_keep_a_decimal_below_ten():
    assert (trend.percent(0.054), trend.percent(0.05), trend.percent(0.456)) == ("5.4%", "5%", "46%")
