"""all-MiniLM-L6-v2's forward pass in numpy float32: BERT encoder, mean pooling, L2 normalization.

The same three modules as sentence-transformers (checked against it in tests/test_embeddings.py). Loading takes a
model directory; finding it, caching and batching are `embeddings.LocalMiniLM`'s job.
"""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from tokenizers import Tokenizer

logger = logging.getLogger(__name__)

# one encoder layer: qkv_w/qkv_b (fused, queries pre-scaled), out_w/out_b, ln1_g/ln1_b, up_w/up_b, down_w/down_b,
# ln2_g/ln2_b; matrices transposed to (in, out) for x @ w
Layer = dict[str, np.ndarray]


@dataclass(frozen=True)
class Weights:
    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    ln_g: np.ndarray
    ln_b: np.ndarray
    layers: list[Layer]
    heads: int
    eps: float
    max_seq_length: int


def load_weights(path: Path) -> Weights:
    """Read the safetensors file in the model directory and lay the matrices out for numpy."""
    from safetensors.numpy import load_file

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
    return Weights(
        word=t["embeddings.word_embeddings.weight"], position=t["embeddings.position_embeddings.weight"],
        token_type=t["embeddings.token_type_embeddings.weight"],
        ln_g=t["embeddings.LayerNorm.weight"], ln_b=t["embeddings.LayerNorm.bias"],
        layers=layers, heads=heads, eps=config["layer_norm_eps"], max_seq_length=max_seq,
    )


def load_tokenizer(path: Path) -> Tokenizer:
    """The model's WordPiece tokenizer, without truncation or padding (both are done per batch)."""
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
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


def encode(w: Weights, ids: np.ndarray, mask: np.ndarray,
           dense_inputs: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """Mean-pooled, L2-normalized sentence vectors for a padded batch: ids and mask are (batch, seq) int arrays.

    `dense_inputs`, when given, receives the input of each dense product, (batch * seq, K), under the names
    `minilm_int8` gives them (`layer0.qkv`, `layer0.out`, `layer0.up`, `layer0.down`, ...)."""
    batch, seq = ids.shape
    hidden = w.word.shape[1]
    head_dim = hidden // w.heads
    x = w.word[ids] + w.position[:seq][None, :, :] + w.token_type[0]
    x = _layer_norm(x, w.ln_g, w.ln_b, w.eps).reshape(batch * seq, hidden)  # dense layers work on 2-D (tokens, hidden)
    # padded keys get a large negative score, so they receive no attention weight
    key_bias = ((1.0 - mask.astype(np.float32)) * np.float32(-1e9))[:, None, None, :]

    def seen(name: str, value: np.ndarray) -> None:
        if dense_inputs is not None:
            dense_inputs[name] = value

    for i, layer in enumerate(w.layers):
        seen(f"layer{i}.qkv", x)
        qkv = x @ layer["qkv_w"]
        qkv += layer["qkv_b"]
        qkv = qkv.reshape(batch, seq, 3, w.heads, head_dim).transpose(2, 0, 3, 1, 4)  # (3, batch, heads, seq, hd)
        scores = qkv[0] @ qkv[1].transpose(0, 1, 3, 2)  # queries are pre-scaled
        scores += key_bias
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores, out=scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        context = (probs @ qkv[2]).transpose(0, 2, 1, 3).reshape(batch * seq, hidden)
        seen(f"layer{i}.out", context)
        attended = context @ layer["out_w"]
        attended += layer["out_b"]
        attended += x
        x = _layer_norm(attended, layer["ln1_g"], layer["ln1_b"], w.eps)
        seen(f"layer{i}.up", x)
        h = x @ layer["up_w"]
        h += layer["up_b"]
        _gelu_inplace(h)
        seen(f"layer{i}.down", h)
        ff = h @ layer["down_w"]
        ff += layer["down_b"]
        ff += x
        x = _layer_norm(ff, layer["ln2_g"], layer["ln2_b"], w.eps)
    x = x.reshape(batch, seq, hidden)
    m = mask.astype(np.float32)[:, :, None]
    pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1e-9))
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return pooled / np.maximum(norms, np.float32(1e-12))
