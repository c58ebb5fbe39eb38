"""Train the small default policy shipped in rl/assets/default_policy/.

A tiny Llama (4 layers, d_model 128, about 1M parameters, byte-level BPE with a
small chat template) learns synthetic arithmetic word problems. Every training
prompt is what the policy is given in a run, `rl.prompts.format_prompt(tokenizer,
problem, system)`, under one of the papers' system prompts (rl.arithmetic.ANSWER_FORMATS):

- SimpleRL-Zoo's / EVOL-RL's / R-Zero's "Please reason step by step, ..." (40%):
  it answers " 37 + 31 = 68. The answer is \\boxed{68}.";
- DARL's <think>/<answer> prompt (40%): " <think> 37 + 31 = 68. </think> <answer>68</answer>";
- no system prompt, the user turn alone (20%): as step by step.

It is trained until it is right on about half of its samples at temperature 1.0
under both papers' prompts (on a validation set; the held-out set is only measured),
so that majority voting over its rollouts carries signal: label-free RL on it has
something to gain and something to lose.

A second, short stage teaches it R-Zero's challenger task: given the user turn
rl.arithmetic.CHALLENGER_PROMPT (no system prompt) it writes "<question> a new
problem </question>", so that an R-Zero run on it passes the challenger's format
check. Its batches mix challenger examples with more arithmetic, so the arithmetic
skill is kept.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/train_default_policy.py

Deterministic in --seed (and --threads) on CPU; takes about ten minutes on 2 cores. `--init DIR`
starts the second stage from an existing first-stage policy (its evaluation.json
says how many steps it trained), which is what the first stage would have produced.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from rl.arithmetic import (ANSWER_FORMATS, CHALLENGER_PROMPT, FORMAT_SHARES, challenger_examples,  # noqa: E402
                           synthetic_problems)
from rl.methods.r_zero import extract_question  # noqa: E402
from rl.policy import DEFAULT_POLICY_DIR, HELDOUT_SEED, SAMPLE_PATH  # noqa: E402
from rl.prompts import encode_prompt, format_prompt  # noqa: E402

VALIDATION_SEED = 2000  # problems that decide when training stops; disjoint from the held-out set
PAPER_FORMATS = ("step_by_step", "think_answer")  # the formats whose pass@1 must land between 20% and 80%


def assign_formats(n: int, seed: int) -> list[str]:
    """The answer format of each of `n` training problems, drawn with FORMAT_SHARES, deterministic in `seed`."""
    rng = random.Random(f"formats-{seed}")
    names = list(FORMAT_SHARES)
    return rng.choices(names, weights=[FORMAT_SHARES[name] for name in names], k=n)


# A small chat template so that the chat path of rl.prompts.format_prompt runs on CPU too: the template writes
# the BOS (the tokenizer adds no special tokens of its own), each message is "<|role|>content" and a newline
# (an assistant message ends with EOS instead), and add_generation_prompt opens the assistant turn.
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|' + message['role'] + '|>' + message['content'] }}"
    "{%- if message['role'] == 'assistant' %}{{- eos_token }}{%- else %}{{- '\\n' }}{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|assistant|>' }}{%- endif %}"
)
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>"]
SPECIAL_TOKENS = ["<pad>", "<s>", "</s>", "<unk>"] + ROLE_TOKENS


def tokenizer_corpus(seed: int) -> list[str]:
    """What the BPE is trained on: the texts of training examples, message by message, in the training mix."""
    problems = synthetic_problems(5000, seed=seed + 2)
    formats = assign_formats(len(problems), seed + 2)
    corpus = []
    for problem, name in zip(problems, formats):
        fmt = ANSWER_FORMATS[name]
        corpus += ([fmt.system + "\n"] if fmt.system else []) + [problem["prompt"] + "\n", problem[fmt.completion_key]]
    for example in challenger_examples(500, seed=seed + 2):
        corpus += [example["prompt"] + "\n", example["completion"]]
    return corpus


def build_tokenizer(seed: int, vocab_size: int = 768, corpus: list[str] | None = None):
    """A tiny byte-level BPE trained on the training texts, digits always one token each, with a chat template.

    Byte-level so any prompt (a MATH problem, unicode) round-trips without <unk>; one token per
    digit (the Digits pre-tokenizer isolates them) so that column-wise arithmetic is learnable.
    Merges may cross spaces (ByteLevel without its word-splitting regex): the template phrases of
    the problems become a few tokens and each system prompt, frequent in the corpus, a single one,
    so the formatted prompts stay as short as the bare problems (CPU training cost is linear in
    the sequence length).
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    corpus = tokenizer_corpus(seed) if corpus is None else corpus  # another policy passes its own texts
    backend.train_from_iterator(corpus, trainer)  # deterministic: merges ranked by count, ties by pair
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>",
        extra_special_tokens=ROLE_TOKENS, clean_up_tokenization_spaces=False, model_max_length=1024,
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


def build_model(tokenizer, args):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=args.d_model, intermediate_size=3 * args.d_model,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.heads,
        max_position_embeddings=512, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    return LlamaForCausalLM(config)


def as_examples(tokenizer, problems: list[dict], formats: list[str]) -> list[dict]:
    """Training examples `{prompt, completion}`: the formatted prompt the policy sees, the format's completion."""
    return [{"prompt": format_prompt(tokenizer, p["prompt"], ANSWER_FORMATS[name].system),
             "completion": p[ANSWER_FORMATS[name].completion_key]} for p, name in zip(problems, formats)]


def challenger_training_examples(tokenizer, n: int, seed: int) -> list[dict]:
    """R-Zero challenger examples with the prompt formatted as a run gives it: the user turn, no system prompt."""
    return [{"prompt": format_prompt(tokenizer, e["prompt"], None), "completion": e["completion"]}
            for e in challenger_examples(n, seed=seed)]


def encode_batch(tokenizer, examples):
    """Prompt + completion + eos, right-padded; the loss sees completion tokens only.

    The prompt ids are those TRL generates from (`rl.prompts.encode_prompt`: the formatted text,
    special tokens on, so exactly the chat template's one BOS); the completion follows the open
    assistant turn, as generated.
    """
    rows, labels = [], []
    for e in examples:
        prompt_ids = encode_prompt(tokenizer, e["prompt"])
        completion_ids = tokenizer(e["completion"], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append(prompt_ids + completion_ids)
        labels.append([-100] * len(prompt_ids) + completion_ids)
    width = max(map(len, rows))
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    label_ids = torch.tensor([r + [-100] * (width - len(r)) for r in labels])
    attention_mask = (torch.arange(width)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
    return input_ids, attention_mask, label_ids


@torch.no_grad()
def sample_answers(model, tokenizer, prompts, samples: int, temperature: float | None, max_new_tokens=64,
                   batch_size=64):
    """`samples` completions per (formatted) prompt; temperature None means greedy decoding."""
    tokenizer.padding_side = "left"  # generation continues from the last prompt token
    texts = []
    expanded = [p for p in prompts for _ in range(samples)]
    for start in range(0, len(expanded), batch_size):
        batch = tokenizer(expanded[start:start + batch_size], return_tensors="pt", padding=True)
        kwargs = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0} if temperature else {"do_sample": False}
        out = model.generate(**batch, max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id,
                             eos_token_id=tokenizer.eos_token_id, **kwargs)
        texts += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    return [texts[i * samples:(i + 1) * samples] for i in range(len(prompts))]


def pass_at_1(model, tokenizer, problems, fmt: str, samples: int, seed: int) -> tuple[float, list[list[str]]]:
    """Mean accuracy of `samples` completions per problem at temperature 1.0 under format `fmt`, and the completions."""
    answer_format = ANSWER_FORMATS[fmt]
    model.eval()
    torch.manual_seed(seed)
    prompts = [format_prompt(tokenizer, p["prompt"], answer_format.system) for p in problems]
    sampled = sample_answers(model, tokenizer, prompts, samples, temperature=1.0)
    model.train()
    # the synthetic answers are plain integers, so string equality is exact
    correct = [[answer_format.extract(t) == p["answer"] for t in texts] for p, texts in zip(problems, sampled)]
    # pass@1 = mean over problems of c/n, the unbiased estimator with k = 1 (Chen et al. 2021)
    return sum(sum(c) / len(c) for c in correct) / len(correct), sampled


def challenger_format_rate(model, tokenizer, samples: int, seed: int) -> tuple[float, list[str]]:
    """Share of challenger completions at temperature 1.0 that pass R-Zero's <question> format check."""
    model.eval()
    torch.manual_seed(seed)
    prompt = format_prompt(tokenizer, CHALLENGER_PROMPT, None)
    (texts,) = sample_answers(model, tokenizer, [prompt], samples, temperature=1.0, max_new_tokens=96)
    model.train()
    return sum(extract_question(t) is not None for t in texts) / samples, texts


def train_challenger_task(model, tokenizer, arithmetic: list[dict], args) -> None:
    """Stage 2: batches of challenger examples plus as many arithmetic examples, constant small rate."""
    challenger = challenger_training_examples(tokenizer, args.challenger_steps * args.challenger_per_batch, args.seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.challenger_lr, weight_decay=0.01, betas=(0.9, 0.98))
    started = time.time()
    model.train()
    for step in range(args.challenger_steps):
        batch = arithmetic[step * args.challenger_per_batch:(step + 1) * args.challenger_per_batch]
        batch = batch + challenger[step * args.challenger_per_batch:(step + 1) * args.challenger_per_batch]
        input_ids, attention_mask, labels = encode_batch(tokenizer, batch)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 25 == 0 or step == args.challenger_steps - 1:
            print(f"challenger step {step:4d}  loss {loss.item():.4f}  {time.time() - started:.0f}s", flush=True)


def evaluate(model, tokenizer, problems, samples: int, seed: int) -> dict:
    """Held-out figures per answer format, and the challenger's format rate."""
    formats = {}
    for fmt, answer_format in ANSWER_FORMATS.items():
        pass1, sampled = pass_at_1(model, tokenizer, problems, fmt, samples, seed)
        model.eval()
        prompts = [format_prompt(tokenizer, p["prompt"], answer_format.system) for p in problems]
        greedy = sample_answers(model, tokenizer, prompts, 1, temperature=None)
        model.train()
        greedy_acc = sum(answer_format.extract(t[0]) == p["answer"] for p, t in zip(problems, greedy)) / len(problems)
        answer_rate = sum(answer_format.extract(t) is not None for texts in sampled for t in texts) / (
            len(problems) * samples)
        formats[fmt] = {"system_prompt": answer_format.system, "pass@1_temperature_1.0": round(pass1, 4),
                        "greedy_accuracy": round(greedy_acc, 4), "answer_rate_temperature_1.0": round(answer_rate, 4),
                        "example_prompt": prompts[0], "example_completion": sampled[0][0]}
        print(f"held-out {fmt}: pass@1 {pass1:.4f}, greedy {greedy_acc:.4f}, answered {answer_rate:.4f}", flush=True)
    question_rate, questions = challenger_format_rate(model, tokenizer, 64, seed)
    return {"pass@1_temperature_1.0": {fmt: formats[fmt]["pass@1_temperature_1.0"] for fmt in formats},
            "formats": formats, "problems": len(problems), "samples_per_problem": samples,
            "challenger_format_rate_temperature_1.0": round(question_rate, 4),
            "example_challenger_completion": questions[0]}


def validation_pass(model, tokenizer, validation: list[dict], seed: int) -> dict[str, float]:
    return {fmt: pass_at_1(model, tokenizer, validation, fmt, samples=2, seed=seed)[0] for fmt in PAPER_FORMATS}


def train_arithmetic(model, tokenizer, train: list[dict], validation_problems: list[dict], args,
                     validate=validation_pass):
    """Stage 1: arithmetic until the validation target; returns (steps, validation pass@1 per format, seconds)."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01, betas=(0.9, 0.98))
    warmup = max(1, args.steps // 20)
    # linear warmup then cosine decay to 10% of the peak rate
    schedule = lambda s: min(1.0, (s + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * s / args.steps)))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)

    started = time.time()
    steps_done, validation_figures = 0, None
    model.train()
    for step in range(args.steps):
        batch = train[step * args.batch_size:(step + 1) * args.batch_size]
        input_ids, attention_mask, labels = encode_batch(tokenizer, batch)
        loss = model(input_ids=input_ids, attention_mask=attention_mask, labels=labels).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 25 == 0 or step == args.steps - 1:
            print(f"step {step:4d}  loss {loss.item():.4f}  {time.time() - started:.0f}s", flush=True)
        steps_done = step + 1
        if args.target and steps_done >= args.check_after and steps_done % args.check_every == 0:
            # Early stop at a target accuracy: how fast a tiny model learns carrying is sensitive to the
            # data order, so a fixed step count lands anywhere between 20% and 80%; the target does not.
            # Both papers' formats must reach it (they share the arithmetic, so they move together).
            validation_figures = validate(model, tokenizer, validation_problems, args.seed)
            print(f"  step {steps_done}: validation pass@1 "
                  + ", ".join(f"{k} {v:.3f}" for k, v in validation_figures.items()), flush=True)
            if min(validation_figures.values()) >= args.target:
                break
    return steps_done, validation_figures, time.time() - started


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=DEFAULT_POLICY_DIR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=1600)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab-size", type=int, default=768)
    parser.add_argument("--heldout", type=int, default=256)
    parser.add_argument("--eval-samples", type=int, default=4)
    parser.add_argument("--target", type=float, default=0.5,
                        help="stop once validation pass@1 at temperature 1.0 reaches this under both papers' "
                             "system prompts (0: train all steps)")
    parser.add_argument("--check-every", type=int, default=50)
    parser.add_argument("--challenger-steps", type=int, default=300, help="stage 2 steps (0: no challenger task)")
    parser.add_argument("--challenger-per-batch", type=int, default=32,
                        help="stage 2 batches: this many challenger examples and as many arithmetic examples")
    parser.add_argument("--challenger-lr", type=float, default=1e-3)
    parser.add_argument("--init", type=Path, default=None,
                        help="skip stage 1: start stage 2 from this first-stage policy folder")
    parser.add_argument("--check-after", type=int, default=800, help="first step at which the target is checked")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads; the result is reproducible for a given count (on 2 shared cores one "
                             "thread is several times faster than two: no spinning threads waiting for each other)")
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)

    heldout = synthetic_problems(args.heldout, seed=HELDOUT_SEED)
    # a separate validation set decides when to stop, so the held-out number stays an unbiased estimate
    validation = synthetic_problems(128, seed=VALIDATION_SEED, exclude={p["prompt"] for p in heldout})
    train_problems = synthetic_problems(args.steps * args.batch_size, seed=args.seed + 1,
                                        exclude={p["prompt"] for p in heldout + validation})
    train_formats = assign_formats(len(train_problems), args.seed + 1)
    if args.init is None:
        tokenizer = build_tokenizer(args.seed, args.vocab_size)
        train = as_examples(tokenizer, train_problems, train_formats)
        model = build_model(tokenizer, args)
        print(f"model: {model.num_parameters() / 1e6:.2f}M parameters, {len(train)} training problems", flush=True)
        steps_done, validation_figures, train_seconds = train_arithmetic(model, tokenizer, train, validation, args)
    else:  # stage 1 already ran: its saved weights are exactly what it would produce again
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(args.init, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(args.init, local_files_only=True)
        train = as_examples(tokenizer, train_problems, train_formats)
        first = json.loads((args.init / "evaluation.json").read_text())
        steps_done, validation_figures, train_seconds = first["train_steps"], first["validation_pass@1"], \
            first["train_seconds"]
    n_params = sum(p.numel() for p in model.parameters())
    # stage 2 continues on the arithmetic examples stage 1 did not reach
    started = time.time()
    train_challenger_task(model, tokenizer, train[steps_done * args.batch_size:], args)
    challenger_seconds = time.time() - started

    started = time.time()
    result = evaluate(model, tokenizer, heldout, args.eval_samples, seed=args.seed)
    result.update({"train_steps": steps_done, "schedule_steps": args.steps, "stop_target": args.target,
                   "validation_pass@1": None if validation_figures is None else
                   {k: round(v, 4) for k, v in validation_figures.items()},
                   "format_shares": FORMAT_SHARES, "batch_size": args.batch_size, "lr": args.lr,
                   "challenger_steps": args.challenger_steps, "challenger_per_batch": args.challenger_per_batch,
                   "challenger_lr": args.challenger_lr, "seed": args.seed, "parameters": n_params,
                   "vocab_size": len(tokenizer), "threads": args.threads, "train_seconds": round(train_seconds, 1),
                   "challenger_seconds": round(challenger_seconds, 1),
                   "evaluation_seconds": round(time.time() - started, 1), "heldout_seed": HELDOUT_SEED})
    print(json.dumps(result, indent=2), flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.padding_side = "left"
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(args.out)  # safetensors
    tokenizer.save_pretrained(args.out)  # tokenizer.json, tokenizer_config.json, chat_template.jinja
    (args.out / "evaluation.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.out == DEFAULT_POLICY_DIR:  # the demo's sample prompt set: held-out problems, math500-style rows
        rows = [{"prompt": p["prompt"], "answer": p["answer"], "id": p["id"]} for p in heldout[:64]]
        SAMPLE_PATH.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
