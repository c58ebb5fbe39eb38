"""What embedding whole rollouts costs (issue 22, defect 3): `embedding_pooling` "windows" (every 256-token window of
a rollout embedded, then pooled) against "end" (the last window only), on one step's worth of long rollouts.

    HF_HUB_OFFLINE=1 python3 benchmarks/bench_embedding_windows.py [--rollouts 256] [--tokens 12288] [--model DIR]

Runs on the GPU when there is one, else on the CPU (use fewer, shorter rollouts there). Prints one line per pooling:
rollouts/s, windows/s and the ratio; record the figures in benchmarks/RESULTS.md with the device.
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def rollouts(n: int, words: int) -> list[str]:
    """n distinct reasoning traces of about `words` words (MiniLM reads about one word piece per word here)."""
    return [" ".join(f"step {j} of attempt {i}: {i * j % 97} plus {j} is {i * j % 97 + j}." for j in range(words // 9))
            for i in range(n)]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=256)
    parser.add_argument("--tokens", type=int, default=12288, help="words per rollout (about as many word pieces)")
    parser.add_argument("--model", default=None, help="a sentence-transformers folder (default: the bundled MiniLM)")
    args = parser.parse_args()

    import torch

    from rl.similarity import Embedder

    device = "cuda" if torch.cuda.is_available() else "cpu"
    texts = rollouts(args.rollouts, args.tokens)
    seconds = {}
    for pooling in ("end", "windows"):
        embedder = Embedder(args.model, device=device, pooling=pooling)
        embedder.embed(texts[:4])  # warm-up
        if device == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        embedder.embed(texts)
        if device == "cuda":
            torch.cuda.synchronize()
        seconds[pooling] = time.perf_counter() - started
        windows = sum(map(len, embedder.windows(texts))) if pooling == "windows" else len(texts)
        print(f"{pooling:8s} {device}: {len(texts)} rollouts of ~{args.tokens} words in {seconds[pooling]:.2f} s: "
              f"{len(texts) / seconds[pooling]:.1f} rollouts/s, {windows / seconds[pooling]:.0f} windows/s")
    print(f"windows / end time: {seconds['windows'] / seconds['end']:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
