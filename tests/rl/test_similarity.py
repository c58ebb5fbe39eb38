import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu

from rl.similarity import Embedder, bleu_distance_matrix, cosine_similarity_matrix, reasoning_part

SMOOTHING = SmoothingFunction().method1


def nltk_distances(texts):
    size = len(texts)
    distances = np.zeros((size, size))
    for i in range(size):
        for j in range(i + 1, size):
            bleu = sentence_bleu([texts[j].split()], texts[i].split(), smoothing_function=SMOOTHING)
            distances[i, j] = distances[j, i] = 1.0 - bleu
    return distances


class TestBleuDistanceMatrix:
    def test_identical_long_texts_are_at_distance_zero(self):
        d = bleu_distance_matrix(["a b c d e", "a b c d e"])
        assert d == pytest.approx(np.zeros((2, 2)), abs=1e-15)

    def test_a_three_token_hypothesis_gets_epsilon_for_the_missing_four_gram(self):
        # p1 = p2 = p3 = 1, no 4-gram: p4 = 0.1/1, so BLEU = 0.1 ** 0.25
        d = bleu_distance_matrix(["a b c", "a b c"])
        assert d[0, 1] == pytest.approx(1 - 0.1 ** 0.25, abs=1e-15)

    def test_no_shared_word_gives_distance_one(self):
        assert bleu_distance_matrix(["a b", "c d"])[0, 1] == 1.0

    def test_the_brevity_penalty_uses_the_reference_length(self):
        # hypothesis "a b c d" (i = 0) against reference "a b c d e f g h" (j = 1): all p_n = 1, BP = exp(1 − 8/4)
        d = bleu_distance_matrix(["a b c d", "a b c d e f g h"])
        assert d[0, 1] == pytest.approx(1 - math.exp(-1.0), abs=1e-15)
        assert d[1, 0] == d[0, 1]

    def test_the_diagonal_is_zero_and_fewer_than_two_texts_are_fine(self):
        assert bleu_distance_matrix([]).shape == (0, 0)
        assert bleu_distance_matrix(["x"]).tolist() == [[0.0]]

    def test_it_equals_nltk_on_edge_cases(self):
        texts = ["", "a", "a a a a a", "a", "a b a b a b", "b a", "", "the cat sat on the mat", "the the the the"]
        assert np.abs(bleu_distance_matrix(texts) - nltk_distances(texts)).max() <= 1e-12

    @settings(max_examples=40, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(["a", "b", "c", "the", "x1"]), max_size=12).map(" ".join), max_size=8))
    def test_it_equals_nltk_on_random_texts(self, texts):
        assert np.abs(bleu_distance_matrix(texts) - nltk_distances(texts)).max(initial=0.0) <= 1e-12


def test_cosine_similarity_normalises_rows():
    s = cosine_similarity_matrix([[3.0, 0.0], [1.0, 1.0], [0.0, 0.0]])
    assert s[0, 1] == pytest.approx(1 / math.sqrt(2))
    assert s[0, 0] == pytest.approx(1.0)
    assert s[2].tolist() == [0.0, 0.0, 0.0]  # a zero vector is similar to nothing


def test_only_the_text_after_think_is_embedded():
    assert reasoning_part("<think>scratch</think> The answer is 4.") == " The answer is 4."
    assert reasoning_part("no tags") == "no tags"


@pytest.fixture(scope="module")
def embedder():
    return Embedder(max_seq_length=64)


def test_the_embedder_returns_unit_vectors(embedder):
    vectors = embedder.embed(["two plus two is four", "2 + 2 = 4", "the sky is blue"])
    assert vectors.shape == (3, embedder.dimension)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx(np.ones(3), abs=1e-5)
    s = cosine_similarity_matrix(vectors)
    assert s[0, 1] > s[0, 2]
    assert embedder.embed([]).shape == (0, embedder.dimension)


def test_long_texts_are_truncated_from_the_left(embedder):
    ending = " ".join(f"step {i} adds one" for i in range(40))  # well over 64 tokens
    first = embedder.embed(["alpha " * 100 + ending, "omega beta gamma " * 50 + ending])
    assert cosine_similarity_matrix(first)[0, 1] == pytest.approx(1.0, abs=1e-5)
