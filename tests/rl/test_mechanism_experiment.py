"""The template metrics and the table of scripts/experiments/mechanism.py, on worked examples."""

import math

import pytest

from scripts.experiments.mechanism import spread, table, template_diversity
from scripts.experiments.templates import solve

CHAIN = solve(34, [25, -12, 9], "chain")
RUNNING = solve(34, [25, -12, 9], "running")
GROUPED = solve(34, [25, -12, 9], "grouped")


def group(*texts):
    return {"rollouts": [{"text": t} for t in texts]}


def test_three_templates_used_equally_have_the_full_log2_3_bits():
    values = template_diversity([group(CHAIN, RUNNING, GROUPED), group(GROUPED, RUNNING, CHAIN)])
    assert values["template_entropy"] == pytest.approx(math.log2(3))
    assert values["templates_per_group"] == 3
    assert values["dominant_share"] == pytest.approx(1 / 3)


def test_one_template_left_has_no_entropy_and_text_of_no_template_counts_in_the_total_only():
    # shares over 4 rollouts: chain 3/4, none 1/4 -> entropy of the templates present: -(3/4)·log2(3/4)
    values = template_diversity([group(CHAIN, CHAIN), group(CHAIN, "I do not know.")])
    assert values["template_entropy"] == pytest.approx(-(0.75 * math.log2(0.75)))
    assert values["templates_per_group"] == 1
    assert values["dominant_share"] == 0.75
    assert template_diversity([group(CHAIN, CHAIN)])["template_entropy"] == 0


def test_the_spread_is_the_mean_and_sample_standard_deviation_over_seeds():
    assert spread([0.1, 0.2, 0.3]) == "0.200 ± 0.100"
    assert spread([None, 0.5]) == "0.500 ± 0.000"
    assert spread([None]) == "–"


def test_the_table_compares_the_first_and_last_steps_and_the_evaluations_before_and_after():
    rows = [{"arm": "TTRL", "seed": seed, "step": 0, "pass@1": 0.3, "pass@16": 0.9, "maj@16": 0.5}
            for seed in (0, 1)]
    rows += [{"arm": "TTRL", "seed": seed, "step": step, "template_entropy": 1.5 if step == 1 else 0.5,
              "templates_per_group": 3.0, "entropy": 0.1, "pass@1": 0.2 + 0.1 * seed if step == 2 else None,
              "pass@16": 0.8 if step == 2 else None, "maj@16": 0.4 if step == 2 else None}
             for seed in (0, 1) for step in (1, 2)]
    line = table(rows, steps=2, window=1).splitlines()[2]
    assert line.startswith("| TTRL (2 seeds) | 1.500 ± 0.000 → 0.500 ± 0.000 | 3.000 ± 0.000 → 3.000 ± 0.000 |")
    assert "0.300 ± 0.000 → 0.250 ± 0.071" in line  # eval pass@1: step 0 → step 2, 0.2 and 0.3 over the seeds
