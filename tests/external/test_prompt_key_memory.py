"""A prompt reported without an id is keyed by its text's digest. The key keeps nothing of the text: a cache of
the texts themselves (up to 400,000 characters each) grew the web process by hundreds of MB for good."""
import gc
import tracemalloc

from webapp.external.rollouts import MAX_TEXT_CHARS, prompt_key


def test_keying_long_prompts_keeps_none_of_their_text():
    tracemalloc.start()
    try:
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        keys = [prompt_key(f"{i:04d}" + "x" * (MAX_TEXT_CHARS - 4)) for i in range(50)]
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(set(keys)) == 50
    assert kept < 1_000_000, f"keying 50 prompts of {MAX_TEXT_CHARS:,} characters kept {kept:,} bytes"


def test_the_same_text_always_gets_the_same_key():
    assert prompt_key("What is 2 + 2?") == prompt_key("What is " + "2 + 2?") != prompt_key("What is 2 + 3?")
    assert prompt_key("What is 2 + 2?").startswith("p-")
