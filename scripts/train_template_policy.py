"""Train the template policy shipped in rl/assets/template_policy/ (issue 22's CPU mechanism experiment).

A second tiny Llama (the default policy's architecture, BPE and chat template, from
scripts/train_default_policy.py) learns harder problems, three changes to a starting number
(scripts/experiments/templates.py), under the step-by-step system prompt only. Each training
completion uses one of three distinct solution templates drawn uniformly ("chain", "running",
"grouped"), so the trained policy samples all three; `template_of` tells them apart.

It stops (early stopping on a validation set, as the default policy does) once its pass@1 at
temperature 1.0 reaches --target (0.3): room for label-free RL to gain, and a policy whose
diversity of templates, entropy and pass@k TTRL, EVOL-RL and EVOL-RL without novelty can
be compared on. evaluation.json records the held-out pass@1 and pass@16 (unbiased, from
--eval-samples samples per problem), each template's share of the samples, the answer rate,
the steps, the seed and the command.

    HF_HUB_OFFLINE=1 .venv/bin/python scripts/train_template_policy.py

Deterministic in --seed (and --threads) on CPU.
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from collections import Counter
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from rl.arithmetic import ANSWER_FORMATS  # noqa: E402
from rl.prompts import format_prompt  # noqa: E402
from scripts.experiments.templates import (TEMPLATE_HELDOUT_SEED, TEMPLATE_POLICY_DIR,  # noqa: E402
                                           TEMPLATE_VALIDATION_SEED, TEMPLATES, assign_templates,
                                           heldout_template_problems, pass_at_k, solve, template_of,
                                           template_problems)
from scripts.train_default_policy import (build_model, build_tokenizer, pass_at_1, sample_answers,  # noqa: E402
                                          train_arithmetic)

FORMAT = "step_by_step"  # the only system prompt the template policy is trained and measured under
MAX_NEW_TOKENS = 64  # pass_at_1's budget; the longest template ("running") is about 45 tokens


def examples(tokenizer, problems: list[dict], templates: list[str]) -> list[dict]:
    """Training examples `{prompt, completion}`: the step-by-step prompt, the problem solved with its template."""
    system = ANSWER_FORMATS[FORMAT].system
    return [{"prompt": format_prompt(tokenizer, p["prompt"], system), "completion": solve(p["start"], p["changes"], t)}
            for p, t in zip(problems, templates)]


def tokenizer_corpus(seed: int) -> list[str]:
    """The BPE's texts: system prompt, problem and completion of training-like examples, message by message."""
    problems = template_problems(5000, seed=seed + 2)
    corpus = []
    for problem, template in zip(problems, assign_templates(len(problems), seed + 2)):
        corpus += [ANSWER_FORMATS[FORMAT].system + "\n", problem["prompt"] + "\n",
                   solve(problem["start"], problem["changes"], template)]
    return corpus


def validate(model, tokenizer, validation: list[dict], seed: int) -> dict[str, float]:
    return {FORMAT: pass_at_1(model, tokenizer, validation, FORMAT, samples=2, seed=seed)[0]}


def evaluate(model, tokenizer, problems: list[dict], samples: int, seed: int) -> dict:
    """Held-out pass@1 and pass@16 at temperature 1.0, template shares, answer rate, greedy accuracy."""
    extract = ANSWER_FORMATS[FORMAT].extract
    prompts = [format_prompt(tokenizer, p["prompt"], ANSWER_FORMATS[FORMAT].system) for p in problems]
    model.eval()
    torch.manual_seed(seed)
    sampled = sample_answers(model, tokenizer, prompts, samples, temperature=1.0, max_new_tokens=MAX_NEW_TOKENS,
                             batch_size=256)
    greedy = sample_answers(model, tokenizer, prompts, 1, temperature=None, max_new_tokens=MAX_NEW_TOKENS,
                            batch_size=256)
    model.train()
    correct = [[extract(t) == p["answer"] for t in texts] for p, texts in zip(problems, sampled)]
    n_total = len(problems) * samples
    pass1 = sum(sum(c) / samples for c in correct) / len(problems)
    pass16 = sum(pass_at_k(samples, sum(c), 16) for c in correct) / len(problems) if samples >= 16 else None
    templates = [[template_of(t) for t in texts] for texts in sampled]
    counts = Counter(t for row in templates for t in row)
    right = Counter(t for row, c in zip(templates, correct) for t, ok in zip(row, c) if ok)
    per_problem = [len({t for t in row if t}) for row in templates]
    greedy_templates = Counter(template_of(t[0]) for t in greedy)
    figures = {
        "system_prompt": ANSWER_FORMATS[FORMAT].system,
        "pass@1_temperature_1.0": round(pass1, 4),
        "pass@16_temperature_1.0": None if pass16 is None else round(pass16, 4),
        "majority_vote_accuracy": round(sum(
            Counter(extract(t) for t in texts).most_common(1)[0][0] == p["answer"]
            for p, texts in zip(problems, sampled)) / len(problems), 4),
        "greedy_accuracy": round(sum(extract(t[0]) == p["answer"] for p, t in zip(problems, greedy)) / len(problems), 4),
        "answer_rate_temperature_1.0": round(sum(extract(t) is not None for row in sampled for t in row) / n_total, 4),
        "template_shares": {name: round(counts[name] / n_total, 4) for name in TEMPLATES},
        "unclassified_share": round(counts[None] / n_total, 4),
        "accuracy_per_template": {name: round(right[name] / counts[name], 4) if counts[name] else None
                                  for name in TEMPLATES},
        "mean_templates_per_problem": round(sum(per_problem) / len(per_problem), 3),
        "greedy_template_shares": {str(k): round(v / len(problems), 4) for k, v in greedy_templates.items()},
        "problems": len(problems), "samples_per_problem": samples,
        "example_prompt": prompts[0],
        "example_completions": {name: next((t for row in sampled for t in row if template_of(t) == name), None)
                                for name in TEMPLATES},
    }
    print(f"held-out: pass@1 {pass1:.4f}, pass@16 {pass16}, answered {figures['answer_rate_temperature_1.0']}, "
          f"templates {figures['template_shares']}", flush=True)
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=TEMPLATE_POLICY_DIR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--steps", type=int, default=2000, help="the learning-rate schedule's length (and the cap)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--vocab-size", type=int, default=768)
    parser.add_argument("--heldout", type=int, default=256)
    parser.add_argument("--eval-samples", type=int, default=32, help="samples per held-out problem (pass@16 needs 16+)")
    parser.add_argument("--target", type=float, default=0.3,
                        help="stop once validation pass@1 at temperature 1.0 reaches this (0: train all steps)")
    parser.add_argument("--check-after", type=int, default=200, help="first step at which the target is checked")
    parser.add_argument("--check-every", type=int, default=25)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True)

    heldout = heldout_template_problems(args.heldout)
    validation = template_problems(128, seed=TEMPLATE_VALIDATION_SEED, exclude={p["prompt"] for p in heldout})
    train_problems = template_problems(args.steps * args.batch_size, seed=args.seed + 1,
                                       exclude={p["prompt"] for p in heldout + validation})
    train_templates = assign_templates(len(train_problems), args.seed + 1)
    tokenizer = build_tokenizer(args.seed, args.vocab_size, corpus=tokenizer_corpus(args.seed))
    model = build_model(tokenizer, args)
    train = examples(tokenizer, train_problems, train_templates)
    longest = max(len(tokenizer(e["completion"])["input_ids"]) for e in train[:2000])
    assert longest < MAX_NEW_TOKENS, longest
    print(f"model: {model.num_parameters() / 1e6:.2f}M parameters, {len(train)} training problems, "
          f"longest completion {longest} tokens", flush=True)
    steps_done, validation_figures, train_seconds = train_arithmetic(model, tokenizer, train, validation, args,
                                                                     validate=validate)

    started = time.time()
    result = evaluate(model, tokenizer, heldout, args.eval_samples, seed=args.seed)
    command = "HF_HUB_OFFLINE=1 .venv/bin/python scripts/train_template_policy.py" + "".join(
        " " + shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv))
    result.update({
        "train_steps": steps_done, "schedule_steps": args.steps, "stop_target": args.target,
        "validation_pass@1": None if validation_figures is None else round(validation_figures[FORMAT], 4),
        "training_template_shares": {name: round(train_templates[:steps_done * args.batch_size].count(name)
                                                 / (steps_done * args.batch_size), 4) for name in TEMPLATES},
        "batch_size": args.batch_size, "lr": args.lr, "seed": args.seed,
        "parameters": sum(p.numel() for p in model.parameters()), "vocab_size": len(tokenizer),
        "threads": args.threads, "train_seconds": round(train_seconds, 1),
        "evaluation_seconds": round(time.time() - started, 1), "heldout_seed": TEMPLATE_HELDOUT_SEED,
        "validation_seed": TEMPLATE_VALIDATION_SEED,
        "command": command,
    })
    print(json.dumps(result, indent=2), flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    tokenizer.padding_side = "left"
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.save_pretrained(args.out)
    tokenizer.save_pretrained(args.out)
    (args.out / "evaluation.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
