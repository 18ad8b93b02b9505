"""all-MiniLM-L6-v2 with int8 matrix products, run by onnxruntime: the same weights as `minilm.py`, ~2x faster.

The graph is built in memory from `minilm.Weights` at first use (no model file is written or shipped):

- the 24 dense products (QKV, attention output, FFN up and down) run in int8: weights quantized per output column
  (symmetric, 7 bits: |w| <= 63, below), activations per token (asymmetric uint8: each row gets its own scale and
  zero point, so a token's result never depends on the other texts in its batch);
- a few input channels of each product hold values far larger than the rest (for every token: the residual stream's
  outlier dimensions, largest in [CLS] and [SEP]); quantized with the others they would take most of a token's 256
  levels. They are found once, when the graph is built, from one short calibration text run through the float model
  (`outlier_channels`), left out of the int8 product and multiplied in float32 (LLM.int8()'s decomposition);
- embeddings, attention scores and softmax, layer norms, erf GELU and mean pooling stay float32.

onnxruntime's own dynamic quantization scales a whole batch at once: cosine 0.91-0.98 against the float model on short
texts, which is why the quantization is done here (numbers in BENCHMARKS.md). The vectors differ from float32 beyond
float noise, so `embeddings.LocalMiniLM` gives this path its own embedder name.

onnxruntime's MatMulIntegerToFloat takes a single activation zero point; a zero point per token is applied after the
product as a rank-1 correction: (q - z) @ Wq = q @ Wq - z * colsum(Wq). It shares one Gemm with the float product of
the outlier channels.

Why 7-bit weights: x86 CPUs with AVX2 but no VNNI multiply uint8 by int8 with `vpmaddubsw`, which adds each two
adjacent products into a saturating int16 before widening. With 8-bit weights two products of 255 x 127 overflow it
(64,770 > 32,767) and the vectors then depend on the CPU (cosine 0.87 to float32 on such a machine); VNNI and AMX
kernels widen first and never saturate. With |w| <= 63 no pair sum can pass 2 x 255 x 63 = 32,130 on any kernel, in
any pairing, so every CPU computes the same integer product (`saturating_pair_product` simulates the AVX2
arithmetic; the tests run it on real activations). This is onnxruntime's `reduce_range`; the float outlier channels
win back the bit it costs (cosine to float32 on one-token texts 0.984 without them, 0.994 with them).
"""
from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np

from code_assistant.index import minilm, onnx_wire
from code_assistant.index.minilm import Weights

if TYPE_CHECKING:
    import onnxruntime

logger = logging.getLogger(__name__)

_MS = "com.microsoft"  # onnxruntime's contrib ops: MultiHeadAttention, SkipLayerNormalization, BiasGelu, ...
WEIGHT_LEVELS = 63  # |w_q| <= 63: 2 x 255 x 63 < 2**15, so no int16 pair sum of uint8 x int8 products can saturate
ACTIVATION_LEVELS = 255  # uint8 activations, 0..255
INT16_MAX = 2**15 - 1
OUTLIER_CHANNELS = 4  # input channels per product kept in float: 2 already beat the old 8-bit weights on one-token
#                       texts, 4 do better, more add little (BENCHMARKS.md, "int8 on every CPU")
CALIBRATION_TEXT = ("def parse(path: str) -> dict:\n    \"\"\"Read the file and return its settings.\"\"\"\n"
                    "    return json.loads(open(path).read())  # TODO: errors?\n")
"""What the outlier channels are found on: the outliers are properties of the model, the same for any text (one
line of code or a lone '?' picks nearly the same channels), so one short text is enough."""


class _Graph:
    """Collects nodes and initializers; every node is named after its (first) output, so names are unique."""

    def __init__(self) -> None:
        self.nodes: list[onnx_wire.Message] = []
        self.initializers: list[onnx_wire.Message] = []
        self._count = 0

    def const(self, name: str, array: np.ndarray | float | list[int], dtype: type = np.float32) -> str:
        self.initializers.append(onnx_wire.tensor(name, np.asarray(array, dtype=dtype)))
        return name

    def op(self, op_type: str, inputs: list[str], domain: str = "", outputs: int = 1,
           **attributes: float | list[int]) -> str:
        """Add a node; returns its (first) output's name. Multi-output nodes name theirs `<name>:<i>`."""
        self._count += 1
        name = f"{op_type}_{self._count}"
        names = [name] if outputs == 1 else [f"{name}:{i}" for i in range(outputs)]
        self.nodes.append(onnx_wire.node(op_type, inputs, names, name, domain, **attributes))
        return name


def quantize_weight(w: np.ndarray, levels: int = WEIGHT_LEVELS) -> tuple[np.ndarray, np.ndarray]:
    """Per output column, symmetric: w (K, N) float32 -> (w_q (K, N) int8 in [-levels, levels], scale (N,))."""
    w_scale = np.maximum(np.abs(w).max(axis=0), np.float32(1e-12)) / np.float32(levels)
    return np.clip(np.round(w / w_scale), -levels, levels).astype(np.int8), w_scale.astype(np.float32)


def int8_weight(w: np.ndarray, outliers: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """What a dense product multiplies in int8: w (K, N) without the outlier channels' rows (they are multiplied in
    float, so they neither take part nor set the columns' scales), quantized to 7 bits -> (w_q, scale)."""
    keep = np.ones(w.shape[0], dtype=np.float32)
    keep[outliers] = 0.0
    return quantize_weight(w * keep[:, None])


def outlier_channels(w: Weights, ids: list[int], count: int = OUTLIER_CHANNELS) -> dict[str, np.ndarray]:
    """Per dense product (`dense_weights`' names), the `count` input channels with the largest |value| over the
    calibration tokens `ids` (with [CLS] and [SEP]) in the float model, sorted."""
    inputs: dict[str, np.ndarray] = {}
    batch = np.asarray([ids], dtype=np.int64)
    minilm.encode(w, batch, np.ones_like(batch), dense_inputs=inputs)
    return {name: np.sort(np.argsort(-np.abs(x).max(axis=0), kind="stable")[:count]) for name, x in inputs.items()}


def saturating_pair_product(x_q: np.ndarray, w_q: np.ndarray, block: int = 8) -> tuple[np.ndarray, int]:
    """x_q @ w_q as an AVX2 kernel without VNNI computes it (`vpmaddubsw` then `vpmaddwd`): the products of each two
    adjacent k, uint8 times int8, are summed into an int16 that saturates, then widened and added up in int32.
    Returns the product (int64, (tokens, N)) and how many pair sums saturated; with no saturation it equals the
    exact x_q @ w_q."""
    a = x_q.astype(np.int32)
    w = w_q.astype(np.int32)
    if a.shape[1] % 2:  # an odd K is padded with a zero column, as the kernels pad it
        a, w = np.pad(a, ((0, 0), (0, 1))), np.pad(w, ((0, 1), (0, 0)))
    even, odd = w[0::2], w[1::2]  # (K/2, N)
    out = np.zeros((a.shape[0], w.shape[1]), dtype=np.int64)
    saturated = 0
    for start in range(0, a.shape[0], block):
        rows = a[start: start + block]
        pairs = rows[:, 0::2, None] * even[None] + rows[:, 1::2, None] * odd[None]  # (rows, K/2, N)
        clipped = np.clip(pairs, -INT16_MAX - 1, INT16_MAX)
        saturated += int(np.count_nonzero(clipped != pairs))
        out[start: start + block] = clipped.sum(axis=1)
    return out, saturated


def _int8_matmul(g: _Graph, x: str, w: np.ndarray, prefix: str, outliers: np.ndarray, expose: bool) -> str:
    """x @ w for x (tokens, K) float32, w (K, N): per-token asymmetric uint8 x, per-column symmetric 7-bit w, but for
    the `outliers` channels of x, multiplied in float. `expose`: also name the quantized activations `<prefix>.x_q`,
    for the tests (they become graph outputs)."""
    keep = np.ones(w.shape[0], dtype=np.float32)
    keep[outliers] = 0.0
    w_q, w_scale = int8_weight(w, outliers)
    w_q_colsum = w_q.astype(np.float32).sum(axis=0)
    x_outliers = g.op("Gather", [x, g.const(f"{prefix}.outliers", outliers, np.int64)], axis=1)  # (tokens, count)
    x = g.op("Mul", [x, g.const(f"{prefix}.keep", keep)])
    # per token: the range [min, max] of the other channels, widened to hold 0, mapped onto 0..255
    low = g.op("Min", [g.op("ReduceMin", [x, "axis_last"], keepdims=1), "zero"])
    high = g.op("Max", [g.op("ReduceMax", [x, "axis_last"], keepdims=1), "zero"])
    scale = g.op("Max", [g.op("Mul", [g.op("Sub", [high, low]), "inv_levels"]), "tiny"])  # (tokens, 1)
    zero_point = g.op("Round", [g.op("Neg", [g.op("Div", [low, scale])])])  # (tokens, 1), 0..255 as float
    q = g.op("QuantizeLinear", [x, g.op("Reshape", [scale, "axis_last"]),
                                g.op("Reshape", [g.op("Cast", [zero_point], to=onnx_wire.UINT8), "axis_last"])],
             axis=0)
    if expose:
        g.nodes.append(onnx_wire.node("Identity", [q], [f"{prefix}.x_q"], f"{prefix}.expose"))
    product = g.op("MatMulIntegerToFloat", [q, g.const(f"{prefix}.w_q", w_q, np.int8), "one",
                                            g.const(f"{prefix}.w_scale", w_scale)], domain=_MS)
    scaled = g.op("Mul", [product, scale])
    # one Gemm: [scale * zero_point, x_outliers] @ [-colsum(w_q) * w_scale; w[outliers]] + scaled removes the zero
    # point's share and adds the outlier channels' float product
    left = g.op("Concat", [g.op("Mul", [zero_point, scale]), x_outliers], axis=1)
    right = np.concatenate([(-w_q_colsum * w_scale)[None, :], w[outliers]], axis=0).astype(np.float32)
    return g.op("Gemm", [left, g.const(f"{prefix}.correction", right), scaled])


def build_model(w: Weights, outliers: dict[str, np.ndarray], expose_activations: bool = False) -> bytes:
    """The serialized ONNX model: inputs input_ids and attention_mask (batch, seq) int64, output
    sentence_embedding (batch, hidden) float32, mean-pooled and L2-normalized like `minilm.encode`. `outliers`: the
    input channels each dense product multiplies in float (`outlier_channels`).

    `expose_activations`: also output every dense product's quantized activations, `<prefix>.x_q` (tokens, K) uint8,
    one per key of `dense_weights(w)` (`layer0.qkv`, ...), whose matrix they multiply."""
    g = _Graph()
    hidden = w.word.shape[1]
    for name, value in (("zero", 0.0), ("one", 1.0), ("inv_levels", 1 / ACTIVATION_LEVELS), ("tiny", 1e-12),
                        ("pool_tiny", 1e-9)):
        g.const(name, value)
    for name, value in (("axis_0", [0]), ("axis_1", [1]), ("axis_2", [2]), ("axis_last", [-1]),
                        ("to_2d", [-1, hidden]), ("to_3d_tail", [-1])):
        g.const(name, value, np.int64)
    g.const("word", w.word)
    g.const("position", w.position + w.token_type[0])  # token type is always 0
    batch_seq = g.op("Shape", ["input_ids"])
    seq = g.op("Shape", ["input_ids"], start=1, end=2)
    positions = g.op("Slice", ["position", "axis_0", seq, "axis_0"])
    embedded = g.op("Reshape", [g.op("Add", [g.op("Gather", ["word", "input_ids"]), positions]), "to_2d"])
    x = g.op("LayerNormalization", [embedded, g.const("ln.g", w.ln_g), g.const("ln.b", w.ln_b)], axis=-1,
             epsilon=w.eps)  # dense layers work on 2-D (tokens, hidden)
    to_3d = g.op("Concat", [batch_seq, "to_3d_tail"], axis=0)
    key_mask = g.op("Cast", ["attention_mask"], to=onnx_wire.INT32)
    for i, layer in enumerate(w.layers):
        def dense(x_in: str, name: str, i: int = i, layer: minilm.Layer = layer) -> str:
            prefix = f"layer{i}.{name}"
            return _int8_matmul(g, x_in, layer[f"{name}_w"], prefix, outliers[prefix], expose_activations)

        p = f"layer{i}"
        qkv = g.op("Reshape", [dense(x, "qkv"), to_3d])
        split = g.op("Split", [qkv], outputs=3, axis=-1, num_outputs=3)
        q, k, v = (f"{split}:{j}" for j in range(3))
        # queries are pre-scaled by 1/sqrt(head_dim) in the weights, hence scale=1
        context = g.op("MultiHeadAttention", [q, k, v, g.const(f"{p}.qkv_b", layer["qkv_b"]), key_mask],
                       domain=_MS, num_heads=w.heads, scale=1.0)
        attended = dense(g.op("Reshape", [context, "to_2d"]), "out")
        x = g.op("SkipLayerNormalization", [attended, x, g.const(f"{p}.ln1_g", layer["ln1_g"]),
                                            g.const(f"{p}.ln1_b", layer["ln1_b"]),
                                            g.const(f"{p}.out_b", layer["out_b"])], domain=_MS, epsilon=w.eps)
        up = g.op("BiasGelu", [dense(x, "up"), g.const(f"{p}.up_b", layer["up_b"])], domain=_MS)  # exact erf GELU
        down = dense(up, "down")
        x = g.op("SkipLayerNormalization", [down, x, g.const(f"{p}.ln2_g", layer["ln2_g"]),
                                            g.const(f"{p}.ln2_b", layer["ln2_b"]),
                                            g.const(f"{p}.down_b", layer["down_b"])], domain=_MS, epsilon=w.eps)
    mask = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], to=onnx_wire.FLOAT), "axis_2"])  # (batch, seq, 1)
    summed = g.op("ReduceSum", [g.op("Mul", [g.op("Reshape", [x, to_3d]), mask]), "axis_1"], keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [mask, "axis_1"], keepdims=0), "pool_tiny"])
    pooled = g.op("Div", [summed, counts])
    g.nodes.append(onnx_wire.node("LpNormalization", [pooled], ["sentence_embedding"], "normalize", axis=-1, p=2))
    exposed = [onnx_wire.value_info(f"{prefix}.x_q", onnx_wire.UINT8, ["tokens", f"{prefix}.k"])
               for prefix in (dense_weights(w) if expose_activations else {})]
    return onnx_wire.model(
        g.nodes, g.initializers,
        inputs=[onnx_wire.value_info(n, onnx_wire.INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask")],
        outputs=[onnx_wire.value_info("sentence_embedding", onnx_wire.FLOAT, ["batch", hidden]), *exposed],
        opsets={"": 18, _MS: 1}, graph_name="all-MiniLM-L6-v2-int8w7")


def dense_weights(w: Weights) -> dict[str, np.ndarray]:
    """The float matrices of the 24 dense products by the names `build_model` gives them (`layer0.qkv`, ...)."""
    return {f"layer{i}.{name}": layer[f"{name}_w"] for i, layer in enumerate(w.layers)
            for name in ("qkv", "out", "up", "down")}


SCHEME = "int8w7-o4"  # the quantization's name: any change to it (levels, outliers, calibration) changes this too


def model_file(cache: Path, weights_sha256: str, runtime_version: str) -> Path:
    """Where the graph built from these weights for this onnxruntime is kept: a new version of either, or of the
    quantization, is a new file."""
    key = hashlib.sha256("\0".join([SCHEME, str(WEIGHT_LEVELS), str(OUTLIER_CHANNELS), CALIBRATION_TEXT,
                                    weights_sha256, runtime_version]).encode()).hexdigest()[:16]
    return cache / f"all-MiniLM-L6-v2-{SCHEME}-{key}.onnx"


def untracked_onnxruntime() -> ModuleType:
    """onnxruntime, imported with its telemetry off. Its Linux wheels (1.32 here) write a device id under
    ~/.cache/Microsoft/DeveloperTools/.onnxruntime/ and start an uploader when the module loads, unless the
    environment says no: ORT_DISABLE_TELEMETRY in this release, ORT_TELEMETRY_DISABLED in later ones
    (microsoft/onnxruntime#29843: "the provider returns early ... no device-id file"). Set before the import
    (and so for what this process starts) where the user has not set them."""
    for name in ("ORT_DISABLE_TELEMETRY", "ORT_TELEMETRY_DISABLED"):
        os.environ.setdefault(name, "1")
    import onnxruntime

    return onnxruntime


class Int8MiniLM:
    """An onnxruntime session of the int8 graph (the serialized model, or its file). `threads` is onnxruntime's
    intra-op thread count (None: its default, one per core); the session never spins waiting for work, so idle
    threads leave the cores to other jobs."""

    def __init__(self, model: bytes | Path, max_seq_length: int, threads: int | None = 1) -> None:
        onnxruntime = untracked_onnxruntime()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: graph-optimizer notes are not the user's business
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session: onnxruntime.InferenceSession = onnxruntime.InferenceSession(
            str(model) if isinstance(model, Path) else model, options, providers=["CPUExecutionProvider"])
        self.max_seq_length = max_seq_length
        logger.debug("opened the int8 MiniLM onnxruntime session (%s threads)", threads or "default")

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Same contract as `minilm.encode`: (batch, seq) int ids and mask -> (batch, hidden) unit vectors."""
        feeds = {"input_ids": ids.astype(np.int64, copy=False), "attention_mask": mask.astype(np.int64, copy=False)}
        return np.asarray(self.session.run(["sentence_embedding"], feeds)[0])
