"""How the papers format a prompt for the policy, and how DARL's answers are read back (DESIGN section 6).

A prompt is given to the policy through the policy's own chat template, with the paper's system
prompt as the system message:

- EVOL-RL, TTRL (via SimpleRL-Zoo), R-Zero's solver: ``STEP_BY_STEP_SYSTEM_PROMPT``; the final
  answer is the last ``\\boxed{}`` (``rl.answers.extract_boxed``);
- DARL (and RLPR, whose setup it follows): ``THINK_ANSWER_SYSTEM_PROMPT``; the final answer is
  the last ``<answer>...</answer>`` (``extract_think_answer``).

A tokenizer without a chat template gets the system prompt as a plain prefix:
``system + PLAIN_SEPARATOR + prompt + PLAIN_SUFFIX``, i.e. ``"{system}\\n\\n{prompt}\\n"`` (a blank
line between the instruction and the problem, a newline where the answer starts); with no system
prompt the prompt is given bare.

How TRL 1.16 tokenizes a prompt (``GRPOTrainer._tokenize_prompts``), which decides the BOS:

- a *string* prompt (what ``format_prompt`` returns) is tokenized as
  ``processing_class(text=prompts)["input_ids"]``, i.e. with ``add_special_tokens=True``: the
  tokenizer's post-processor adds whatever it adds on its own (Llama 2/3 and Gemma tokenizers
  prepend BOS; Qwen2.5/Qwen3 add nothing);
- a *conversational* prompt (a list of messages) is rendered by
  ``apply_chat_template(..., add_generation_prompt=True, tokenize=True)``, which in transformers
  5.23 tokenizes the rendered text with ``add_special_tokens=False``: the BOS is the one the
  template writes (``{{ bos_token }}``), if any.

So a chat template that writes ``{{ bos_token }}`` and a tokenizer that also prepends BOS would
give a string prompt two BOS tokens. ``format_prompt`` renders with ``tokenize=False`` and, when
the tokenizer prepends BOS by itself, drops the template's leading BOS text, so that
``encode_prompt(tokenizer, format_prompt(...))`` (exactly TRL's call) holds one BOS, as the
conversational path would. The default policy (rl/assets/default_policy) adds no special tokens
itself and its chat template writes the BOS, so its formatted prompts carry exactly one BOS too.
tests/rl/test_prompts.py checks both cases against TRL's own ``_tokenize_prompts``.

Pure Python: no Django, no torch; the tokenizer is whatever object the caller passes.
"""

from __future__ import annotations

from typing import Any, Iterable

from rl.answers import extract_boxed

# EVOL-RL App. C.3 (SimpleRL-Zoo's system prompt) and R-Zero App. B.2 (solver system message), verbatim
STEP_BY_STEP_SYSTEM_PROMPT = "Please reason step by step, and put your final answer within \\boxed{}."

# DARL Table 6, "Prompt used for training" (RLPR's / DeepSeek-R1-Zero's template), verbatim
THINK_ANSWER_SYSTEM_PROMPT = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. "
    "The assistant first thinks about the reasoning process in the mind and then provides the user with "
    "the answer. The reasoning process and answer are enclosed within <think> </think> and <answer> "
    "</answer> tags, respectively, i.e., <think> reasoning process here </think> <answer> answer here "
    "</answer>.")

PLAIN_SEPARATOR = "\n\n"  # between the system prompt and the prompt, for a tokenizer without a chat template
PLAIN_SUFFIX = "\n"  # after the prompt when a system prompt precedes it: the answer starts on a new line


def _chat_template(tokenizer) -> str | None:
    return getattr(tokenizer, "chat_template", None) or None


def adds_bos_itself(tokenizer) -> bool:
    """Whether ``tokenizer(text)`` (special tokens on, as TRL calls it) prepends BOS on its own."""
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if bos_id is None:
        return False
    with_special = list(tokenizer("a", add_special_tokens=True)["input_ids"])
    without = list(tokenizer("a", add_special_tokens=False)["input_ids"])
    return with_special[:1] == [bos_id] and without[:1] != [bos_id]


def format_messages(tokenizer, messages: Iterable[dict[str, Any]], system: str | None = None) -> str:
    """The text the policy is given for a chat-style prompt (``[{"role", "content"}, ...]``).

    A system message already in ``messages`` is kept (an uploaded chat-style prompt keeps its own);
    otherwise ``system``, when given, is put first. With a chat template the conversation is rendered
    with ``add_generation_prompt=True`` (the assistant turn is open); without one the system
    prompt(s) and the other messages' contents are joined as a plain prefix (see the module doc).
    """
    messages = [dict(m) for m in messages]
    if system and not any(m.get("role") == "system" for m in messages):
        messages.insert(0, {"role": "system", "content": system})
    if _chat_template(tokenizer) is None:
        systems = [str(m["content"]) for m in messages if m.get("role") == "system"]
        rest = [str(m["content"]) for m in messages if m.get("role") != "system"]
        body = PLAIN_SEPARATOR.join(rest)
        if not systems:
            return body
        return PLAIN_SEPARATOR.join(systems + [body]) + PLAIN_SUFFIX
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    bos = getattr(tokenizer, "bos_token", None)
    if bos and text.startswith(bos) and adds_bos_itself(tokenizer):
        text = text[len(bos):]  # TRL's tokenizer call prepends it again: keep exactly one
    return text


def format_prompt(tokenizer, prompt: str, system: str | None) -> str:
    """The text the policy is given for ``prompt`` under the paper's ``system`` prompt (None or "": none).

    With ``tokenizer.chat_template``: ``apply_chat_template([system?, user], tokenize=False,
    add_generation_prompt=True)``, less a leading BOS the tokenizer would add again. Without one:
    ``f"{system}\\n\\n{prompt}\\n"``, or ``prompt`` itself when there is no system prompt.
    """
    return format_messages(tokenizer, [{"role": "user", "content": prompt}], system)


def encode_prompt(tokenizer, text: str) -> list[int]:
    """The prompt ids TRL's GRPOTrainer generates from for a string prompt (special tokens on)."""
    return list(tokenizer(text)["input_ids"])


def extract_think_answer(text: str | None) -> str | None:
    """The final answer of a ``<think>...</think><answer>...</answer>`` response; None when absent.

    The content of the last complete ``<answer>...</answer>`` (the last ``</answer>`` and the
    last ``<answer>`` before it), stripped. A ``\\boxed{}`` inside it is unwrapped (the last one,
    nesting respected, as ``rl.answers.extract_boxed``); an answer whose box is never closed is
    kept as written. An empty answer, an unclosed ``<answer>`` or no tags at all give None. The
    ``<think>`` block is not required: DARL rewards the answer, the format is the prompt's business.
    """
    if not text:
        return None
    end = text.rfind("</answer>")
    if end < 0:
        return None
    start = text.rfind("<answer>", 0, end)
    if start < 0:
        return None
    answer = text[start + len("<answer>"):end].strip()
    boxed = extract_boxed(answer)
    if boxed is not None:
        answer = boxed
    return answer or None
