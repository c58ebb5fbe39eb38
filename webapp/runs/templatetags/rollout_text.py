import re
from functools import lru_cache

from django import template
from django.utils.html import escape
from django.utils.safestring import mark_safe

register = template.Library()

_BOXED_START = re.compile(r"\\(?:boxed|fbox)\s*\{")


@register.filter
def highlight_boxed(text, words=()):
    """Model output, escaped, with each \\boxed{...} (balanced braces) in <mark class="boxed"> and each of a search's
    `words` (lowercase, as the search cuts its query: webapp/explorer/text_search.py, words) in <mark class="match">,
    whole words in any case.

    The spans are found in the raw text and every piece is escaped on its own, so no tag or entity is ever
    searched or split: model output is untrusted."""
    text = str(text or "")
    pattern = _words_pattern(tuple(words)) if words else None
    out, pos = [], 0
    for start, end in _boxed_spans(text):
        out.append(_marked_words(text[pos:start], pattern))
        out.append(f'<mark class="boxed">{_marked_words(text[start:end], pattern)}</mark>')
        pos = end
    out.append(_marked_words(text[pos:], pattern))
    return mark_safe("".join(out))


def _boxed_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for match in _BOXED_START.finditer(text):
        if match.start() < pos:
            continue
        depth, end = 1, match.end()
        while end < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[end], 0)
            end += 1
        if depth:
            break  # unbalanced: leave the rest as plain text
        spans.append((match.start(), end))
        pos = end
    return spans


@lru_cache(maxsize=32)  # one query for every row of a page
def _words_pattern(words: tuple):
    longest_first = sorted(set(words), key=len, reverse=True)
    # a whole word, as the search cuts them ([^\W_]+): not inside a longer one
    return re.compile(r"(?<![^\W_])(?:" + "|".join(map(re.escape, longest_first)) + r")(?![^\W_])", re.IGNORECASE)


def _marked_words(text: str, pattern) -> str:
    if pattern is None:
        return str(escape(text))
    out, pos = [], 0
    for match in pattern.finditer(text):
        out.append(str(escape(text[pos:match.start()])))
        out.append(f'<mark class="match">{escape(match.group())}</mark>')
        pos = match.end()
    out.append(str(escape(text[pos:])))
    return "".join(out)


@register.filter
def number(value):
    """A number as a reader wants it: 103 for 103.0 (not 103.000), 0.8751 to four significant
    digits, an em dash when missing; anything else (a string an extra carries) as it is."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value) if isinstance(value, int) else f"{value:.4g}"


@register.filter
def get_item(mapping, key):
    """mapping[key], or None: a method's extras, one column per key."""
    return mapping.get(key) if isinstance(mapping, dict) else None


# A prompt as a chat template wrote it, for the two markups trainers' prompts arrive in: ChatML (Qwen, verl's
# default models: <|im_start|>ROLE\nCONTENT<|im_end|>) and Llama 3's (<|start_header_id|>ROLE<|end_header_id|>
# CONTENT<|eot_id|>). The roles are found by these fixed markers; the text between them is never parsed further.
_CHAT_TURN = re.compile(r"<\|im_start\|>([^\n<]{1,40})\n(.*?)(?:<\|im_end\|>|(?=<\|im_start\|>)|\Z)"
                        r"|<\|start_header_id\|>([^<]{1,40})<\|end_header_id\|>(.*?)(?:<\|eot_id\|>|(?=<\|start_header_id\|>)|\Z)",
                        re.DOTALL)
_OUTSIDE_TURNS = re.compile(r"<\|(?:begin_of_text|end_of_text|endoftext)\|>")


@register.filter
def chat_turns(text):
    """[{role, content}] of a prompt written with chat markup, or None for plain text. A turn left empty (the
    open assistant turn a generation prompt ends with) is dropped; text outside every turn is kept as its own."""
    text = text or ""
    if "<|im_start|>" not in text and "<|start_header_id|>" not in text:
        return None
    turns, pos = [], 0
    for match in _CHAT_TURN.finditer(text):
        _outside(text[pos:match.start()], turns)
        role = (match.group(1) or match.group(3)).strip()
        content = (match.group(2) if match.group(1) is not None else match.group(4)).strip("\n")
        if content.strip():
            turns.append({"role": role, "content": content})
        pos = match.end()
    _outside(text[pos:], turns)
    return turns or None


def _outside(between: str, turns: list) -> None:
    between = _OUTSIDE_TURNS.sub("", between).strip()
    if between:
        turns.append({"role": "text", "content": between})
