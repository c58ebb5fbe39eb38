"""DARL: reference-aligned probability reward plus a bounded answer-diversity bonus.

r(y, z, x) is the mean token probability of answer y given prompt x and reasoning z
(DARL Eq. (5), RLPR's reward). r_ref = r(y*, z, x) scores the reference answer y*
under the sampled reasoning; r_gen = r(y, z, x) the answer the policy generated.
"""

from __future__ import annotations

from typing import Any, Sequence


def _token_ids(tokenizer: Any, text: str) -> list[int]:
    # No special tokens: the pieces are concatenated, and a BOS in the middle of the
    # sequence would change the probabilities. Put any BOS/chat template in the prompt.
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def answer_token_probabilities(model: Any, prefix_ids: Sequence[int], answer_ids: Sequence[int]) -> list[float]:
    """p_θ(y_i | x, z, y_<i) for each answer token, from one forward pass of a causal LM."""
    import torch

    if len(answer_ids) == 0:
        return []
    if len(prefix_ids) == 0:
        raise ValueError("the prompt and reasoning are empty: the first answer token has no context")
    device = next(model.parameters()).device
    input_ids = torch.tensor([list(prefix_ids) + list(answer_ids)], dtype=torch.long, device=device)
    with torch.no_grad():
        logits = model(input_ids=input_ids).logits[0].float()
    # logits at position t predict token t + 1
    start = len(prefix_ids)
    predicted = logits[start - 1 : start - 1 + len(answer_ids)]
    probabilities = torch.softmax(predicted, dim=-1)
    targets = input_ids[0, start : start + len(answer_ids)]
    return probabilities.gather(1, targets[:, None]).squeeze(1).tolist()


def answer_probability(model: Any, tokenizer: Any, prompt: str, reasoning: str, answer: str) -> float:
    """r(y, z, x) = (1/|y|) Σ_i p_θ(y_i | x, z, y_<i).  # DARL Eq. (5)

    0 for an empty answer (no token to score).
    """
    prefix_ids = _token_ids(tokenizer, prompt + reasoning)
    answer_ids = _token_ids(tokenizer, answer)
    probabilities = answer_token_probabilities(model, prefix_ids, answer_ids)
    return sum(probabilities) / len(probabilities) if probabilities else 0.0


def darl_reward(r_ref: float, r_gen: float, beta: float = 0.01, gamma: float = 10.0, tau: float | None = None) -> float:
    """r̄ = α·r(y*) + β·Δr·1[Δr ≤ threshold], α = 1 − β, Δr = max(r(y*) − r(y), 0).

    # DARL Eq. (3)–(4) with the static threshold τ; Eq. (6) with the dynamic threshold r(y*)/γ when tau is None
    """
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"beta must be in [0, 1], got {beta}")
    alpha = 1.0 - beta
    delta = max(r_ref - r_gen, 0.0)  # DARL Eq. (3)
    threshold = r_ref / gamma if tau is None else tau
    bonus = beta * delta if delta <= threshold else 0.0
    return alpha * r_ref + bonus
