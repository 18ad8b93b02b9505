"""The sandbox the test command runs in: what the model's code may write while it is tested.

`write` lets the test command write only its working tree (whose `.git`, and the assistant's index and state
directory, stay read-only), a private /tmp and the toolchain caches a test run writes (CACHES); everything else is
read-only. `strict` also takes the network away and hides HOME. Reads are not confined. On Linux the sandbox is
bubblewrap (unprivileged user and pid namespaces); a policy (Policy) is turned into its command line by a pure
function (bwrap_argv), so another backend (macOS's sandbox-exec, not built yet) would be a second builder of the same
policy. `resolve` finds out whether a sandbox can be had here.
"""
from __future__ import annotations

import logging
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from code_assistant.errors import ConfigError

__all__ = ["CACHES", "Cache", "Policy", "Sandbox", "bwrap_argv", "cache_dirs", "resolve"]

logger = logging.getLogger(__name__)

TMP = Path("/tmp")
PROBE_TIMEOUT_S = 10.0  # creating the namespaces takes milliseconds; a probe that hangs means no sandbox
# Install prefixes of the programs on PATH: a PATH entry named so is a prefix's bin directory (~/.local/bin,
# ~/.pyenv/shims, a virtualenv's bin), and the prefix is what its programs need (their libraries, their Python).
_BIN_DIRS = ("bin", "shims")


@dataclass(frozen=True)
class Cache:
    """A toolchain cache a test run writes: where the tool's own variable `env` puts it, else `default` (with
    {home}, {cache} = $XDG_CACHE_HOME or ~/.cache, {gopath} = the first $GOPATH entry or ~/go, {cargo} = $CARGO_HOME
    or ~/.cargo). Created when missing and `tool` is on PATH (the tool would create it on first use)."""

    name: str
    env: str
    default: str | None
    tool: str


CACHES = (
    Cache("Go build cache", "GOCACHE", "{cache}/go-build", "go"),  # `go env GOCACHE`
    Cache("Go module cache", "GOMODCACHE", "{gopath}/pkg/mod", "go"),  # `go env GOMODCACHE`
    Cache("npm cache", "npm_config_cache", "{home}/.npm", "npm"),  # `npm config get cache`; npm's logs go there
    Cache("pip cache", "PIP_CACHE_DIR", "{cache}/pip", "pip"),  # `pip cache dir`
    Cache("uv cache", "UV_CACHE_DIR", "{cache}/uv", "uv"),  # `uv run pytest` writes it
    Cache("cargo registry", "CARGO_HOME", "{cargo}/registry", "cargo"),  # downloaded crates
    Cache("cargo git", "CARGO_HOME", "{cargo}/git", "cargo"),  # git dependencies
    Cache("cargo target", "CARGO_TARGET_DIR", None, "cargo"),  # only when moved out of the repository
)


def cache_dirs(env: Mapping[str, str]) -> list[tuple[Cache, Path]]:
    """Where each cache of CACHES is for a test run with this environment (an unset or relative path: none)."""
    home = env.get("HOME") or str(Path.home())
    places = {"home": home, "cache": env.get("XDG_CACHE_HOME") or f"{home}/.cache",
              "gopath": (env.get("GOPATH") or f"{home}/go").split(os.pathsep)[0],
              "cargo": env.get("CARGO_HOME") or f"{home}/.cargo"}
    found = []
    for cache in CACHES:
        if cache.env == "CARGO_HOME":  # the variable moves the cargo home the cache lives in
            where = cache.default.format(**places) if cache.default else ""
        else:
            where = env.get(cache.env) or (cache.default.format(**places) if cache.default else "")
        if where and Path(where).is_absolute():
            found.append((cache, Path(where)))
    return found


@dataclass(frozen=True)
class Policy:
    """What one test run may do. Paths are resolved; `writable` starts with the working tree."""

    writable: tuple[Path, ...]
    protected: tuple[Path, ...] = ()  # read-only even inside a writable path: .git, the index, the state directory
    network: bool = True
    hidden: tuple[Path, ...] = ()  # replaced by an empty private directory: $XDG_RUNTIME_DIR, HOME under strict
    # read-only again inside a hidden directory or over the private /tmp: the programs' install prefixes (a
    # virtual environment under /tmp is as much the test command's as one in HOME)
    kept: tuple[Path, ...] = ()


def _inside(path: Path, parent: Path) -> bool:
    return path != parent and path.is_relative_to(parent)


def _tmp_tops(paths: Iterable[Path]) -> list[Path]:
    """The entries of /tmp that hold a path deeper down: shown read-only (the host's) over the private /tmp, so
    that a writable tree under /tmp has read-only neighbours rather than private ones that vanish."""
    return list(dict.fromkeys(TMP / p.relative_to(TMP).parts[0] for p in paths
                              if _inside(p, TMP) and len(p.relative_to(TMP).parts) > 1))


def bwrap_argv(executable: str, policy: Policy, argv: list[str], cwd: Path) -> list[str]:
    """The bubblewrap command line that runs argv in cwd under the policy. Later mounts cover earlier ones: the
    read-only root, a private /dev, /proc and /tmp, the hidden directories, then what may be written, then what
    stays read-only inside it. --die-with-parent and the pid namespace: when the assistant dies, or the command
    ends, nothing it started lives on. No --new-session: the runner already starts it in a session of its own
    with no terminal, and a new session would take it out of the process group the runner kills."""
    args = [executable, "--die-with-parent", "--unshare-pid", *([] if policy.network else ["--unshare-net"]),
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", str(TMP)]
    for top in _tmp_tops(policy.writable):
        args += ["--ro-bind", str(top), str(top)]
    for path in policy.hidden:
        if not any(path == w or _inside(path, w) for w in policy.writable):  # never over what may be written
            args += ["--tmpfs", str(path)]
    for path in policy.kept:
        args += ["--ro-bind-try", str(path), str(path)]
    for path in policy.writable:
        args += ["--bind", str(path), str(path)]
    for path in policy.protected:
        if any(_inside(path, w) for w in policy.writable):
            args += ["--ro-bind-try", str(path), str(path)]
    return [*args, "--setenv", "TMPDIR", str(TMP), "--chdir", str(cwd), "--", *argv]


@dataclass(frozen=True)
class Sandbox:
    """The sandbox of a run: what was asked for (`requested`), what is in force (`mode`: off when none could be
    had, `unavailable` then says why), and what every test run's policy is made of. TestRunner calls `wrap`."""

    requested: str
    mode: str
    backend: str | None = None
    executable: str | None = None
    unavailable: str | None = None
    protected: tuple[Path, ...] = ()  # the index and state directories (the tree's own .git is added per run)
    extra: tuple[Path, ...] = ()  # more writable paths (CODE_ASSISTANT_SANDBOX_WRITABLE)

    @property
    def active(self) -> bool:
        return self.mode != "off"

    def describe(self) -> str:
        """The header's words: what the test command may do."""
        if self.unavailable:
            return f"unavailable ({self.unavailable}); tests run unconfined"
        if not self.active:
            return "off; tests run unconfined"
        network = "network on" if self.mode == "write" else "network off, HOME hidden"
        return f"{self.mode} ({self.backend}): repository + /tmp writable, {network}"

    def record(self) -> dict[str, object]:
        """For the run log and --json."""
        return {"requested": self.requested, "mode": self.mode, "backend": self.backend,
                "network": self.mode != "strict", "home_hidden": self.mode == "strict",
                "unavailable": self.unavailable}

    def policy(self, tree: Path, env: Mapping[str, str], argv: Sequence[str] = ()) -> Policy:
        """The policy of one test run of argv in `tree` with this environment; missing caches of installed tools
        are created first (a bind needs its directory)."""
        tree = tree.resolve()
        writable = [tree]
        for cache, path in cache_dirs(env):
            if _prepare(path, cache.tool, env):
                writable.append(path.resolve())
        writable += [p.resolve() for p in self.extra if p.exists()]
        writable = list(dict.fromkeys(p for p in writable if p == tree or not _inside(p, tree)))
        search_path = env.get("PATH", os.defpath)
        hidden, kept = [], _install_prefixes(search_path, TMP, _programs(argv))
        if env.get("XDG_RUNTIME_DIR"):  # the session's D-Bus and the systemd user manager: ways out of any sandbox
            hidden.append(Path(env["XDG_RUNTIME_DIR"]).resolve())
        home = Path(env.get("HOME") or Path.home()).resolve()
        if self.mode == "strict" and home != Path("/"):
            hidden.append(home)
            kept += _install_prefixes(search_path, home, _programs(argv))  # a venv in HOME, as in /tmp
        protected = [tree / ".git", *(p.resolve() for p in self.protected)]
        return Policy(tuple(writable), tuple(protected), self.mode != "strict", tuple(h for h in hidden if h.is_dir()),
                      tuple(kept))

    def wrap(self, argv: list[str], cwd: Path, env: Mapping[str, str]) -> list[str]:
        """argv as it runs in the sandbox (as it is when the sandbox is off)."""
        if not self.active or self.executable is None:
            return argv
        policy = self.policy(cwd, env, argv)
        logger.debug("sandbox %s: writable %s, read-only %s", self.mode, policy.writable, policy.protected)
        return bwrap_argv(self.executable, policy, argv, cwd.resolve())


def _prepare(path: Path, tool: str, env: Mapping[str, str]) -> bool:
    """True when the cache directory exists (made now if its tool is installed and would make it anyway)."""
    if path.is_dir():
        return True
    if path.exists() or shutil.which(tool, path=env.get("PATH", os.defpath)) is None:
        return False
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        logger.info("cannot create %s for the sandbox: %s", path, exc)
        return False
    return True


def _programs(argv: Sequence[str]) -> list[Path]:
    """The programs a test command starts by path or by name: its first word, and for a shell's `-c` script that
    script's first word (best effort: a script that does not split is left to PATH)."""
    words = list(argv[:1])
    if len(argv) > 2 and Path(argv[0]).name in ("sh", "bash") and argv[1] == "-c":
        try:
            words += shlex.split(argv[2])[:1]
        except ValueError:
            pass
    return [Path(w) for w in words if w]


def _install_prefixes(search_path: str, inside: Path, programs: Iterable[Path] = ()) -> list[Path]:
    """The install prefixes, inside `inside` (HOME under strict, /tmp always), of the PATH's directories and of the
    programs named by path (a virtual environment's bin/python): read-only over the hidden or private directory."""
    places = [Path(entry) for entry in search_path.split(os.pathsep) if entry and Path(entry).is_absolute()]
    places += [program.parent for program in programs if program.is_absolute()]
    prefixes = []
    for place in places:
        path = Path(os.path.abspath(place)) if place.is_symlink() else place.resolve()  # a venv's bin, not its target
        if _inside(path, inside):
            prefixes.append(path.parent if path.name in _BIN_DIRS and path.parent != inside else path)
    return list(dict.fromkeys(p for p in prefixes if p.is_dir()))


def resolve(requested: str, executable: str = "bwrap", *, protected: Iterable[Path] = (),
            writable: Iterable[Path] = ()) -> Sandbox:
    """The sandbox this machine can give for `requested` (off, write, strict). `write` without one goes on
    unconfined (the header says so); `strict` without one is a ConfigError."""
    if requested == "off":
        return Sandbox(requested, "off")
    reason = _unavailable(executable, network=requested != "strict")
    if reason is None:
        return Sandbox(requested, requested, "bubblewrap", shutil.which(executable), None, tuple(protected),
                       tuple(writable))
    if requested == "strict":
        raise ConfigError(f"--sandbox strict: no sandbox on this machine ({reason}); use --sandbox write to run "
                          "the tests unconfined")
    logger.info("no sandbox: %s", reason)  # the header says so, once
    return Sandbox(requested, "off", unavailable=reason)


def _unavailable(executable: str, network: bool) -> str | None:
    """Why bubblewrap cannot confine a test run here (None: it can), found by running one."""
    if not sys.platform.startswith("linux"):
        return "sandbox-exec is not supported yet" if sys.platform == "darwin" else f"no sandbox on {sys.platform}"
    found = shutil.which(executable)
    if found is None:
        return f"{executable} not found; install bubblewrap"
    probe = bwrap_argv(found, Policy((), network=network), ["true"], Path("/"))
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{executable} cannot run: {exc}"
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{executable} cannot create its namespaces: {lines[-1] if lines else f'exit {done.returncode}'}"
    return None
