"""Metric names of trainers Evolab does not run, mapped onto DESIGN §5's (rl/trainer_metrics.py)."""
from rl.trainer_metrics import TRAINER_METRICS, detect_trainer, with_design_names
from webapp.alerts.rule_specs import RULES


def test_each_trainer_is_told_by_its_own_names():
    assert detect_trainer(["actor/entropy", "critic/score/mean"]) == "verl"
    assert detect_trainer(["loss", "completions/mean_length", "reward"]) == "trl"
    assert detect_trainer(["train/policy_loss", "train/kl"]) == "openrlhf"
    assert detect_trainer(["loss", "learning_rate"]) is None  # any Transformers run logs these


def test_reported_names_are_kept_and_known_ones_added_under_design_names():
    values = with_design_names({"actor/entropy": 0.5, "response_length/clip_ratio": 0.1, "mine": 3.0}, "verl")
    assert values == {"actor/entropy": 0.5, "entropy": 0.5, "response_length/clip_ratio": 0.1,
                      "truncated_ratio": 0.1, "mine": 3.0}


def test_a_design_name_the_trainer_reports_itself_keeps_its_value():
    assert with_design_names({"reward": 0.2, "reward/mean": 0.9}, "trl")["reward/mean"] == 0.9


def test_nothing_is_mapped_for_an_unknown_trainer():
    assert with_design_names({"actor/entropy": 0.5}, None) == {"actor/entropy": 0.5}


def test_every_trainer_feeds_the_signals_the_collapse_rules_read():
    # entropy_collapse reads entropy, length_collapse response_length/mean: each trainer that logs them reaches them
    read = {name for spec in RULES.values() for name in spec.metrics}
    for trainer in ("verl", "trl"):
        mapped = set(TRAINER_METRICS[trainer].values())
        assert {"entropy", "response_length/mean"} <= mapped & read, trainer


def test_trls_names_as_transformers_wandb_and_tensorboard_callbacks_write_them_are_mapped_too():
    # transformers' WandbCallback and TensorBoardCallback prefix a training log's names with "train/" (rewrite_logs)
    names = ["train/entropy", "train/completions/mean_length", "train/reward", "train/frac_reward_zero_std"]
    assert detect_trainer(names) == "trl"
    mapped = with_design_names({name: 0.5 for name in names}, "trl")
    assert {"entropy", "response_length/mean", "reward/mean", "zero_variance_groups"} <= set(mapped)
    assert all(TRAINER_METRICS["trl"]["train/" + name] == design for name, design in TRAINER_METRICS["trl"].items()
               if not name.startswith("train/"))
