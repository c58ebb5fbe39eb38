"""The policy's view of its own rollouts, for the rewards that need more than text (torch, via rl.probes)."""

from __future__ import annotations

from typing import Any, Sequence

from rl.groups import Group, reasoning_prefix
from rl.probes import (TokenStatistics, answer_probabilities_from_ids, completion_prefix_ids, reference_after_prompt,
                       span_probabilities, token_statistics)


class PolicyProbe:
    """Forward passes of the policy over a group's rollouts, scored as the exact ids that were generated."""

    def __init__(self, model: Any, tokenizer: Any, temperature: float):
        self.model, self.tokenizer, self.temperature = model, tokenizer, temperature

    def token_statistics(self, group: Group) -> list[TokenStatistics]:
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        return token_statistics(self.model, [group.prompt_ids] * len(group.completion_ids), group.completion_ids,
                                temperature=self.temperature, pad_id=pad)

    def _prompt_ids(self, group: Group) -> list[int]:
        # the exact ids the rollouts continued; a group built without them (tests, tools) tokenises the prompt
        return list(group.prompt_ids) or list(self.tokenizer(group.prompt, add_special_tokens=False)["input_ids"])

    def reasoning_prefix_ids(self, group: Group, opener: str) -> list[list[int]]:
        """x ⊕ z of each rollout as ids: the prompt ids and the generated ids up to where the final answer starts."""
        prompt_ids = self._prompt_ids(group)
        return [completion_prefix_ids(self.tokenizer, prompt_ids, ids, reasoning_prefix(text, opener))
                for ids, text in zip(group.completion_ids, group.texts)]

    def answer_prefix_ids(self, group: Group, opener: str) -> list[int]:
        """x ⊕ answer opener, without reasoning: the context of RLPR's debiasing term r′."""
        return self._prompt_ids(group) + list(self.tokenizer(opener, add_special_tokens=False)["input_ids"])

    def answer_probabilities_from_ids(self, prefix_ids: Sequence[Sequence[int]], answers: Sequence[str]) -> list[float]:
        return answer_probabilities_from_ids(self.model, self.tokenizer, prefix_ids, answers)

    def reference_probabilities_without_reasoning(self, prompt_ids: Sequence[Sequence[int]],
                                                  references: Sequence[str]) -> list[float]:
        """RLPR's r′ as its release computes it: the mean probability of y* in `prompt + ' ' + y* + EOS`
        (rl.probes.reference_after_prompt), one per (prompt ids, y*) pair."""
        located = [reference_after_prompt(self.tokenizer, ids, reference)
                   for ids, reference in zip(prompt_ids, references)]
        return span_probabilities(self.model, self.tokenizer, [ids for ids, _ in located], [span for _, span in located])
