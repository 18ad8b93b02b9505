"""Shared fixtures: every test runs with its own HOME/cache and no real API keys."""
from __future__ import annotations

import signal
from pathlib import Path

import pytest

# The Ctrl-C tests send SIGINT to a CLI they start. A suite started as a background job (`pytest ... &` in a script)
# runs with SIGINT ignored; children inherit an ignored signal and Python keeps it ignored, so those CLIs would never
# see the Ctrl-C and the tests would time out. Caught here instead, it is back to the default in every child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """The whole suite (`python -m pytest`, pytest.ini's `-n auto`) on every core, a file to a worker; files or tests
    named on the command line run in this one process, as without xdist (their output, -s and --pdb as usual)."""
    return 0 if config.args_source == pytest.Config.ArgsSource.ARGS else None


_MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_CONTEXT_WINDOW", "OPENAI_WIRE",
              "OPENAI_REASONING_EFFORT", "EMBEDDING_BACKEND",
              "EMBEDDING_MODEL", "CODE_ASSISTANT_INDEX_PATH", "CODE_ASSISTANT_STATE_PATH", "CHROMA_HOST", "CHROMA_PORT",
              "CHROMA_SSL", "CHROMA_AUTH_TOKEN")


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built embedding graphs are content-addressed: every test (and every CLI it starts) may share one cache."""
    return tmp_path_factory.mktemp("models")


@pytest.fixture(autouse=True)
def isolated_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch, model_cache: Path) -> Path:
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("CODE_ASSISTANT_MODEL_CACHE", str(model_cache))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    for name in _MODEL_ENV:
        monkeypatch.delenv(name, raising=False)
    return home


@pytest.fixture(params=["bubblewrap", "landlock"])
def sandbox_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    """An attack tried under each backend of the sandbox: bubblewrap, then Landlock (bubblewrap made unavailable to
    the CLIs the test starts, which inherit this environment)."""
    import shutil

    from code_assistant.verify import landlock

    if request.param == "bubblewrap":
        if shutil.which("bwrap") is None:
            pytest.fail("bubblewrap is not installed (apt-get install bubblewrap): the sandbox tests need it")
    else:
        if landlock.abi_version() is None:
            pytest.skip("no Landlock in this kernel")
        monkeypatch.setenv("CODE_ASSISTANT_BWRAP", str(tmp_path / "no-bwrap"))
    return request.param
