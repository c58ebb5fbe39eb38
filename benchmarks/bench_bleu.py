"""Benchmark: rl.similarity.bleu_distance_matrix against NLTK called pair by pair.

Run from the repository root: ``.venv/bin/python benchmarks/bench_bleu.py``.
Prints the ratio NLTK time / ours and exits non-zero when it is below 100 or when
any distance differs from NLTK's by more than 1e-12.
"""

from __future__ import annotations

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # noqa: E402
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu  # noqa: E402

from rl.similarity import bleu_distance_matrix  # noqa: E402

REQUIRED_RATIO = 100.0
N_QUESTIONS = 128  # one R-Zero challenger batch
REPEATS = 5


def nltk_distance_matrix(texts: list[str]) -> np.ndarray:
    smoothing = SmoothingFunction().method1
    tokens = [text.split() for text in texts]
    size = len(texts)
    distances = np.zeros((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            bleu = sentence_bleu([tokens[j]], tokens[i], smoothing_function=smoothing)
            distances[i, j] = distances[j, i] = 1.0 - bleu
    return distances


def synthetic_questions(count: int, seed: int = 0) -> list[str]:
    """Math-question-like texts: a shared template vocabulary, so n-grams overlap as in a real batch."""
    rng = random.Random(seed)
    stems = ["Let", "Find", "Compute", "Suppose", "Determine", "How many", "What is"]
    words = ("the of a an and is be in positive integer real number sum product such that "
             "x y z n k m triangle circle area radius prime divisor sequence function value "
             "maximum minimum remainder when divided by 7 12 2024 probability").split()
    texts = []
    for _ in range(count):
        body = [rng.choice(words) for _ in range(rng.randint(15, 90))]
        texts.append(rng.choice(stems) + " " + " ".join(body) + " ?")
    return texts


def best_time(function, argument, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function(argument)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    texts = synthetic_questions(N_QUESTIONS)
    ours = bleu_distance_matrix(texts)
    reference = nltk_distance_matrix(texts)
    max_error = float(np.abs(ours - reference).max())

    ours_s = best_time(bleu_distance_matrix, texts, REPEATS)
    nltk_s = best_time(nltk_distance_matrix, texts, 1)
    ratio = nltk_s / ours_s
    pairs = N_QUESTIONS * (N_QUESTIONS - 1) // 2
    print(f"bleu_distance_matrix: {N_QUESTIONS} texts, {pairs} pairs")
    print(f"  nltk pair by pair: {nltk_s * 1e3:9.1f} ms")
    print(f"  rl.similarity:     {ours_s * 1e3:9.1f} ms")
    print(f"  max |difference|:  {max_error:.3g}")
    print(f"  ratio nltk/ours:   {ratio:.1f}x (required >= {REQUIRED_RATIO:.0f}x)")
    if max_error > 1e-12:
        print("FAIL: distances differ from NLTK", file=sys.stderr)
        return 1
    if ratio < REQUIRED_RATIO:
        print("FAIL: speed-up below the requirement", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
