import json

import pytest

from rl.methods import METHODS, get_method, validate_hyperparameters
from rl.params import FieldError

ALL_METHODS = ["ttrl", "evol_rl", "compass", "darl", "rlpr", "r_zero", "em_token", "em_sequence", "self_consistency",
               "intuitor", "empo", "random_reward", "rlvr"]


def test_every_method_is_registered():
    assert sorted(METHODS) == sorted(ALL_METHODS)


@pytest.mark.parametrize("name", ALL_METHODS)
def test_every_schema_is_json_and_its_defaults_validate(name):
    method = get_method(name)
    data = json.loads(json.dumps(method.to_json()))
    assert data["name"] == name
    assert {"title", "paper", "needs_references", "label_free", "hyperparameters"} <= set(data)
    assert validate_hyperparameters(name, {}) == {h["name"]: h["default"] for h in data["hyperparameters"]}


def test_paper_defaults_are_used():
    evol = validate_hyperparameters("evol_rl", {})
    assert (evol["n_votes"], evol["n_train"], evol["temperature"], evol["eval_temperature"]) == (64, 32, 1.0, 0.6)
    assert (evol["learning_rate"], evol["kl_coef"], evol["epsilon_high"], evol["entropy_coef"], evol["alpha"]) == (
        5e-7, 0.001, 0.28, 0.003, 0.5)
    darl = validate_hyperparameters("darl", {})
    assert (darl["beta"], darl["gamma"], darl["tau"]) == (0.01, 10.0, None)
    rzero = validate_hyperparameters("r_zero", {})
    assert (rzero["solver_samples"], rzero["keep_low"], rzero["keep_high"], rzero["bleu_threshold"]) == (10, 3, 7, 0.5)


def test_only_reference_methods_need_references():
    assert {m.name for m in METHODS.values() if m.needs_references} == {"darl", "rlpr", "rlvr"}


def test_strings_from_a_form_are_coerced():
    values = validate_hyperparameters("evol_rl", {"n_votes": "16", "n_train": "8", "alpha": "0.25", "use_novelty": "false"})
    assert values["n_votes"] == 16 and values["n_train"] == 8
    assert values["alpha"] == 0.25 and values["use_novelty"] is False


def test_tau_accepts_null_for_the_dynamic_threshold():
    assert validate_hyperparameters("darl", {"tau": None})["tau"] is None
    assert validate_hyperparameters("darl", {"tau": "0.05"})["tau"] == 0.05


def test_an_unknown_method_names_the_valid_ones():
    with pytest.raises(FieldError) as error:
        get_method("ppo")
    assert error.value.field == "method"
    assert "ttrl" in str(error.value)


def test_an_unknown_hyperparameter_is_rejected():
    with pytest.raises(FieldError) as error:
        validate_hyperparameters("ttrl", {"alpha": 0.5})
    assert error.value.field == "alpha"


@pytest.mark.parametrize("name, value", [("alpha", 1.5), ("n_votes", 0), ("n_votes", 2.5), ("n_votes", True), ("temperature", "hot"), ("alpha", float("nan"))])
def test_a_bad_value_is_rejected_with_its_range(name, value):
    with pytest.raises(FieldError) as error:
        validate_hyperparameters("evol_rl", {name: value})
    assert error.value.field == name
    assert name in str(error.value) and (" in [" in str(error.value) or " in (" in str(error.value))


def test_alpha_out_of_range_names_the_range():
    with pytest.raises(FieldError, match=r"alpha=1\.5 .*\[0, 1\]"):
        validate_hyperparameters("evol_rl", {"alpha": 1.5})


def test_n_train_may_not_exceed_n_votes():
    with pytest.raises(FieldError) as error:
        validate_hyperparameters("ttrl", {"n_votes": 8, "n_train": 16})
    assert error.value.field == "n_train"


def test_each_rollout_batch_is_split_into_prompts_per_update_updates():
    # EVOL-RL / TTRL released scripts: 8 prompts per rollout batch, 1 prompt per PPO update (DESIGN §4.7)
    for name in ALL_METHODS:
        if name == "r_zero":  # EasyR1's rollout batch of 512 prompts in updates of 128 (tests/rl/test_r_zero.py)
            assert validate_hyperparameters(name, {})["prompts_per_update"] == 128
            continue
        if name in ("intuitor", "empo", "rlpr", "darl"):  # their own batches: test_intuitor.py, test_empo.py,
            continue  # test_rlpr.py (RLPR's release and DARL App. A: 768 prompts in updates of 192)
        values = validate_hyperparameters(name, {})
        assert values["prompts_per_update"] == 1 and values["ppo_epochs"] == 1
    assert validate_hyperparameters("ttrl", {"prompts_per_step": 8, "prompts_per_update": 4})["prompts_per_update"] == 4
    with pytest.raises(FieldError) as error:
        validate_hyperparameters("evol_rl", {"prompts_per_step": 8, "prompts_per_update": 3})
    assert error.value.field == "prompts_per_update"
    assert "prompts_per_update=3 is invalid" in str(error.value) and "prompts_per_step=8" in str(error.value)


def test_each_baseline_defaults_to_the_setup_of_the_paper_that_compares_it():
    # EVOL-RL §4 (and its ttrl_baseline.sh, K=12) runs TTRL, EM-RL and self-consistency at its own 12,288 tokens
    evol = validate_hyperparameters("evol_rl", {})
    for name in ("ttrl", "em_token", "em_sequence", "self_consistency"):
        values = validate_hyperparameters(name, {})
        same = ("max_completion_length", "n_votes", "n_train", "prompts_per_step", "prompts_per_update",
                "learning_rate", "lr_schedule", "warmup_ratio", "kl_coef", "temperature", "loss_type")
        assert {k: values[k] for k in same} == {k: evol[k] for k in same}, name
        assert "12,288" in METHODS[name].defaults_source


def test_every_method_says_where_its_defaults_come_from():
    # GET /api/methods shows it beside the schema (issue 22)
    assert [name for name, method in METHODS.items() if len(method.defaults_source) < 40] == []


def test_reward_accuracy_is_logged_only_where_the_reward_is_membership_of_the_vote():
    # issue 38, defect 7: reward_accuracy compares "credited for being in the majority" with "right"; EMPO rewards its
    # semantic class's share and self-consistency the share of the group agreeing, so it measured neither reward
    from rl.methods import METHODS

    assert {m.name for m in METHODS.values() if m.rewards_the_vote} == {"ttrl", "evol_rl", "compass"}
