"""What some rewards need from the policy beyond the sampled text: one extra forward pass.

- `token_statistics`: per generated token, the probabilities of the two most likely
  tokens, the entropy of the predictive distribution and the log-probability of the
  token that was sampled (COMPASS, EM-RL-Token, EM-RL-Sequence), and the self-certainty
  KL(U ‖ p) of the predictive distribution (Intuitor);
- `answer_probabilities_from_ids`: the mean token probability of an answer given the prompt and a
  reasoning prefix (RLPR / DARL Eq. (5)), many (prefix, answer) pairs per forward pass; the prefix is
  the exact generated ids (`completion_prefix_ids`), BOS and all. `span_probabilities` is the same over
  spans of whole sequences, for RLPR's r′ as its release tokenises it (`reference_after_prompt`).

Both run without gradients in chunks bounded by a token budget, so a group of long
rollouts from a large-vocabulary model never materialises all its logits at once.
The distribution is the sampler's: logits divided by the sampling temperature. Self-certainty is the
exception: Intuitor scores the policy's distribution at temperature 1 (the raw logits; see
rl/methods/intuitor.py for where the released code does this), whatever the sampling temperature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

DEFAULT_TOKEN_BUDGET = 4096  # tokens per forward pass; bounds logits memory at budget × vocabulary
# Intuitor computes self-certainty on the raw logits although it samples at 0.9 (open-r1-intuitor
# intuitor_trainer.py, _get_per_token_self_certainty; verl-intuitor divides by its rollout temperature, 1.0).
SELF_CERTAINTY_TEMPERATURE = 1.0


@dataclass
class TokenStatistics:
    """One rollout's per-token statistics, one entry per generated token."""

    top1: list[float]
    top2: list[float]
    entropy: list[float]
    logprob: list[float]  # log-probability of the sampled token
    # KL(U ‖ p) at SELF_CERTAINTY_TEMPERATURE, |V| = the output layer's width (padding rows included)
    self_certainty: list[float] = field(default_factory=list)


def _chunks(lengths: Sequence[int], budget: int) -> list[list[int]]:
    """Row indices grouped so that rows × longest row stays within the token budget (at least one row)."""
    chunks, current, longest = [], [], 0
    for i, length in enumerate(lengths):
        new_longest = max(longest, length)
        if current and new_longest * (len(current) + 1) > budget:
            chunks.append(current)
            current, new_longest = [], length
        current.append(i)
        longest = new_longest
    if current:
        chunks.append(current)
    return chunks


def _forward(model: Any, sequences: list[list[int]], pad_id: int) -> torch.Tensor:
    """Float32 logits of right-padded sequences, (rows, longest, vocabulary)."""
    device = next(model.parameters()).device
    longest = max(len(s) for s in sequences)
    input_ids = torch.full((len(sequences), longest), pad_id, dtype=torch.long, device=device)
    attention = torch.zeros_like(input_ids)
    for row, sequence in enumerate(sequences):
        input_ids[row, : len(sequence)] = torch.tensor(sequence, dtype=torch.long)
        attention[row, : len(sequence)] = 1
    return model(input_ids=input_ids, attention_mask=attention).logits.float()


@torch.no_grad()
def token_statistics(model: Any, prompt_ids: Sequence[Sequence[int]], completion_ids: Sequence[Sequence[int]],
                     temperature: float = 1.0, pad_id: int = 0,
                     token_budget: int = DEFAULT_TOKEN_BUDGET) -> list[TokenStatistics]:
    """Per-token top-1/top-2 probabilities, entropies and sampled-token log-probabilities of each completion
    (at ``temperature``), and per-token self-certainty (at SELF_CERTAINTY_TEMPERATURE, from the same logits)."""
    sequences = [list(p) + list(c) for p, c in zip(prompt_ids, completion_ids)]
    results: list[TokenStatistics | None] = [None] * len(sequences)
    for rows in _chunks([len(s) for s in sequences], token_budget):
        logits = _forward(model, [sequences[i] for i in rows], pad_id)
        for k, i in enumerate(rows):
            start, n = len(prompt_ids[i]), len(completion_ids[i])
            if n == 0:
                results[i] = TokenStatistics([], [], [], [], [])
                continue
            # logits at position t predict token t + 1
            rows_logits = logits[k, start - 1 : start - 1 + n]
            logp = torch.log_softmax(rows_logits / temperature, dim=-1)
            p = logp.exp()
            top = p.topk(min(2, p.size(-1)), dim=-1).values
            second = top[:, 1] if top.size(1) > 1 else torch.zeros_like(top[:, 0])
            entropy = -(p * logp).sum(-1)  # H_t = −Σ_v p_v log p_v
            sampled = torch.tensor(completion_ids[i], dtype=torch.long, device=logp.device)
            results[i] = TokenStatistics(top1=top[:, 0].tolist(), top2=second.tolist(), entropy=entropy.tolist(),
                                         logprob=logp.gather(1, sampled[:, None]).squeeze(1).tolist(),
                                         self_certainty=_self_certainty(rows_logits, logp, temperature).tolist())
    return results  # type: ignore[return-value]


def _self_certainty(logits: torch.Tensor, logp: torch.Tensor, temperature: float) -> torch.Tensor:
    """Per-row KL(U ‖ softmax(logits / SELF_CERTAINTY_TEMPERATURE)); ``logp`` is log_softmax(logits / temperature).

    # Intuitor Eq. (4): KL(U ‖ p) = −(1/|V|) Σ_j log(|V| · p_j) = logsumexp(z) − mean_j(z) − log|V|
    """
    vocab = logits.size(-1)
    if temperature == SELF_CERTAINTY_TEMPERATURE:
        value = -logp.mean(-1) - math.log(vocab)  # logsumexp(z) − mean(z) = −mean(log p): no second pass
    else:
        z = logits / SELF_CERTAINTY_TEMPERATURE
        value = torch.logsumexp(z, dim=-1) - z.mean(-1) - math.log(vocab)
    return value.clamp_min(0.0)  # KL ≥ 0; clears float round-off at the uniform distribution


def completion_prefix_ids(tokenizer: Any, prompt_ids: Sequence[int], completion_ids: Sequence[int],
                          text_prefix: str) -> list[int]:
    """x ⊕ z as token ids: the exact prompt ids, then the completion's own ids as far as they spell `text_prefix`.

    `text_prefix` is a prefix of the decoded completion (or the decoded completion plus a suffix, e.g. an
    answer opener for a rollout without one). The longest run of completion ids whose decoding (special
    tokens skipped, as the rollout text was decoded) is a prefix of it is kept as generated, trailing special
    tokens (EOS) dropped; only the remainder of `text_prefix` (a token straddling the boundary, or the added
    suffix) is tokenised, without special tokens. Nothing is re-tokenised from decoded text that the policy
    generated as ids, so a BOS at the start of the prompt or any id-level detail of the rollout survives.
    """
    ids = list(completion_ids)

    def spelled(k: int) -> str:
        return tokenizer.decode(ids[:k], skip_special_tokens=True)

    def fits(k: int) -> bool:
        return text_prefix.startswith(spelled(k))

    low, high = 0, len(ids)  # fits(0) holds; find the largest k that fits (binary search, then step on)
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    while low < len(ids) and fits(low + 1):
        low += 1
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    while low > 0 and ids[low - 1] in special:
        low -= 1
    remainder = text_prefix[len(spelled(low)):]
    tail = list(tokenizer(remainder, add_special_tokens=False)["input_ids"]) if remainder else []
    return list(prompt_ids) + ids[:low] + tail


def answer_probabilities_from_ids(model: Any, tokenizer: Any, prefix_ids: Sequence[Sequence[int]],
                                  answers: Sequence[str], token_budget: int = DEFAULT_TOKEN_BUDGET) -> list[float]:
    """r(y, z, x) = (1/|y|) Σ_i p_θ(y_i | x, z, y_<i) for each (prefix ids = x ⊕ z, answer y) pair.  # DARL Eq. (5)

    The prefix is scored exactly as given (ids); the answer is tokenised without special tokens. 0 for an
    empty answer.
    """
    prefixes = [list(p) for p in prefix_ids]
    answer_ids = [list(tokenizer(a, add_special_tokens=False)["input_ids"]) for a in answers]
    return span_probabilities(model, tokenizer, [p + a for p, a in zip(prefixes, answer_ids)],
                              [(len(p), len(p) + len(a)) for p, a in zip(prefixes, answer_ids)], token_budget)


@torch.no_grad()
def span_probabilities(model: Any, tokenizer: Any, sequences: Sequence[Sequence[int]],
                       spans: Sequence[tuple[int, int]], token_budget: int = DEFAULT_TOKEN_BUDGET) -> list[float]:
    """The mean probability of the tokens sequence[start:end] given those before them, per (sequence, span);
    0 for an empty span. Only what precedes a span's end is run through the model."""
    sequences = [list(s[:end]) for s, (_, end) in zip(sequences, spans)]
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    results = [0.0] * len(sequences)
    todo = [i for i, (start, end) in enumerate(spans) if end > start]
    for chunk in _chunks([len(sequences[i]) for i in todo], token_budget):
        rows = [todo[j] for j in chunk]
        logits = _forward(model, [sequences[i] for i in rows], pad_id)
        for k, i in enumerate(rows):
            start, end = spans[i]
            if start == 0:
                raise ValueError("the prompt and reasoning are empty: the first answer token has no context")
            probabilities = torch.softmax(logits[k, start - 1 : end - 1], dim=-1)
            targets = torch.tensor(sequences[i][start:end], dtype=torch.long, device=probabilities.device)
            results[i] = float(probabilities.gather(1, targets[:, None]).mean())
    return results


def strip_ends(text: str, token: str | None) -> str:
    """The text without `token` repeated at either end (RLPR's ray_trainer.py::replace_left_and_right_str)."""
    while token and text.startswith(token):
        text = text[len(token):]
    while token and text.endswith(token):
        text = text[: -len(token)]
    return text


def reference_after_prompt(tokenizer: Any, prompt_ids: Sequence[int], reference: str) -> tuple[list[int], tuple[int, int]]:
    """RLPR's release text for r′ as ids, and where y* lies in them (ray_trainer.py::get_scoreA).

    The decoded prompt (special tokens kept, padding stripped) + ' ' + y* + ' ' + EOS, tokenised whole without
    adding special tokens; y*'s tokens are those whose characters overlap its last occurrence before the EOS
    (locate_substring_tokens), so a BPE token that joins the space to y*'s first characters counts as y*'s.
    """
    eos = tokenizer.eos_token or ""
    text = strip_ends(tokenizer.decode(list(prompt_ids), skip_special_tokens=False) + " " + reference + " " + eos,
                      tokenizer.pad_token)
    if not text.endswith(eos):  # a tokenizer whose EOS is its padding: stripped above, put back once
        text += eos
    encoding = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
    if "offset_mapping" not in encoding:  # a slow (Python) tokenizer leaves them out without a word
        raise ValueError(f"RLPR's frozen r′ locates y* by character offsets, which {type(tokenizer).__name__} does "
                         "not give: use a fast tokenizer or set r_prime to \"per_step\"")
    begin = text[: len(text) - len(eos)].rfind(reference)
    end = begin + len(reference)
    overlapping = [i for i, (a, b) in enumerate(encoding["offset_mapping"]) if a < end and b > begin]
    if not reference or not overlapping:
        raise ValueError(f"the reference {reference!r} has no tokens in the text RLPR scores for r′")
    return list(encoding["input_ids"]), (overlapping[0], overlapping[-1] + 1)
