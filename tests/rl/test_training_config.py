"""What rl.train hands TRL and the evaluator: the papers' schedule, sampling and switches (issue 8, item 8)."""

import pytest

from rl.callbacks import PeriodicEval
from rl.methods import validate_hyperparameters
from rl.metrics import pass_at_k
from rl.grpo_config import grpo_config


def config_for(method="evol_rl", **values):
    return grpo_config(validate_hyperparameters(method, values), max_steps=10, seed=0, output_dir="unused")


def test_the_learning_rate_follows_a_cosine_schedule_after_a_linear_warmup_by_default():
    args = config_for()
    assert getattr(args.lr_scheduler_type, "value", args.lr_scheduler_type) == "cosine" and args.warmup_steps == 0.03
    assert config_for(lr_schedule="constant", warmup_ratio=0).lr_scheduler_type == "constant"


def test_the_warmup_and_decay_are_counted_in_optimizer_updates():
    # 10 steps x 8 updates each (8 prompts per step, 1 per update): the schedule spans all 80 updates
    args = config_for()
    assert args.max_steps == 80
    assert args.get_warmup_steps(args.max_steps) == 3  # ceil(0.03 x 80)


def test_weight_decay_is_the_methods():
    assert config_for().weight_decay == 0.0
    assert validate_hyperparameters("r_zero", {})["weight_decay"] == 0.01  # R-Zero App. B.1


def test_vllms_importance_sampling_correction_is_explicit_and_off_unless_asked_for():
    hp = validate_hyperparameters("ttrl", {})
    assert hp["vllm_importance_sampling_correction"] is False
    # rl.train refuses vllm without a GPU, but TRL's arguments are built the same way on any machine
    args = grpo_config(dict(hp, generation_backend="vllm"), max_steps=1, seed=0, output_dir="unused")
    assert args.use_vllm and args.vllm_importance_sampling_correction is False  # TRL's own default is True
    args = grpo_config(dict(hp, generation_backend="vllm", vllm_importance_sampling_correction=True), max_steps=1,
                       seed=0, output_dir="unused")
    assert args.vllm_importance_sampling_correction is True


def test_the_embedders_truncation_length_is_a_visible_hyperparameter():
    hp = validate_hyperparameters("evol_rl", {})
    assert hp["embedding_max_length"] is None  # the embedder's own window (all-MiniLM-L6-v2: 256)
    assert hp["embedding_pooling"] == "windows"  # the whole rollout, not only its last window (issue 22, defect 3)
    assert validate_hyperparameters("evol_rl", {"embedding_max_length": 128})["embedding_max_length"] == 128


def test_evaluation_samples_at_top_p_095_and_32_samples_by_default():
    hp = validate_hyperparameters("evol_rl", {})
    assert (hp["eval_temperature"], hp["eval_top_p"], hp["eval_samples"]) == (0.6, 0.95, 32)


class _Events:
    def __init__(self):
        self.logged = []

    def eval(self, step, prompt_set, values):
        self.logged.append((step, prompt_set, values))


class _State:
    global_step = 0
    is_world_process_zero = True


class _Tokenizer:
    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": list(range(len(text.split())))}


class _Trainer:
    class model:  # noqa: N801 - a stand-in with the two calls evaluate() makes
        training = False

        @staticmethod
        def eval():
            pass

        @staticmethod
        def train(mode):
            pass

    processing_class = _Tokenizer()


class ScriptedEval(PeriodicEval):
    """PeriodicEval with its sampling replaced by fixed completions: the estimates are what is tested."""

    def __init__(self, texts, **kwargs):
        super().__init__(**kwargs)
        self.texts = texts
        self.trainer = _Trainer()

    def _sample(self, prompts):
        return self.texts


def test_pass_at_16_is_estimated_from_all_32_samples():
    texts = ["so \\boxed{7}"] * 3 + ["so \\boxed{8}"] * 29  # 3 of 32 correct
    events = _Events()
    evaluator = ScriptedEval(texts, events=events, prompts=[{"id": "a", "prompt": "q", "label": "7"}],
                             prompt_set="held", every=1, samples=32, temperature=0.6, top_p=0.95, max_new_tokens=8)
    values = evaluator.evaluate(_State())
    assert values["pass@1"] == pytest.approx(3 / 32)
    assert values["pass@16"] == pytest.approx(pass_at_k(32, 3, 16))  # 1 − C(29,16)/C(32,16)
    assert values["pass@16"] == pytest.approx(1 - (16 * 15 * 14) / (32 * 31 * 30))
    assert values["maj@16"] == 0.0 and values["pass@32"] == 1.0
    assert events.logged[0][2] == values


def test_evaluation_reads_answers_with_the_methods_rule():
    texts = ["<answer>7</answer>"] * 4
    evaluator = ScriptedEval(texts, events=_Events(), prompts=[{"id": "a", "prompt": "q", "label": "7"}],
                             prompt_set="held", every=1, samples=4, temperature=0.6, top_p=0.95, max_new_tokens=8,
                             answer_rule=lambda t: t.removeprefix("<answer>").removesuffix("</answer>"))
    assert evaluator.evaluate(_State())["pass@1"] == 1.0
