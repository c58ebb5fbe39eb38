"""RLPR's no-reasoning term r′ as its release computes it (issue 38, defect 1).

The release (OpenBMB/RLPR, verl/trainer/ppo/ray_trainer.py: `compute_promptgt2scoreA`, `get_scoreA`) scores every
training prompt once, before training and before a checkpoint is loaded, so with the initial policy: the text is the
decoded chat-templated prompt + ' ' + y* + ' ' + EOS, tokenised whole, and r′ is the mean probability of the tokens
that overlap y*. Every step reuses it. Evolab's earlier variant (prompt ids + the answer opener + y*, with the current
policy at each step) stays behind `r_prime: "per_step"`.
"""
import json
import shutil

import numpy as np
import pytest
import torch
from transformers import PreTrainedTokenizer

from rl.methods import METHODS, validate_hyperparameters
from rl.policy import heldout_problems
from tests.rl.policies import load_policy
from rl.policy_probe import PolicyProbe
from rl.probes import reference_after_prompt
from rl.prompts import encode_prompt, format_prompt
from tests.rl.test_rlpr import TableProbe, rlpr_group
from tests.rl.test_train_cli import events_of, of_type, write_config
from tests.rl.trainer_process import run_trainer
from tests.rl.test_train_methods import SMALL, write_rows

pytestmark = pytest.mark.trainer


@pytest.fixture(scope="module")
def policy():
    model, tokenizer = load_policy("default")
    model.eval()
    return model, tokenizer


def direct_mean_probability(model, context_ids, answer_ids):
    with torch.no_grad():
        probabilities = torch.softmax(model(input_ids=torch.tensor([context_ids + answer_ids])).logits[0].float(), -1)
    start = len(context_ids)
    return float(np.mean([probabilities[start - 1 + i, t].item() for i, t in enumerate(answer_ids)]))


def chat_prompt_ids(tokenizer, prompt):
    """The ids the trainer generates from (TRL tokenises the formatted prompt, special tokens on)."""
    return encode_prompt(tokenizer, format_prompt(tokenizer, prompt, METHODS["rlpr"].system_prompt))


def test_r_prime_is_the_reference_after_a_space_as_the_release_tokenises_it(policy):
    """Worked example on the default policy's tokenizer, which spells a space as its own token: the release's text
    '<s>…<|assistant|> 68 </s>' scores '6', '8' after the prompt and the space; the answer opener is not in it."""
    model, tokenizer = policy
    prompt_ids = chat_prompt_ids(tokenizer, "What is 37 + 31?")
    space = tokenizer(" ", add_special_tokens=False)["input_ids"]
    answer = tokenizer("68", add_special_tokens=False)["input_ids"]
    expected = direct_mean_probability(model, prompt_ids + space, answer)
    probe = PolicyProbe(model, tokenizer, temperature=1.0)
    assert probe.reference_probabilities_without_reasoning([prompt_ids], ["68"]) == pytest.approx([expected], abs=1e-6)
    # not the per-step variant's context (the prompt and `<answer>`)
    opener = probe.answer_prefix_ids(rlpr_group(1), METHODS["rlpr"].answer_opener)
    assert opener != prompt_ids + space
    # a reference with inner spaces is scored whole, its spaces included
    inner = tokenizer("x = 5", add_special_tokens=False)["input_ids"]
    assert probe.reference_probabilities_without_reasoning([prompt_ids], ["x = 5"]) == pytest.approx(
        [direct_mean_probability(model, prompt_ids + space, inner)], abs=1e-6)


class CharacterTokenizer(PreTrainedTokenizer):
    """A slow (pure Python) transformers tokenizer, one token per character: it gives no character offsets."""

    def __init__(self, **kwargs):
        self.vocab = {c: i for i, c in enumerate(["<pad>", "</s>"] + [chr(i) for i in range(32, 127)])}
        super().__init__(pad_token="<pad>", eos_token="</s>", **kwargs)

    def get_vocab(self):
        return dict(self.vocab)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def _tokenize(self, text):
        return list(text)

    def _convert_token_to_id(self, token):
        return self.vocab.get(token, 0)

    def _convert_id_to_token(self, index):
        return next(c for c, i in self.vocab.items() if i == index)


def test_a_tokenizer_without_offsets_is_refused_with_the_switch_named():
    with pytest.raises(ValueError, match="CharacterTokenizer does not give.*per_step"):
        reference_after_prompt(CharacterTokenizer(), [70, 71], "5")


def test_the_scorer_uses_the_frozen_r_prime_and_the_per_step_variant_on_request():
    """r = 0.9, 0.5, 0.2, 0.6; the frozen r′ of the prompt is 0.3 → r̂ = 0.6, 0.2, 0, 0.3. The per-step variant
    asks the probe (r′ = 0.4 here) → 0.5, 0.1, 0, 0.2."""
    probe = TableProbe({0: 0.9, 1: 0.5, 2: 0.2, 3: 0.6, 99: 0.4})
    hp = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4, "format_coefficient": 0.0})
    assert hp["r_prime"] == "frozen"
    group = rlpr_group(4)
    group.baseline = 0.3
    score = METHODS["rlpr"].scorer(group, hp, probe)
    assert score.rewards == pytest.approx([0.6, 0.2, 0.0, 0.3])
    assert all(e["r_ref_without_reasoning"] == pytest.approx(0.3) for e in score.extras)
    per_step = METHODS["rlpr"].scorer(group, dict(hp, r_prime="per_step"), probe)
    assert per_step.rewards == pytest.approx([0.5, 0.1, 0.0, 0.2])


def test_a_frozen_r_prime_that_was_never_computed_is_an_error_not_a_zero():
    hp = validate_hyperparameters("rlpr", {"n_votes": 4, "n_train": 4})
    with pytest.raises(RuntimeError, match="r′.*prompt 'p'"):
        METHODS["rlpr"].scorer(rlpr_group(4, baseline=None), hp, TableProbe({0: 0.9, 1: 0.5, 2: 0.2, 3: 0.6, 99: 0.4}))


def test_the_prompt_baselines_are_computed_only_when_the_reward_uses_them():
    baselines = METHODS["rlpr"].prompt_baselines
    hp = validate_hyperparameters("rlpr", {})
    assert baselines(hp) is not None
    assert baselines(dict(hp, r_prime="per_step")) is None
    assert baselines(dict(hp, use_debiasing=False)) is None


def test_a_run_scores_r_prime_with_the_initial_policy_and_keeps_it_across_a_resume(tmp_path, policy):
    """Two steps at a learning rate that moves the policy: every group's r′ is the initial policy's value for its
    prompt, at step 2 as at step 1, and again when step 2 is trained once more from checkpoint-1."""
    write_rows(tmp_path / "prompts.jsonl", reference=lambda p: p["answer"])
    config = write_config(tmp_path, method="rlpr", max_steps=2,
                          hyperparameters={**SMALL, "learning_rate": 1e-3, "save_every": 1})
    run = tmp_path / "run"
    result = run_trainer(config, run)
    assert result.returncode == 0, result.stderr[-3000:]

    model, tokenizer = policy
    probe = PolicyProbe(model, tokenizer, temperature=1.0)
    problems = {p["id"]: p for p in heldout_problems(8)}
    ids = sorted(problems)
    initial = dict(zip(ids, probe.reference_probabilities_without_reasoning(
        [chat_prompt_ids(tokenizer, problems[i]["prompt"]) for i in ids], [problems[i]["answer"] for i in ids])))

    def r_primes(events, step):
        return {g["prompt_id"]: {r["extra"]["r_ref_without_reasoning"] for r in g["rollouts"]}
                for g in of_type(events, "group") if g["step"] == step}

    events = events_of(run)
    for step in (1, 2):
        seen = r_primes(events, step)
        assert seen and all(v == pytest.approx(initial[pid], abs=1e-5) for pid, values in seen.items() for v in values)
    saved = json.loads((run / "checkpoints" / "checkpoint-1" / "evolab_prompt_baselines.json").read_text())
    assert saved == pytest.approx(initial, abs=1e-5)

    shutil.rmtree(run / "checkpoints" / "checkpoint-2")
    result = run_trainer(config, run, "--resume")
    assert result.returncode == 0, result.stderr[-3000:]
    again = [g for g in of_type(events_of(run), "group") if g["step"] == 2][-2:]
    assert all(r["extra"]["r_ref_without_reasoning"] == pytest.approx(initial[g["prompt_id"]], abs=1e-5)
               for g in again for r in g["rollouts"])
