"""A real LiteLLM proxy (`litellm[proxy]==1.108.7` from the registry) for tests, started on 127.0.0.1 with a config
of routes, in its own process group, stopped (the whole group) on exit.

LiteLLM brings a dependency tree of its own, so it lives in a virtualenv of its own, never the project's:

    python -m venv /tmp/litellm-venv && /tmp/litellm-venv/bin/pip install 'litellm[proxy]==1.108.7'
    export LITELLM_PROXY=/tmp/litellm-venv/bin/litellm

`proxy_command()` finds it (LITELLM_PROXY, else `litellm` on PATH); the tests that need it are skipped with that
reason when it is not installed — a gateway is not faked.
"""
from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Self

from tests.llama_server import ends_with, free_port

VERSION = "1.108.7"
STARTUP_TIMEOUT_S = 240  # the proxy imports much of its tree before it listens: ~30 s on a shared 2-core machine
INSTALL = (f"litellm[proxy]=={VERSION} is not installed: python -m venv /tmp/litellm-venv && /tmp/litellm-venv/bin/pip "
           f"install 'litellm[proxy]=={VERSION}', then LITELLM_PROXY=/tmp/litellm-venv/bin/litellm")


def proxy_command() -> str | None:
    found = os.environ.get("LITELLM_PROXY") or shutil.which("litellm")
    return found if found and os.access(found, os.X_OK) else None


def route(name: str, model: str, api_base: str, **model_info: Any) -> dict[str, Any]:
    """One entry of the proxy's model_list: `name` as clients ask for it, sent on as `model` to `api_base`."""
    entry: dict[str, Any] = {"model_name": name, "litellm_params": {"model": model, "api_base": api_base,
                                                                   "api_key": "none"}}
    if model_info:
        entry["model_info"] = model_info
    return entry


class LiteLLMProxy:
    def __init__(self, routes: list[dict[str, Any]], workdir: Path, master_key: str = "sk-master") -> None:
        command = proxy_command()
        if command is None:
            raise RuntimeError(INSTALL)
        self.command, self.workdir, self.master_key, self.port = command, workdir, master_key, free_port()
        # JSON is YAML: the config needs no YAML writer
        self.config = workdir / "litellm.yaml"
        self.config.write_text(json.dumps({"model_list": routes, "general_settings": {"master_key": master_key}}))
        self.log = workdir / "litellm.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def __enter__(self) -> Self:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "LITELLM_"))}
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([self.command, "--config", str(self.config), "--host", "127.0.0.1", "--port",
                                          str(self.port)], stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=self.workdir, env=env, start_new_session=True,
                                         preexec_fn=functools.partial(ends_with, os.getpid()))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"litellm exited ({self.proc.returncode}): {self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health/liveliness", timeout=2):
                    return self
            except (OSError, urllib.error.URLError):
                time.sleep(0.5)
        self.__exit__()
        raise RuntimeError(f"litellm did not answer within {STARTUP_TIMEOUT_S} s: {self._tail()}")

    def __exit__(self, *exc: object) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def _tail(self) -> str:
        return self.log.read_text(errors="replace")[-1500:] if self.log.exists() else ""
