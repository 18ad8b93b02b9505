"""A model's name as a person reads it on a status line: a server that serves a model file (llama.cpp and
llama-cpp-python name it by the path they loaded: `/models/SmolLM2-360M-Instruct-Q8_0.gguf`) is named by the file's
stem; any other id is shown as it is. Requests and run logs keep the id itself."""
from __future__ import annotations

from pathlib import PurePath

MODEL_FILES = (".gguf", ".ggml", ".bin", ".safetensors", ".llamafile")  # a model served from a file of these kinds


def shown(model_id: str) -> str:
    """`model_id` for a status line: a model file's stem (`SmolLM2-360M-Instruct-Q8_0`), else the id."""
    if model_id.lower().endswith(MODEL_FILES):
        return PurePath(model_id.replace("\\", "/")).stem or model_id
    return model_id
