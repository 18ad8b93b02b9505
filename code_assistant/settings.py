"""Settings: the command line, then the environment, then .env files, into one typed object. Where the key goes is
the user's word: the command line, the environment or their own .env; the repository's .env names a server only once
a person approved it for that repository (env_files.py says which .env is whose)."""
from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlsplit

from code_assistant import env_files
from code_assistant.approvals import Approval, Approvals
from code_assistant.errors import ConfigError
from code_assistant.languages import framework

DEFAULT_MODEL = "gpt-4o"
DEFAULT_TEST_COMMAND = "pytest"


class EmbeddingBackend(StrEnum):
    """What embeds the code for dense retrieval."""

    LOCAL = "local"  # MiniLM, shipped in a pip package
    OPENAI = "openai"  # the /embeddings endpoint of the OpenAI-compatible server


# Chunks a query may have the model embed (its top candidates' missing vectors): a few seconds of the local model on
# two cores; an embeddings API is fast enough for ten times as many.
EMBED_BUDGETS = {EmbeddingBackend.LOCAL: 200, EmbeddingBackend.OPENAI: 2000}
MIN_CONTEXT_WINDOW = 512  # below this no request (system prompt, task, some code, an answer) fits at all
BASE_URL_APPROVALS = "base-url-approved.json"  # in the repository's state: the servers its .env may name
# The assistant's own settings in the environment: its chat and embedding server (key, URL, model), its vector store's
# credentials. Never in a test command's environment (verify/environment.py), not even by --pass-env.
OWN_PREFIXES = ("OPENAI_", "EMBEDDING_", "CHROMA_")


def own_setting(name: str) -> bool:
    """One of the assistant's own settings (OWN_PREFIXES): never in a test's environment, not even by --pass-env."""
    return name.upper().startswith(OWN_PREFIXES)


class SandboxMode(StrEnum):
    """What the test command may do (verify/sandbox.py): write only its working tree, or anything (off)."""

    WRITE = "write"
    STRICT = "strict"  # write's older name
    OFF = "off"


SANDBOX_MODES = tuple(mode.value for mode in SandboxMode)  # --sandbox's choices


class ToolsMode(StrEnum):
    """How the model is given its tools (agent/exchange.py): OpenAI's tool calls, described in words, or none; auto:
    native in a window of at least TOOLS_MIN_WINDOW tokens, else grep and read described in words (a schema costs a
    small window too much), and none when even those do not fit (tools/fit.py)."""

    AUTO = "auto"
    NATIVE = "native"
    JSON = "json"
    OFF = "off"  # --no-tools


TOOLS_MODES = tuple(mode.value for mode in ToolsMode)


class EditFormat(StrEnum):
    """How the model is asked to write its edits (model/prompts.py): the JSON plan (every action: modify, create,
    delete, replace_symbol, read; its schema sent as response_format), or SEARCH/REPLACE blocks (modify and create
    only, plain text: a small local model copies its search text from the file far more often in this form)."""

    JSON = "json"
    BLOCKS = "blocks"


EDIT_FORMATS = tuple(f.value for f in EditFormat)


class FixBy(StrEnum):
    """What a failed iteration leads to (agent/loop.py): the failures and the current files sent back for a fix in
    the same conversation, or the change taken back and the first plan asked again at a temperature above 0 with a
    new seed — a sample, which a server that keeps the last prompt (llama.cpp) answers after reading no new token."""

    FEEDBACK = "feedback"
    SAMPLES = "samples"


FIX_BY = tuple(f.value for f in FixBy)
# --small-model: what a model of one to a few billion parameters on a CPU does best with (issue 58, measured with
# Qwen2.5-Coder-1.5B in BENCHMARKS.md): SEARCH/REPLACE blocks, no tools (their declarations are ~650 tokens of a
# prompt read at ~57 tokens a second, and it writes tool calls as text), no reproduction test (none of its answers to
# that request could be read in six cases), a context of 2,500 tokens (a 4-5k one got answers copied from the task or
# an outline). Each is still set by its own flag, which wins.
# A failed iteration is followed by a sample of the plan (FixBy.SAMPLES): shown its failures, the model sent the same
# answer again (pager-page-slice, three times), while six samples of the first request at 0.7 cost 4-40 s each and
# one held the fix. Six iterations: a sample costs its answer and a test run (pager-page-slice: 7 s each), and
# the fix came with the third sample of one iteration after two that repeated the plan.
SMALL_MODEL: dict[str, object] = {"edit_format": "blocks", "tools": "off", "reproduce": False,
                                  "context_tokens": 2500, "fix_by": "samples", "max_iterations": 6}
SMALL_MODEL_SAID = (f"SEARCH/REPLACE blocks, no tools, no reproduction test, a {SMALL_MODEL['context_tokens']}-token "
                    f"context, a failed attempt taken back and the plan sampled again, up to "
                    f"{SMALL_MODEL['max_iterations']} iterations")  # the flag's help, the hint
TOOLS_MIN_WINDOW = 4096
WIRES = ("chat", "responses")  # the APIs a model is asked through (model/accepts.py)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")  # OpenAI's values; servers take some


def cache_home() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "code-assistant"


def repo_id(repo: Path) -> str:
    """Stable identity of a repository on this machine: its resolved path, hashed."""
    return hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class EnvBaseUrl:
    """OPENAI_BASE_URL as the repository's .env sets it: where the key would go, used once a person approved it."""

    url: str
    file: Path
    digest: str  # the file's hash: an approval covers the file as it is
    written: bool = False  # written while the assistant worked on the repository: never used

    @property
    def host(self) -> str:
        return urlsplit(self.url).netloc or self.url

    def identity(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": self.url, "file": self.digest}


@dataclass
class Settings:
    """Everything a run needs, resolved from the CLI, then the environment, then the repository's .env."""

    repo: Path
    test_command: str = DEFAULT_TEST_COMMAND
    test_command_from: str = ""  # what named the test command ("from go.mod"; "": --test-command gave it)
    index_path: Path = field(default_factory=lambda: cache_home() / "index")
    state_path: Path = field(default_factory=lambda: cache_home() / "state")
    max_iterations: int = 3
    test_timeout: float = 120.0
    model: str = DEFAULT_MODEL
    model_named: bool = False  # --model or OPENAI_MODEL named it (else a local server's only model is asked for)
    api_key: str | None = None
    base_url: str | None = None
    base_url_from: str = ""         # what named base_url, for a message that blames it: "--base-url",
    #                                 "OPENAI_BASE_URL", "OPENAI_BASE_URL in /path/.env" ("": none, OpenAI's)
    env_base_url: EnvBaseUrl | None = None  # the repository's .env names a server not approved yet (approved_base_url)
    embedding_backend: EmbeddingBackend = EmbeddingBackend.LOCAL
    embedding_model: str = "text-embedding-3-small"
    embed_budget: int | None = None  # chunks a query may embed; None: EMBED_BUDGETS of the backend
    context_tokens: int = 12000
    context_window: int | None = None  # the model's window in tokens; None: asked of the server, else known or default
    structured_output: bool = True     # send the plan's JSON schema as response_format (edit_format json only)
    edit_format: EditFormat = EditFormat.JSON  # how the model writes its edits
    fix_by: FixBy = FixBy.FEEDBACK  # what a failed iteration leads to: a fix request, or a sample of the plan
    wire: str | None = None            # "chat" or "responses"; None: chat, unless the server says otherwise
    reasoning_effort: str | None = None  # sent to models that take it (REASONING_EFFORTS)
    request_timeout: float = 120.0     # seconds without a byte from the model server (between two streamed tokens)
    max_retries: int = 3
    max_changed_lines: int = 80     # a fix over this many changed lines is refused before anything is written
    max_plan_lines: int = 400       # likewise for the first plan
    max_files: int = 10             # likewise for the number of files one answer touches
    allow_test_edits: bool = False  # without it, edits that weaken tests are refused
    allow_env_edits: bool = False   # without it, edits of .env* files are refused
    max_cost: float | None = None   # dollars, from the price table; unknown models are capped by max_tokens only
    max_tokens: int | None = None   # prompt + completion tokens over the run
    log_dir: Path | None = None     # trajectories; default <index_path>/runs
    review: bool = False
    dry_run: bool = False
    reproduce: bool | None = None   # write a failing test first; None: when the suite is green before the change
    candidates: int = 1             # independent attempts, each in a scratch copy; the best one is applied
    sandbox: SandboxMode = SandboxMode.WRITE  # write without bubblewrap or Landlock is an error (say off)
    network: bool = False           # the test command may reach the network (else loopback only)
    pass_env: list[str] = field(default_factory=list)  # secret-looking variables the user lets the tests see
    sandbox_show: list[Path] = field(default_factory=list)  # paths of the hidden HOME the tests may read
    sandbox_bwrap: str = "bwrap"    # the bubblewrap executable (CODE_ASSISTANT_BWRAP)
    sandbox_writable: list[Path] = field(default_factory=list)  # more paths a test may write (os.pathsep list)
    instructions: bool = True       # the repository's AGENTS.md (or CLAUDE.md, ...) in the system part of requests
    tools: ToolsMode = ToolsMode.AUTO  # the model may look around before it answers
    max_tool_calls: int = 12        # tool calls one answer may make
    trust_mcp: bool = False         # start the repository's .mcp.json servers without asking
    small_model: bool = False      # --small-model: SMALL_MODEL's settings where no flag of their own says otherwise
    verbose: bool = False
    wait: bool = False              # another run or session holds the repository: wait for it (else refused)

    @property
    def query_embed_budget(self) -> int:
        return EMBED_BUDGETS[self.embedding_backend] if self.embed_budget is None else self.embed_budget

    @property
    def runs_dir(self) -> Path:
        return self.log_dir or self.index_path / "runs"

    @property
    def repo_state_dir(self) -> Path:
        """Backups, the journal and the lock of one repository: outside the repository tree."""
        return self.state_path / repo_id(self.repo)

    @property
    def server_url(self) -> str | None:
        """The model's server these settings name (None: the provider's own API), the repository's .env's one too
        before it is approved: what a price or a remembered window is looked up for, never where anything is sent
        (approved_base_url decides that)."""
        return self.base_url or (self.env_base_url.url if self.env_base_url else None)


def _env_int(env: dict[str, str], name: str, what: str) -> int:
    try:
        return int(env[name])
    except ValueError:
        raise ConfigError(f"{name} must be {what}, not {env[name]!r}") from None


def load_settings(repo: str | Path, **cli: object) -> Settings:
    """Build Settings: CLI values (non-None) win over the environment, which wins over .env files."""
    repo_path = Path(repo).expanduser()
    if not repo_path.exists():
        raise ConfigError(f"repository not found: {repo_path}")
    if not repo_path.is_dir():
        raise ConfigError(f"repository is not a directory: {repo_path}")
    repo_path = repo_path.resolve()
    own = {**env_files.own_values(repo_path, Path.cwd()), **os.environ}
    settings = Settings(repo=repo_path)
    # where the state and the index live (an approval among them): the user's word only
    if own.get("CODE_ASSISTANT_INDEX_PATH"):
        settings.index_path = Path(own["CODE_ASSISTANT_INDEX_PATH"]).expanduser()
    if own.get("CODE_ASSISTANT_STATE_PATH"):
        settings.state_path = Path(own["CODE_ASSISTANT_STATE_PATH"]).expanduser()
    theirs = env_files.repo_env(repo_path, settings.repo_state_dir)
    env = {**theirs.settings, **own}
    settings.api_key = env.get("OPENAI_API_KEY") or None
    settings.base_url = own.get("OPENAI_BASE_URL") or None
    if settings.base_url:
        settings.base_url_from = "OPENAI_BASE_URL" + ("" if os.environ.get("OPENAI_BASE_URL") else
                                                      f" in {Path.cwd() / env_files.FILE}")
    if settings.base_url is None and (url := theirs.values.get("OPENAI_BASE_URL")):
        asked = EnvBaseUrl(url=url, file=theirs.path, digest=theirs.digest or "", written=theirs.written)
        if not asked.written and Approvals(settings.repo_state_dir / BASE_URL_APPROVALS).approved(asked.identity()):
            settings.base_url, settings.base_url_from = url, f"OPENAI_BASE_URL in {theirs.path}"
        else:
            settings.env_base_url = asked
    settings.model = env.get("OPENAI_MODEL") or DEFAULT_MODEL
    if env.get("OPENAI_CONTEXT_WINDOW"):
        settings.context_window = _env_int(env, "OPENAI_CONTEXT_WINDOW", "a number of tokens")
    settings.wire = env.get("OPENAI_WIRE") or None
    settings.reasoning_effort = env.get("OPENAI_REASONING_EFFORT") or None
    settings.embedding_backend = env.get("EMBEDDING_BACKEND", settings.embedding_backend)
    settings.embedding_model = env.get("EMBEDDING_MODEL", settings.embedding_model)
    if env.get("CODE_ASSISTANT_EMBED_BUDGET"):
        settings.embed_budget = _env_int(env, "CODE_ASSISTANT_EMBED_BUDGET", "a whole number")
    # the sandbox from the environment only: a .env file may lie in the repository, which the tests can write
    settings.sandbox = os.environ.get("CODE_ASSISTANT_SANDBOX") or settings.sandbox
    settings.sandbox_bwrap = os.environ.get("CODE_ASSISTANT_BWRAP") or settings.sandbox_bwrap
    settings.sandbox_writable = [Path(p).expanduser() for p in
                                 os.environ.get("CODE_ASSISTANT_SANDBOX_WRITABLE", "").split(os.pathsep) if p]
    settings.pass_env = [n for n in re.split(r"[\s,]+", os.environ.get("CODE_ASSISTANT_PASS_ENV", "")) if n]
    for key, value in cli.items():
        if value is None:
            continue
        if not hasattr(settings, key):
            raise TypeError(f"load_settings: no setting named {key!r}")
        current = getattr(settings, key)
        if isinstance(current, Path) or key in ("index_path", "state_path", "log_dir"):
            value = Path(str(value)).expanduser().resolve()
        if key == "sandbox_show":
            value = [Path(str(v)).expanduser().resolve() for v in value]  # type: ignore[attr-defined]
        if key == "pass_env":
            value = [*settings.pass_env, *value]  # type: ignore[misc]
        setattr(settings, key, value)
    if settings.small_model:
        for key, value in SMALL_MODEL.items():
            if cli.get(key) is None:
                setattr(settings, key, value)
    settings.model_named = bool(env.get("OPENAI_MODEL")) or cli.get("model") is not None
    if cli.get("test_command") is None:  # none given: the repository's framework says it (and the run says so)
        named = framework(repo_path)
        settings.test_command, settings.test_command_from = named.command, named.found
    if cli.get("base_url") is not None:
        settings.base_url_from = "--base-url"
    if settings.base_url:
        settings.env_base_url = None  # the command line named the server
    if settings.embedding_backend not in tuple(EmbeddingBackend):
        raise ConfigError(f"EMBEDDING_BACKEND must be 'local' or 'openai', not {settings.embedding_backend!r}")
    settings.embedding_backend = EmbeddingBackend(settings.embedding_backend)
    if settings.max_iterations < 1:
        raise ConfigError("--max-iterations must be at least 1")
    if settings.test_timeout <= 0:
        raise ConfigError("--test-timeout must be positive")
    if settings.sandbox not in SANDBOX_MODES:
        raise ConfigError(f"--sandbox (CODE_ASSISTANT_SANDBOX) must be off, write or strict, not {settings.sandbox!r}")
    settings.sandbox = SandboxMode(settings.sandbox)
    for name in settings.pass_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ConfigError(f"--pass-env (CODE_ASSISTANT_PASS_ENV) takes variable names, not {name!r}")
        if own_setting(name):
            raise ConfigError(f"--pass-env {name}: the assistant's own settings never reach the tests")
    for path in settings.sandbox_show:
        if not path.exists():
            raise ConfigError(f"--sandbox-show {path}: no such file or directory")
    if settings.wire is not None and settings.wire not in WIRES:
        raise ConfigError(f"--wire (OPENAI_WIRE) must be chat or responses, not {settings.wire!r}")
    if settings.reasoning_effort is not None and settings.reasoning_effort not in REASONING_EFFORTS:
        raise ConfigError(f"--reasoning-effort (OPENAI_REASONING_EFFORT) must be one of "
                          f"{', '.join(REASONING_EFFORTS)}, not {settings.reasoning_effort!r}")
    if settings.tools not in TOOLS_MODES:
        raise ConfigError(f"--tools must be one of {', '.join(TOOLS_MODES)}, not {settings.tools!r}")
    settings.tools = ToolsMode(settings.tools)
    settings.edit_format = EditFormat(settings.edit_format)
    settings.fix_by = FixBy(settings.fix_by)
    if settings.max_tool_calls < 0:
        raise ConfigError("--max-tool-calls must be 0 or more")
    if settings.candidates < 1:
        raise ConfigError("--candidates must be at least 1")
    if settings.candidates > 1 and settings.dry_run:
        raise ConfigError("--dry-run shows one plan; it cannot be combined with --candidates")
    if settings.embed_budget is not None and settings.embed_budget < 0:
        raise ConfigError("--embed-budget must be 0 or more")
    if settings.request_timeout <= 0:
        raise ConfigError("--request-timeout must be positive")
    if settings.context_window is not None and settings.context_window < MIN_CONTEXT_WINDOW:
        raise ConfigError(f"--context-window (OPENAI_CONTEXT_WINDOW) must be at least {MIN_CONTEXT_WINDOW} tokens")
    for name in ("max_changed_lines", "max_plan_lines", "max_files", "context_tokens"):
        if getattr(settings, name) < 1:
            raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
    return settings


def approved_base_url(settings: Settings, confirm: Callable[[str], bool] | None) -> Settings:
    """The settings with the repository's .env's OPENAI_BASE_URL in use, once a person approved it for this repository
    (asked with `confirm`, on a terminal, then kept); a ConfigError, before anything is sent, when it is refused,
    nobody can be asked, or a run wrote that .env. Settings without one come back as they are."""
    asked = settings.env_base_url
    if asked is None:
        return settings
    question = (f"The repository's .env ({asked.file}) sets OPENAI_BASE_URL={asked.url}: your API key and the "
                f"model's requests would go to {asked.host}. Use it for this repository?")
    verdict = Approval.UNASKED if asked.written else \
        Approvals(settings.repo_state_dir / BASE_URL_APPROVALS).ask(asked.identity(), question, confirm)
    if not verdict.granted:
        raise base_url_refusal(asked, verdict)
    return dataclasses.replace(settings, base_url=asked.url, env_base_url=None,
                               base_url_from=f"OPENAI_BASE_URL in {asked.file}")


def base_url_refusal(asked: EnvBaseUrl, verdict: Approval = Approval.UNASKED) -> ConfigError:
    """Why the repository's .env's server is not used, in one line that says what to do."""
    said = f"the repository's .env sets OPENAI_BASE_URL={asked.url}, which would send your key to {asked.host}"
    instead = "give the server with --base-url or OPENAI_BASE_URL"
    if asked.written:
        return ConfigError(f"{said}; that .env was written while the assistant worked on the repository (by a plan "
                           f"or a test), so it is not read: check it, then {instead}")
    if verdict == Approval.REFUSED:
        return ConfigError(f"{said}; not approved: {instead}")
    return ConfigError(f"{said}; you have not approved it for this repository and cannot be asked here (no terminal, "
                       f"or --json): approve it once on a terminal, or {instead}")
