"""all-MiniLM-L6-v2 with int8 matrix products, run by onnxruntime: the same weights as `minilm.py`, ~2x faster.

The graph is built in memory from `minilm.Weights` at first use (no model file is written or shipped):

- the 24 dense products (QKV, attention output, FFN up and down) run in int8: weights quantized per output column
  (symmetric), activations per token (asymmetric: each row gets its own scale and zero point, so a token's result
  never depends on the other texts in its batch, and [CLS]'s few huge channels cost only [CLS] its precision);
- embeddings, attention scores and softmax, layer norms, erf GELU and mean pooling stay float32.

onnxruntime's own dynamic quantization scales a whole batch at once: cosine 0.91-0.98 against the float model on short
texts, which is why the quantization is done here. Per-token asymmetric scaling keeps cosine >= 0.99 against
sentence-transformers (numbers in BENCHMARKS.md). The vectors differ from float32 beyond float noise, so
`embeddings.LocalMiniLM` gives this path its own embedder name.

onnxruntime's MatMulIntegerToFloat takes a single activation zero point; a zero point per token is applied after the
product as a rank-1 correction: (q - z) @ Wq = q @ Wq - z * colsum(Wq), one Gemm with K=1.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import numpy as np

from code_assistant.index import onnx_wire
from code_assistant.index.minilm import Weights

if TYPE_CHECKING:
    import onnxruntime

logger = logging.getLogger(__name__)

_MS = "com.microsoft"  # onnxruntime's contrib ops: MultiHeadAttention, SkipLayerNormalization, BiasGelu, ...


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


def _int8_matmul(g: _Graph, x: str, w: np.ndarray, prefix: str) -> str:
    """x @ w for x (tokens, K) float32, w (K, N): per-token asymmetric uint8 x, per-column symmetric int8 w."""
    w_scale = np.maximum(np.abs(w).max(axis=0), np.float32(1e-12)) / np.float32(127)
    w_q = np.round(w / w_scale).astype(np.int8)
    w_q_colsum = w_q.astype(np.float32).sum(axis=0)
    # per token: the range [min, max], widened to hold 0, mapped onto 0..255
    low = g.op("Min", [g.op("ReduceMin", [x, "axis_last"], keepdims=1), "zero"])
    high = g.op("Max", [g.op("ReduceMax", [x, "axis_last"], keepdims=1), "zero"])
    scale = g.op("Max", [g.op("Mul", [g.op("Sub", [high, low]), "inv_255"]), "tiny"])  # (tokens, 1)
    zero_point = g.op("Round", [g.op("Neg", [g.op("Div", [low, scale])])])  # (tokens, 1), 0..255 as float
    q = g.op("QuantizeLinear", [x, g.op("Reshape", [scale, "axis_last"]),
                                g.op("Reshape", [g.op("Cast", [zero_point], to=onnx_wire.UINT8), "axis_last"])],
             axis=0)
    product = g.op("MatMulIntegerToFloat", [q, g.const(f"{prefix}.w_q", w_q, np.int8), "one",
                                            g.const(f"{prefix}.w_scale", w_scale)], domain=_MS)
    scaled = g.op("Mul", [product, scale])
    # scaled - (scale * zero_point) outer (colsum(w_q) * w_scale): the zero point's share, removed in one Gemm
    return g.op("Gemm", [g.op("Mul", [zero_point, scale]), g.const(f"{prefix}.zp_correction",
                                                                   (-w_q_colsum * w_scale)[None, :]), scaled])


def build_model(w: Weights) -> bytes:
    """The serialized ONNX model: inputs input_ids and attention_mask (batch, seq) int64, output
    sentence_embedding (batch, hidden) float32, mean-pooled and L2-normalized like `minilm.encode`."""
    g = _Graph()
    hidden = w.word.shape[1]
    for name, value in (("zero", 0.0), ("one", 1.0), ("inv_255", 1 / 255), ("tiny", 1e-12), ("pool_tiny", 1e-9)):
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
        p = f"layer{i}"
        qkv = g.op("Reshape", [_int8_matmul(g, x, layer["qkv_w"], f"{p}.qkv"), to_3d])
        split = g.op("Split", [qkv], outputs=3, axis=-1, num_outputs=3)
        q, k, v = (f"{split}:{j}" for j in range(3))
        # queries are pre-scaled by 1/sqrt(head_dim) in the weights, hence scale=1
        context = g.op("MultiHeadAttention", [q, k, v, g.const(f"{p}.qkv_b", layer["qkv_b"]), key_mask],
                       domain=_MS, num_heads=w.heads, scale=1.0)
        attended = _int8_matmul(g, g.op("Reshape", [context, "to_2d"]), layer["out_w"], f"{p}.out")
        x = g.op("SkipLayerNormalization", [attended, x, g.const(f"{p}.ln1_g", layer["ln1_g"]),
                                            g.const(f"{p}.ln1_b", layer["ln1_b"]),
                                            g.const(f"{p}.out_b", layer["out_b"])], domain=_MS, epsilon=w.eps)
        up = g.op("BiasGelu", [_int8_matmul(g, x, layer["up_w"], f"{p}.up"), g.const(f"{p}.up_b", layer["up_b"])],
                  domain=_MS)  # exact erf GELU
        down = _int8_matmul(g, up, layer["down_w"], f"{p}.down")
        x = g.op("SkipLayerNormalization", [down, x, g.const(f"{p}.ln2_g", layer["ln2_g"]),
                                            g.const(f"{p}.ln2_b", layer["ln2_b"]),
                                            g.const(f"{p}.down_b", layer["down_b"])], domain=_MS, epsilon=w.eps)
    mask = g.op("Unsqueeze", [g.op("Cast", ["attention_mask"], to=onnx_wire.FLOAT), "axis_2"])  # (batch, seq, 1)
    summed = g.op("ReduceSum", [g.op("Mul", [g.op("Reshape", [x, to_3d]), mask]), "axis_1"], keepdims=0)
    counts = g.op("Max", [g.op("ReduceSum", [mask, "axis_1"], keepdims=0), "pool_tiny"])
    pooled = g.op("Div", [summed, counts])
    g.nodes.append(onnx_wire.node("LpNormalization", [pooled], ["sentence_embedding"], "normalize", axis=-1, p=2))
    return onnx_wire.model(
        g.nodes, g.initializers,
        inputs=[onnx_wire.value_info(n, onnx_wire.INT64, ["batch", "seq"]) for n in ("input_ids", "attention_mask")],
        outputs=[onnx_wire.value_info("sentence_embedding", onnx_wire.FLOAT, ["batch", hidden])],
        opsets={"": 18, _MS: 1}, graph_name="all-MiniLM-L6-v2-int8")


class Int8MiniLM:
    """An onnxruntime session of the int8 graph. `threads` is onnxruntime's intra-op thread count (None: its default,
    one per core); the session never spins waiting for work, so idle threads leave the cores to other jobs."""

    def __init__(self, w: Weights, threads: int | None = 1) -> None:
        import onnxruntime

        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads or 0
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only: graph-optimizer notes are not the user's business
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session: onnxruntime.InferenceSession = onnxruntime.InferenceSession(
            build_model(w), options, providers=["CPUExecutionProvider"])
        self.max_seq_length = w.max_seq_length
        logger.debug("built the int8 MiniLM onnxruntime session (%s threads)", threads or "default")

    def encode(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Same contract as `minilm.encode`: (batch, seq) int ids and mask -> (batch, hidden) unit vectors."""
        feeds = {"input_ids": ids.astype(np.int64, copy=False), "attention_mask": mask.astype(np.int64, copy=False)}
        return np.asarray(self.session.run(["sentence_embedding"], feeds)[0])
