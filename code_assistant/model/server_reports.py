"""Which context window a run works with: the setting, else what the server reports, else the model catalogue
(catalogue.py: a hosted model's published window, under its name with or without a provider prefix, whatever the base
URL), else a default.

What servers report, asked once per run with short timeouts (every question is optional; a server that answers none
is fine):
- llama.cpp's server: GET /props -> default_generation_settings.n_ctx;
- vLLM (and OpenRouter-style gateways): GET /v1/models -> max_model_len / context_length for the model;
- LM Studio: GET /api/v0/models -> loaded_context_length (else max_context_length) for the model;
- Ollama: POST /api/show -> a num_ctx parameter from the Modelfile; else the window of the loaded model in GET /api/ps
  (the model is loaded first if it is not); else Ollama's old default of 2,048. Ollama's /v1 endpoint takes no
  num_ctx per request (it silently cuts what does not fit), so the tool sizes its requests to the window Ollama
  really runs.
llama-cpp-python's server reports nothing; its window is learned from its first refusal (window.py) and remembered
for the next run against the same server and model (remembered.py).

Which model a local server serves, when no model was named: the one model its GET /v1/models lists (llama.cpp,
llama-cpp-python, vLLM, a single loaded model in LM Studio); a server listing several (Ollama's pulled models) says
nothing about which one answers, so the default name stays.
"""
from __future__ import annotations

import json
import logging
import re
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from code_assistant.errors import ConfigError
from code_assistant.model.catalogue import ModelInfo, exact, lookup
from code_assistant.model.error_bodies import body_codes, body_message
from code_assistant.model.prices import is_local
from code_assistant.model.remembered import FILE_NAME, WindowMemory, fingerprint
from code_assistant.model.retry import lasting_cause
from code_assistant.model.window import DEFAULT_SOURCE, DEFAULT_WINDOW, OPENAI_RATIO, ContextWindow

logger = logging.getLogger(__name__)

PROBE_TIMEOUT_S = 3.0
CHECK_TIMEOUT_S = 10.0  # the first question of a run: a server that is up answers GET /models in well under a second
OPENAI_URL = "https://api.openai.com/v1"
_MODEL_LISTS: dict[str, Any] = {}  # GET /models answers this process has had, by URL
_MODEL_INFOS: dict[str, Any] = {}  # GET /model/info answers (LiteLLM's), by URL
OLLAMA_OLD_DEFAULT = 2048
_NUM_CTX_RE = re.compile(r"^\s*num_ctx\s+(\d+)\s*$", re.MULTILINE)


class _Unreachable(Exception):
    pass


# A key refused, as gateways type it beside 401: LiteLLM's auth_error (https://github.com/BerriAI/litellm/issues/4880),
# Anthropic's authentication_error, OpenAI's invalid_api_key.
_KEY_REFUSED = {"auth_error", "authentication_error", "invalid_api_key"}
# LiteLLM without a database, asked with a key that is not its master key: 400 {"error": {"message": "No connected
# db.", "type": "no_db_connection", "code": "400"}} (https://github.com/BerriAI/litellm/pull/20837)
_NO_KEY_STORE = {"no_db_connection"}


def _error_body(exc: urllib.error.HTTPError) -> Any:
    try:
        text = exc.read().decode("utf-8", "replace")
    except OSError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _call(url: str, body: dict[str, Any] | None = None, timeout: float = PROBE_TIMEOUT_S,
          api_key: str | None = None) -> Any:
    """GET (or POST with a JSON body) and parse the JSON answer; None for any answer but 200 with JSON."""
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {api_key}"} if api_key else {})}
    data = json.dumps(body).encode() if body is not None else None
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=data, headers=headers), timeout=timeout) as r:
            return json.loads(r.read() or b"null")
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        raise _Unreachable(str(exc)) from exc
    except (ValueError, OSError):
        return None


def _asked_once(cache: dict[str, Any], url: str, api_key: str | None) -> Any:
    """The JSON answer of GET `url`, asked once per process (check_server's GET /models included); raises
    _Unreachable when nothing answers (not remembered: the next question asks again)."""
    if url not in cache:
        cache[url] = _call(url, api_key=api_key)
    return cache[url]


def _model_list(base_url: str, api_key: str | None) -> Any:
    return _asked_once(_MODEL_LISTS, f"{base_url.rstrip('/')}/models", api_key)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _entry(body: Any, model: str) -> dict[str, Any] | None:
    """The model's entry in an OpenAI-style model list (the only one, when the server serves one model)."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    return next((e for e in entries if e.get("id") == model), entries[0] if len(entries) == 1 else None)


def from_props(body: Any) -> int | None:
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    return _int(settings.get("n_ctx")) if isinstance(settings, dict) else _int(body.get("n_ctx"))


# The window's field in a model list, and who sends it: vLLM's max_model_len, OpenRouter's context_length, LiteLLM's
# max_input_tokens (its GET /v1/models, for a model whose window it knows: 272000 for openai/gpt-5.2 in 1.108.7).
_WINDOW_FIELDS = ("max_model_len", "context_length", "context_window", "max_input_tokens")


def models_window(body: Any, model: str) -> tuple[int, str] | None:
    """(window, the field that said it) from an OpenAI-style model list, or None."""
    entry = _entry(body, model)
    if entry is None:
        return None
    return next(((n, k) for k in _WINDOW_FIELDS if (n := _int(entry.get(k)))), None)


def from_models(body: Any, model: str) -> int | None:
    found = models_window(body, model)
    return found[0] if found else None


def from_model_info(body: Any, model: str) -> tuple[int | None, int | None, float | None, float | None] | None:
    """LiteLLM's GET /model/info for the model: (max_input_tokens, max_output_tokens, input and output dollars per
    million tokens), or None when this is not that answer or does not list the model."""
    entries = body.get("data") if isinstance(body, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("model_name") != model or not isinstance(entry.get("model_info"),
                                                                                               dict):
            continue
        info = entry["model_info"]
        prices = [info.get(k) for k in ("input_cost_per_token", "output_cost_per_token")]
        dollars = [p * 1e6 if isinstance(p, int | float) and not isinstance(p, bool) else None for p in prices]
        return _int(info.get("max_input_tokens")), _int(info.get("max_output_tokens")), dollars[0], dollars[1]
    return None


def gateway_info(base_url: str, model: str, api_key: str | None = None) -> tuple[int | None, int | None,
                                                                                   float | None, float | None] | None:
    """What a LiteLLM gateway's GET /model/info says of the model (asked once per process), or None."""
    try:
        return from_model_info(_asked_once(_MODEL_INFOS, f"{base_url.rstrip('/')}/model/info", api_key), model)
    except _Unreachable:
        return None


def output_limit(base_url: str | None, model: str, api_key: str | None = None) -> int | None:
    """The most tokens an answer may have, as a gateway reports it (LiteLLM's max_output_tokens in GET /v1/models or
    /model/info), or None."""
    if not base_url:
        return None
    listed = _MODEL_LISTS.get(f"{base_url.rstrip('/')}/models")
    entry = _entry(listed, model) if listed is not None else None
    if entry is not None and (most := _int(entry.get("max_output_tokens"))):
        return most
    info = gateway_info(base_url, model, api_key)
    return info[1] if info else None


def from_lmstudio(body: Any, model: str) -> int | None:
    entry = _entry(body, model)
    if entry is None:
        return None
    return _int(entry.get("loaded_context_length")) or _int(entry.get("max_context_length"))


def from_ollama_show(body: Any) -> tuple[int | None, int | None] | None:
    """(num_ctx set in the Modelfile, the model's trained window), or None when this is not Ollama's answer."""
    if not isinstance(body, dict) or not any(k in body for k in ("model_info", "parameters", "modelfile")):
        return None
    params = body.get("parameters")
    num_ctx = _NUM_CTX_RE.search(params) if isinstance(params, str) else None
    info = body.get("model_info") if isinstance(body.get("model_info"), dict) else {}
    trained = next((_int(v) for k, v in info.items() if k.endswith(".context_length")), None)
    return (int(num_ctx.group(1)) if num_ctx else None), trained


def from_ollama_ps(body: Any, model: str) -> int | None:
    models = body.get("models") if isinstance(body, dict) else None
    for entry in models if isinstance(models, list) else []:
        if isinstance(entry, dict) and model in (entry.get("name"), entry.get("model")):
            return _int(entry.get("context_length"))
    return None


def _root(base_url: str) -> str:
    parts = urlsplit(base_url.rstrip("/"))
    path = re.sub(r"/v1$", "", parts.path)
    return f"{parts.scheme}://{parts.netloc}{path}"


def _ollama(root: str, model: str, load_timeout: float) -> tuple[int, str] | None:
    shown = from_ollama_show(_call(f"{root}/api/show", {"model": model}))
    if shown is None:
        return None
    num_ctx, trained = shown
    window, source = (num_ctx, "Ollama's num_ctx parameter") if num_ctx else (None, "")
    if window is None:
        window = from_ollama_ps(_call(f"{root}/api/ps"), model)
        if window is None:  # not loaded yet: load it (an empty generate request), then ask again
            _call(f"{root}/api/generate", {"model": model}, timeout=load_timeout)
            window = from_ollama_ps(_call(f"{root}/api/ps"), model)
        window, source = (window, "Ollama's GET /api/ps") if window else (OLLAMA_OLD_DEFAULT, "Ollama's old default")
    return (min(window, trained) if trained else window), source


def v1_hint(base_url: str | None, api_key: str | None = None) -> str:
    """After a 404 from a base URL with no /v1 in its path: the advice to add it, when the server answers GET
    /v1/models there (Ollama, vLLM and LM Studio serve their OpenAI-compatible API under /v1 only); else ""."""
    if not base_url or re.search(r"/v\d", urlsplit(base_url).path):
        return ""
    with_v1 = f"{base_url.rstrip('/')}/v1"
    try:
        answer = _call(f"{with_v1}/models", api_key=api_key)
    except _Unreachable:
        return ""
    return f"; it answers at {with_v1}: set OPENAI_BASE_URL={with_v1}" if isinstance(answer, dict) else ""


def check_server(base_url: str | None, api_key: str | None, timeout: float = CHECK_TIMEOUT_S,
                 named_by: str = "") -> None:
    """One GET /models before any work, so that a wrong OPENAI_BASE_URL or key is found in seconds, not after the
    index and a test run. No answer at all, a refused key (401/403, or a body that types it so whatever the status),
    a gateway that cannot check keys (LiteLLM without a database), a refusal no wait will change (retry.py), or a 404
    from a base URL that lacks the /v1 the server answers under, is a ConfigError naming the URL, the cause and what
    named the URL (`named_by`: "--base-url", "OPENAI_BASE_URL", ...; "": nothing did, OpenAI's); any other answer means
    a server is there (a 404 included: some servers have no such route)."""
    url = f"{(base_url or OPENAI_URL).rstrip('/')}/models"
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout) as answer:
            try:
                _MODEL_LISTS[url] = json.loads(answer.read() or b"null")  # served_model reads it: asked once
            except ValueError:
                pass
            return
    except urllib.error.HTTPError as exc:
        where, body = base_url or OPENAI_URL, _error_body(exc)
        said = f": {message}" if (message := " ".join(body_message(body).split())[:300]) else ""
        if exc.code in (401, 403) or body_codes(body) & _KEY_REFUSED:
            raise ConfigError(f"the model server at {where} refused the API key ({exc.code} on GET /models{said}); "
                              f"check OPENAI_API_KEY") from exc
        if body_codes(body) & _NO_KEY_STORE:
            raise ConfigError(f"the gateway at {where} cannot check the API key: without a database LiteLLM takes only "
                              f"its master key ({exc.code} on GET /models{said}); set OPENAI_API_KEY to the master "
                              f"key, or give the gateway a DATABASE_URL") from exc
        if cause := lasting_cause(exc.code, body):
            raise ConfigError(f"the model server at {where} refused: {cause} ({exc.code} on GET /models{said})") from exc
        if exc.code == 404 and (hint := v1_hint(base_url, api_key)):
            raise ConfigError(f"the model server at {base_url} has no GET /models (404){hint}") from exc
        logger.debug("GET %s answered %d: a server is there", url, exc.code)
    except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        named = (f"that {named_by} is right" if named_by else
                 "the network (no --base-url or OPENAI_BASE_URL names another server)")
        raise ConfigError(f"the model server at {base_url or OPENAI_URL} does not answer ({reason}); check that it "
                          f"is running and {named}") from exc


def server_window(base_url: str, model: str, api_key: str | None = None,
                  load_timeout: float = 120.0) -> tuple[int, str] | None:
    """(window, where it came from) as the server reports it, or None."""
    root = _root(base_url)
    try:
        if window := from_props(_call(f"{root}/props", api_key=api_key)):
            return window, "GET /props"
        if found := models_window(_model_list(base_url, api_key), model):
            return found[0], "GET /v1/models" if found[1] in ("max_model_len", "context_length") else \
                f"GET /v1/models ({found[1]})"
        if window := from_lmstudio(_call(f"{root}/api/v0/models", api_key=api_key), model):
            return window, "GET /api/v0/models"
        if (info := gateway_info(base_url, model, api_key)) and info[0]:
            return info[0], "GET /model/info (max_input_tokens)"
        return _ollama(root, model, load_timeout)
    except _Unreachable as exc:
        logger.info("no window reported by %s: %s", base_url, exc)
        return None


def resolve_window(setting: int | None, base_url: str | None, model: str, api_key: str | None = None,
                   load_timeout: float = 120.0, state: Path | None = None) -> ContextWindow:
    """--context-window / OPENAI_CONTEXT_WINDOW, else the server's report, else the window an earlier run learned from
    this server and model (remembered.py, under `state`), else the catalogue, else DEFAULT_WINDOW. What the run
    learns from the server is remembered in `state` (not a window set by hand)."""
    info = catalogued(base_url, model)
    memory = window_memory(state, base_url, model, api_key)
    if setting:
        window = ContextWindow(tokens=setting, source="--context-window")
    elif base_url and (reported := server_window(base_url, model, api_key, load_timeout)):
        window = ContextWindow(*reported)
    elif memory is not None and (recalled := memory.recall()):
        window = recalled
    elif info and info.window:
        through = "; the exact name, through a server on this machine" if is_local(base_url) else ""
        window = ContextWindow(tokens=info.window, source=f"{info.source} ({info.entry}{through})")
    else:
        window = ContextWindow(tokens=DEFAULT_WINDOW, source=DEFAULT_SOURCE)
    if info and _openai_made(info):
        window.ratio = OPENAI_RATIO  # OpenAI's tokenizers, whichever gateway forwards the request
    if memory is not None and not setting:
        window.keep = memory.keep
    logger.info("context window of %s: %s", model, window.describe())
    return window


def window_memory(state: Path | None, base_url: str | None, model: str,
                  api_key: str | None = None) -> WindowMemory | None:
    """The memory of this server's window for `model` (None without a state folder or a base URL: a hosted API's
    windows are reported or catalogued), with the fingerprint of its GET /models answer (asked already by
    check_server, else once now)."""
    if state is None or not base_url:
        return None
    try:
        models = _model_list(base_url, api_key)
    except _Unreachable:
        models = None
    return WindowMemory(state / FILE_NAME, base_url, model, seen=fingerprint(models))


def catalogued(base_url: str | None, model: str) -> ModelInfo | None:
    """The catalogue's entry for a hosted model. A server on this machine runs its own model whatever it is called (a
    GGUF named gpt-4o is no gpt-4o): only a name the catalogue lists exactly with its provider's prefix
    (`openai/gpt-5.2`, as a gateway such as LiteLLM is asked for a hosted model) is looked up for it."""
    return exact(model) if is_local(base_url) else lookup(model)


def _openai_made(info: ModelInfo) -> bool:
    return info.provider == "openai" or re.match(r"(openai/)?(gpt-|o\d)", info.id) is not None


def served_model(base_url: str, api_key: str | None = None) -> str | None:
    """The id of the only model the server lists at GET /v1/models; None when it lists none or several, or cannot
    be asked."""
    try:
        body = _model_list(base_url, api_key)
    except _Unreachable as exc:
        logger.info("no model list from %s: %s", base_url, exc)
        return None
    entries = body.get("data") if isinstance(body, dict) else None
    ids = {e["id"] for e in entries if isinstance(e, dict) and isinstance(e.get("id"), str) and e["id"].strip()} \
        if isinstance(entries, list) else set()
    return ids.pop() if len(ids) == 1 else None


def model_name(model: str, named: bool, base_url: str | None, api_key: str | None = None) -> str:
    """The model a run asks for: `model` when it was named (--model, OPENAI_MODEL) or the server is not on this
    machine; else the one a local server serves, so that the header and the run log say what really answers."""
    if named or not base_url or not is_local(base_url):
        return model
    served = served_model(base_url, api_key)
    if served:
        logger.info("no model named; %s serves %s", base_url, served)
    return served or model
