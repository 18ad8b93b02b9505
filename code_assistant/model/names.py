"""A model's name as a person reads it on a status line: a server that serves a model file (llama.cpp and
llama-cpp-python name it by the path they loaded: `/models/SmolLM2-360M-Instruct-Q8_0.gguf`) is named by the file's
stem; any other id is shown as it is. Requests and run logs keep the id itself."""
from __future__ import annotations

import re
from pathlib import PurePath

MODEL_FILES = (".gguf", ".ggml", ".bin", ".safetensors", ".llamafile")  # a model served from a file of these kinds


def shown(model_id: str) -> str:
    """`model_id` for a status line: a model file's stem (`SmolLM2-360M-Instruct-Q8_0`), else the id."""
    if model_id.lower().endswith(MODEL_FILES):
        return PurePath(model_id.replace("\\", "/")).stem or model_id
    return model_id


# a size in a model's name: `1.5b`, `8B`, `135M`, `:7b` (a MoE's `8x7b` is read as its expert's 7b: still a hint only)
_SIZE_RE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)([bBmM])(?![a-zA-Z0-9])")
SMALL_BILLIONS = 8  # at most this many billion parameters: a model --small-model is meant for


def billions(model_id: str) -> float | None:
    """The parameter count a model's name gives, in billions (`qwen2.5-coder-1.5b`: 1.5, `SmolLM2-135M`: 0.135,
    `llama3.1:8b`: 8), or None when it names none (`gpt-4o`)."""
    match = _SIZE_RE.search(shown(model_id))
    return None if match is None else float(match.group(1)) / (1000 if match.group(2) in "mM" else 1)
