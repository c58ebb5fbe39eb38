"""One Method record is the only place a method is described: what the trainer, rl.train and the web read."""

import ast
from pathlib import Path

import pytest

from rl.methods import METHODS, get_method, metric_prefixes, validate_hyperparameters
from rl.params import FieldError
from rl.methods.evol_rl import evol_rl_answer

ROOT = Path(__file__).resolve().parents[2]


def test_every_method_but_r_zero_scores_groups_and_r_zero_trains_in_phases():
    assert {name for name, m in METHODS.items() if m.scorer is None} == {"r_zero"}
    assert {name for name, m in METHODS.items() if m.trains_in_phases} == {"r_zero"}  # what picks the driver's plan


def test_the_answer_rule_is_the_methods_own():
    assert METHODS["evol_rl"].answer_rule is evol_rl_answer
    assert METHODS["ttrl"].answer_rule("so \\boxed{x}") == "x"
    assert METHODS["evol_rl"].answer_rule("so \\boxed{x}") is None  # EVOL-RL: a box without a digit is invalid


def test_the_metric_prefixes_come_from_the_methods():
    assert {"ttrl", "evol_rl", "compass", "darl", "rlpr", "rzero"} <= set(metric_prefixes())
    assert METHODS["r_zero"].metric_prefix == "rzero"


def test_each_method_names_the_signals_its_run_page_charts():
    assert METHODS["evol_rl"].charts == ("similarity/mean", "evol_rl/novelty_mean")
    assert METHODS["ttrl"].charts == ("similarity/mean",)
    assert not METHODS["r_zero"].charts_label_accuracy and METHODS["ttrl"].charts_label_accuracy
    for method in METHODS.values():
        prefixed = [name for name in method.charts if "/" in name and name.split("/")[0] not in
                    ("similarity", "reward", "response_length")]
        assert all(name.split("/")[0] == method.metric_prefix for name in prefixed), method.name


def test_the_step_count_is_the_methods():
    assert METHODS["ttrl"].total_steps(validate_hyperparameters("ttrl", {}), 20) == 20
    hp = validate_hyperparameters("r_zero", {"iterations": 2, "challenger_steps": 3, "solver_steps": 4})
    assert METHODS["r_zero"].total_steps(hp, 20) == 14


def test_whether_a_run_reads_references_is_decided_in_one_place():
    assert METHODS["darl"].reference_field_for({"use_majority_as_reference": True}) is None
    assert METHODS["darl"].reference_field_for({"use_majority_as_reference": False}) == "reference"
    assert METHODS["rlvr"].reference_field_for({}) == "label"
    # the rule is written once: no other module reads the DARL switch by name
    readers = []
    for path in list((ROOT / "rl").rglob("*.py")) + list((ROOT / "webapp").rglob("*.py")) + list(
            (ROOT / "workers").rglob("*.py")):
        if path.parts[-2] == "methods" and path.parent.parent.name == "rl":
            continue
        if "use_majority_as_reference" in path.read_text(encoding="utf-8"):
            readers.append(str(path.relative_to(ROOT)))
    assert readers == []


def test_no_module_outside_rl_methods_lists_method_names_to_decide_behaviour():
    """What used to be spread over seven places (scorers, answer rules, trainable list, metric prefixes, chart
    lists, step counts) is read from the Method: no tuple or dict of method names is left elsewhere."""
    offenders = []
    names = set(METHODS)
    for path in list((ROOT / "rl").glob("*.py")) + list((ROOT / "webapp").rglob("*.py")) + list(
            (ROOT / "workers").rglob("*.py")):
        if "migrations" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
                literal = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
                if len(literal & names) >= 2:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if len(keys & names) >= 2 and "presets" not in path.name:
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


def test_the_api_record_carries_the_prompt_prefix_and_charts():
    data = METHODS["evol_rl"].to_json()
    assert data["metric_prefix"] == "evol_rl" and data["charts"] == ["similarity/mean", "evol_rl/novelty_mean"]
    assert "system_prompt" in data


def test_r_zero_keeps_its_own_relations():
    with pytest.raises(FieldError) as error:
        validate_hyperparameters("r_zero", {"keep_low": 8, "keep_high": 7})
    assert error.value.field == "keep_low"
    with pytest.raises(FieldError) as error:
        validate_hyperparameters("r_zero", {"solver_samples": 5})
    assert error.value.field == "keep_high"


def test_an_unknown_method_is_a_hyperparameter_error_naming_the_field():
    with pytest.raises(FieldError) as error:
        get_method("nope")
    assert error.value.field == "method"
