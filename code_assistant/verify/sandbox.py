"""The sandbox the test command runs in: what the model's code may write, read and reach while it is tested.

`write` (the default; `strict` is the same, its old name) lets the test command write only its working tree (whose
`.git`, and the assistant's index and state directory, stay read-only), a private /tmp and the toolchain caches a test
run writes (CACHES); everything else is read-only. HOME is hidden but for what toolchains need (install prefixes,
TOOLCHAINS, git's configuration, what the user shows with --sandbox-show), so a credential store there is unreadable
whatever it is called; the network is off but for loopback unless --network. The environment is the user's less its
secrets (environment.py).

A policy (Policy) is built once per test run and turned into a backend's command line by a pure function: bubblewrap
(unprivileged user, pid and network namespaces: bwrap_argv), else Landlock with a seccomp filter applied by the test
command's own process before it executes (landlock.py: landlock_argv). Either way the command has no capability left,
as root too: it cannot unmount what hides HOME or /proc, remount `.git` writable, or setns into another namespace.
`resolve` finds out which can be had here; with neither, only an explicit `--sandbox off` runs model-written code
unconfined.

The policy is decided before the tests run and frozen (`Sandbox.freeze`): the first test run in a tree (a run's
baseline, the judge's tree before the agent) decides it from what the tree and HOME hold then, and every later run in
that tree, the model's `run` commands included, reuses it. What a test writes — a line `home = $HOME` appended to the
activated venv's pyvenv.cfg, a PATH directory swapped for a link into HOME, an `.envrc` or a toolchain file — cannot
widen the next iteration's sandbox; and the pyvenv.cfg files the policy read inside the tree are read-only to the
tests, so the tree keeps them byte for byte.

Every process a test starts ends with the command, `setsid` daemons and double forks included: bubblewrap's PID
namespace (its pid 1 takes every process of the namespace with it when the command ends, and --die-with-parent ends
it with the assistant), Landlock's supervisor, a child subreaper that kills what it adopts (landlock.py says why not
a PID namespace or a cgroup there).
"""
from __future__ import annotations

import contextlib
import logging
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path

from code_assistant.errors import ConfigError
from code_assistant.settings import SandboxMode
from code_assistant.verify import landlock
from code_assistant.verify.environment import Environment, without_secrets

__all__ = ["CACHES", "TOOLCHAINS", "Backend", "Cache", "Policy", "Sandbox", "bwrap_argv", "cache_dirs", "resolve"]

logger = logging.getLogger(__name__)

TMP = Path("/tmp")
PROBE_TIMEOUT_S = 10.0  # creating the namespaces takes milliseconds; a probe that hangs means no sandbox
# Install prefixes of the programs on PATH: a PATH entry named so is a prefix's bin directory (~/.local/bin,
# ~/.pyenv/shims, a virtualenv's bin), and the prefix is what its programs need (their libraries, their Python).
_BIN_DIRS = ("bin", "shims")
# What of such a prefix in HOME its programs need: never the whole of it (~/.cargo holds credentials.toml, ~/.local
# an application's data), and all of it only for a virtual environment (pyvenv.cfg).
_PREFIX_PARTS = ("bin", "shims", "lib", "lib64", "libexec", "include", "versions", "plugins")
# Toolchains that live in HOME, shown read-only over the hidden HOME when they exist: their programs must run.
TOOLCHAINS = (".pyenv", ".cargo/bin", ".rustup", ".nvm", "go/bin", ".local/bin", ".local/lib", ".local/share/uv/python",
              ".volta", ".bun/bin", ".deno/bin", ".sdkman/candidates", ".asdf")
GIT_CONFIG = (".gitconfig", ".config/git")  # read-only: git inside a test keeps the user's name and settings
# The machine's own secrets, which root reads without any capability: password hashes and the SSH host keys. Hidden
# from every test run (an empty file over each), so a test run as root cannot print them into the output a fix
# request shows the model.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/ssh/ssh_host_*_key")
# The kernel-wide parts of /proc, read-only over the sandbox's own /proc (runc's list): root owns them, so even with no
# capability a test run as root would write them (kernel.core_pattern = '|program' runs that program as root outside
# at the next crash). bubblewrap's own cover of /proc/sys is skipped: it tests whether the directory is writable, and
# procfs says it never is, while its files are.
PROC_READ_ONLY = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


class Backend(StrEnum):
    BUBBLEWRAP = "bubblewrap"
    LANDLOCK = "landlock"


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
    Cache(name="Go build cache", env="GOCACHE", default="{cache}/go-build", tool="go"),  # `go env GOCACHE`
    Cache(name="Go module cache", env="GOMODCACHE", default="{gopath}/pkg/mod", tool="go"),  # `go env GOMODCACHE`
    # `npm config get cache`; npm's logs go there
    Cache(name="npm cache", env="npm_config_cache", default="{home}/.npm", tool="npm"),
    Cache(name="pip cache", env="PIP_CACHE_DIR", default="{cache}/pip", tool="pip"),  # `pip cache dir`
    Cache(name="uv cache", env="UV_CACHE_DIR", default="{cache}/uv", tool="uv"),  # `uv run pytest` writes it
    Cache(name="cargo registry", env="CARGO_HOME", default="{cargo}/registry", tool="cargo"),  # downloaded crates
    Cache(name="cargo git", env="CARGO_HOME", default="{cargo}/git", tool="cargo"),  # git dependencies
    # only when moved out of the repository
    Cache(name="cargo target", env="CARGO_TARGET_DIR", default=None, tool="cargo"),
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
    network: bool = False
    hidden: tuple[Path, ...] = ()  # replaced by an empty private directory (a file: by an empty one): HOME,
    #                                  $XDG_RUNTIME_DIR, the machine's password hashes and SSH host keys
    # read-only again inside a hidden directory or over the private /tmp: the programs' install prefixes (a
    # virtual environment under /tmp is as much the test command's as one in HOME), toolchains, git's configuration
    # and what the user shows
    kept: tuple[Path, ...] = ()
    # protected paths inside a writable one that do not exist yet (a tree with no .git): made read-only and empty for
    # the run, so that a test cannot create them (a .git/config with core.fsmonitor runs at the user's next git
    # status, or at a shell prompt that shows the branch); the empty directory left is removed after the run
    absent: tuple[Path, ...] = ()
    hidden_files: tuple[Path, ...] = ()  # those of `hidden` that are files (SYSTEM_SECRETS)


def _inside(path: Path, parent: Path) -> bool:
    return path != parent and path.is_relative_to(parent)


def _tmp_tops(paths: Iterable[Path]) -> list[Path]:
    """The entries of /tmp that hold a path deeper down: shown read-only (the host's) over the private /tmp, so
    that a writable tree under /tmp has read-only neighbours rather than private ones that vanish."""
    return list(dict.fromkeys(TMP / p.relative_to(TMP).parts[0] for p in paths
                              if _inside(p, TMP) and len(p.relative_to(TMP).parts) > 1))


def bwrap_argv(executable: str, policy: Policy, argv: list[str], cwd: Path) -> list[str]:
    """The bubblewrap command line that runs argv in cwd under the policy. Later mounts cover earlier ones: the
    read-only root, a private /dev, /proc (its kernel-wide parts read-only) and /tmp, the hidden directories, then
    what stays readable in them, then what may be written, then what stays read-only inside it. --die-with-parent and
    the pid namespace: when the assistant dies, or the command ends, nothing it started lives on, and no process
    outside (the assistant, with its key in /proc/PID/environ) can be seen. No --new-session: the runner already
    starts it in a session of its own with no terminal, and a new session would take it out of the process group the
    runner kills. --cap-drop ALL: run as root, bubblewrap makes no user namespace and would leave the command every
    capability (umount the tmpfs over HOME, remount .git, setns into the host's network). It empties the effective,
    permitted, inheritable and ambient sets; the bounding set stays, but under PR_SET_NO_NEW_PRIVS (bubblewrap always
    sets it) and on nosuid mounts no exec gains anything from it. A nested user namespace has capabilities over its
    own mounts only, and the sandbox's mounts are locked in it (tests/test_sandbox_holds_as_root.py tries both)."""
    args = [executable, "--die-with-parent", "--cap-drop", "ALL", "--unshare-pid",
            *([] if policy.network else ["--unshare-net"]),
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in PROC_READ_ONLY:
        args += ["--ro-bind-try", path, path]
    args += ["--tmpfs", str(TMP)]
    for top in _tmp_tops([*policy.writable, *policy.hidden]):
        args += ["--ro-bind", str(top), str(top)]
    for path in policy.hidden:
        if not any(path == w or _inside(path, w) for w in policy.writable):  # never over what may be written
            args += ["--tmpfs", str(path)] if path not in policy.hidden_files else ["--ro-bind", "/dev/null", str(path)]
    for path in policy.kept:
        args += ["--ro-bind-try", str(path), str(path)]
    for path in policy.writable:
        args += ["--bind", str(path), str(path)]
    for path in policy.protected:
        if any(_inside(path, w) for w in policy.writable):
            if path in policy.absent:
                args += ["--tmpfs", str(path), "--remount-ro", str(path)]
            else:
                args += ["--ro-bind-try", str(path), str(path)]
    return [*args, "--setenv", "TMPDIR", str(TMP), "--chdir", str(cwd), "--", *argv]


@dataclass(frozen=True)
class Sandbox:
    """The sandbox of a run: what was asked for (`requested`), what is in force (`mode`, `backend`; `unavailable`
    says why bubblewrap could not be had when Landlock stands in), and what every test run's policy is made of.
    TestRunner calls `environment` and `confined`."""

    requested: SandboxMode
    mode: SandboxMode
    backend: Backend | None = None
    executable: str | None = None  # bwrap; for Landlock the Python that applies the ruleset and executes the command
    unavailable: str | None = None
    protected: tuple[Path, ...] = ()  # the index and state directories (the tree's own .git is added per run)
    extra: tuple[Path, ...] = ()  # more writable paths (CODE_ASSISTANT_SANDBOX_WRITABLE)
    network: bool = False  # --network
    shown: tuple[Path, ...] = ()  # --sandbox-show: read-only over the hidden HOME
    passed_env: tuple[str, ...] = ()  # --pass-env: secret-looking variables the user lets through
    landlock_abi: int | None = None
    held_back: tuple[str, ...] = ()  # the variables of this process kept from every test run (names only)
    # each tree's policy as decided at its first test run (freeze); dataclasses.replace starts a new sandbox afresh
    frozen: dict[Path, Policy] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def active(self) -> bool:
        return self.mode != SandboxMode.OFF

    def environment(self, env: Mapping[str, str]) -> Environment:
        """The test command's environment: `env` less its secrets, but for what the user passes by name."""
        return without_secrets(env, self.passed_env)

    def describe(self) -> str:
        """The header's words: what the test command may do."""
        count = len(self.held_back)
        held = f"{count} secret variable{'' if count == 1 else 's'} held back"
        if not self.active:
            return f"off; tests run unconfined (HOME readable, network on), {held}"
        if self.backend == Backend.LANDLOCK:
            network = "network on" if self.network else "network off (loopback too)"
            return (f"{self.mode} (landlock ABI {self.landlock_abi}, no bubblewrap: {self.unavailable}): repository "
                    f"+ a private TMPDIR writable, HOME hidden (toolchains kept), {network}, {held}")
        network = "network on" if self.network else "network off"
        return f"{self.mode} ({self.backend}): repository + /tmp writable, HOME hidden (toolchains kept), {network}, {held}"

    def record(self) -> dict[str, object]:
        """For the run log and --json: what was in force, and the names (never the values) of what was held back."""
        return {"requested": str(self.requested), "mode": str(self.mode),
                "backend": str(self.backend) if self.backend else None,
                "network": self.network or not self.active, "home_hidden": self.active,
                "unavailable": self.unavailable, "held_back": list(self.held_back)}

    def policy(self, tree: Path, env: Mapping[str, str], argv: Sequence[str] = (), *,
               read_only: bool = False, reports: Sequence[Path] = ()) -> Policy:
        """The policy of one test run of argv in `tree` with this environment; missing caches of installed tools
        are created first (a bind needs its directory). `read_only`: the tree may not be written either (a command
        the model runs to look around: its writes fail, and the tree stays as it is). `reports`: the run's private
        report directories (verify/reports.py), writable for this run only."""
        tree = tree.resolve()
        writable = [] if read_only else [tree]
        for cache, path in cache_dirs(env):
            if _prepare(path, cache.tool, env):
                writable.append(path.resolve())
        writable += [p.resolve() for p in self.extra if p.exists()]
        writable += [p.resolve() for p in reports]
        writable = list(dict.fromkeys(p for p in writable if p == tree or not _inside(p, tree)))
        search_path = env.get("PATH", os.defpath)
        programs = _programs(argv)
        hidden = []
        if env.get("XDG_RUNTIME_DIR"):  # the session's D-Bus and the systemd user manager: ways out of any sandbox
            hidden.append(Path(env["XDG_RUNTIME_DIR"]).resolve())
        home = Path(env.get("HOME") or Path.home()).resolve()
        kept = _install_prefixes(search_path, TMP, programs)
        if home != Path("/"):
            hidden.append(home)
            kept += _install_prefixes(search_path, home, programs, whole=False)
            kept += [home / name for name in TOOLCHAINS]
            config = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
            kept += [home / GIT_CONFIG[0], config / "git"]
        kept += _venv_bases(search_path, programs, (home, TMP))
        kept += [p.resolve() for p in self.shown]
        kept += [tree] if read_only else []  # readable, over a private /tmp or a hidden HOME it may lie in
        kept = [p for p in dict.fromkeys(kept) if _exists(p)]
        protected = [tree / ".git", *(p.resolve() for p in self.protected)]
        protected += [config for config in _venv_configs(search_path, programs)  # what the policy read stays
                      if any(_inside(config, w) for w in writable) and config not in protected]
        absent = [p for p in protected if not os.path.lexists(p) and any(_inside(p, w) for w in writable)]
        secrets = system_secrets()
        return Policy(writable=tuple(writable), protected=tuple(protected), network=self.network,
                      hidden=(*(h for h in hidden if h.is_dir()), *secrets), kept=tuple(kept), absent=tuple(absent),
                      hidden_files=secrets)

    def freeze(self, tree: Path, env: Mapping[str, str], argv: Sequence[str] = ()) -> Policy:
        """The policy of every test run in `tree` from now on: decided at the first call, from what the tree, HOME
        and `env` hold then (call it before anything the model wrote runs), then reused whatever a test writes."""
        tree = tree.resolve()
        if tree not in self.frozen:
            self.frozen[tree] = self.policy(tree, env, argv)
            logger.info("sandbox policy for %s decided and frozen", tree)
        return self.frozen[tree]

    def frozen_policy(self, tree: Path, env: Mapping[str, str], argv: Sequence[str] = (), *,
                      read_only: bool = False) -> Policy:
        """The tree's frozen policy (freeze), for a run that may write the tree or, `read_only`, not."""
        policy = self.freeze(tree, env, argv)
        return read_only_policy(policy, tree.resolve()) if read_only else policy

    @contextlib.contextmanager
    def confined(self, argv: list[str], cwd: Path, env: Mapping[str, str], *, read_only: bool = False,
                 reports: Sequence[Path] = ()) -> Iterator[tuple[list[str], dict[str, str]]]:
        """argv and its environment as they run in the sandbox (as they are when the sandbox is off), for as long as
        the run lasts: Landlock's private TMPDIR is removed after it. `read_only`: the tree too is read-only;
        `reports`: the run's report directories, writable."""
        if not self.active or self.executable is None:
            if read_only:
                raise ValueError("a read-only run needs the sandbox")
            yield argv, dict(env)
            return
        policy = self.frozen_policy(cwd, env, argv, read_only=read_only)
        if reports:  # this run's private report directories (verify/reports.py): writable for this run only
            policy = replace(policy, writable=(*policy.writable, *(p.resolve() for p in reports)))
        logger.debug("sandbox %s (%s): writable %s, read-only %s, hidden %s, kept %s", self.mode, self.backend,
                     policy.writable, policy.protected, policy.hidden, policy.kept)
        if self.backend == Backend.BUBBLEWRAP:
            try:
                yield bwrap_argv(self.executable, policy, argv, cwd.resolve()), dict(env)
            finally:
                for path in policy.absent:  # the mount point bubblewrap made, empty: gone, as it was
                    with contextlib.suppress(OSError):
                        path.rmdir()
            return
        private = Path(tempfile.mkdtemp(prefix="ca-sandbox-tmp-")).resolve()  # no link on the way: a rule on it
        try:
            yield (landlock.landlock_argv(self.executable, policy_for_landlock(policy, private), argv),
                   {**env, "TMPDIR": str(private)})
        finally:
            shutil.rmtree(private, ignore_errors=True)


def read_only_policy(policy: Policy, tree: Path) -> Policy:
    """`policy` with the tree read-only too (readable, over a private /tmp or a hidden HOME it may lie in)."""
    writable = tuple(p for p in policy.writable if p != tree)
    return replace(policy, writable=writable, kept=(*policy.kept, tree),
                   absent=tuple(p for p in policy.absent if any(_inside(p, w) for w in writable)))


def system_secrets() -> tuple[Path, ...]:
    """The files of SYSTEM_SECRETS this machine has."""
    found: list[Path] = []
    for pattern in SYSTEM_SECRETS:
        found += sorted(Path("/").glob(pattern.lstrip("/"))) if "*" in pattern else [Path(pattern)]
    return tuple(path for path in found if path.is_file())


def policy_for_landlock(policy: Policy, private_tmp: Path) -> landlock.Rules:
    """The same policy as Landlock rules: Landlock only allows, so HOME and /tmp are not readable (rather than
    empty), the private TMPDIR is a directory of its own, and a protected path inside a writable one is carved out
    by allowing the writable path's other entries (its top level then takes no new entries)."""
    return landlock.Rules(writable=policy.writable, protected=policy.protected, readable=policy.kept,
                          hidden=(*policy.hidden, TMP), private_tmp=private_tmp, network=policy.network)


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


def _places(search_path: str, programs: Iterable[Path]) -> list[Path]:
    """Where the test command's programs come from: the PATH's absolute directories, and the directories of the
    programs it names by path."""
    places = [Path(entry) for entry in search_path.split(os.pathsep) if entry and Path(entry).is_absolute()]
    return places + [program.parent for program in programs if program.is_absolute()]


def _install_prefixes(search_path: str, inside: Path, programs: Iterable[Path] = (), whole: bool = True) -> list[Path]:
    """The install prefixes, inside `inside` (HOME, and /tmp), of the PATH's directories and of the programs named
    by path (a virtual environment's bin/python): read-only over the hidden or private directory. `whole` (/tmp):
    each prefix whole; else (HOME) a virtual environment whole, another prefix only for the parts its programs need
    (_PREFIX_PARTS)."""
    prefixes: list[Path] = []
    for place in _places(search_path, programs):
        try:  # a venv's bin, not its target
            path = Path(os.path.abspath(place)) if place.is_symlink() else place.resolve()
        except OSError:  # a PATH entry this user cannot see (another user's HOME): nothing to keep
            continue
        if not _inside(path, inside):
            continue
        prefix = path.parent if path.name in _BIN_DIRS and path.parent != inside else None
        if prefix is None:
            prefixes.append(path)
        elif whole or (prefix / "pyvenv.cfg").is_file():
            prefixes.append(prefix)
        else:
            prefixes += [prefix / part for part in _PREFIX_PARTS]
    return list(dict.fromkeys(p for p in prefixes if _exists(p)))


def _exists(path: Path) -> bool:
    try:
        return path.exists()
    except OSError:
        return False


def _venv_configs(search_path: str, programs: Iterable[Path]) -> list[Path]:
    """The pyvenv.cfg files of the virtual environments the test command's programs come from."""
    configs = [Path(os.path.abspath(place)).parent / "pyvenv.cfg" for place in _places(search_path, programs)]
    found = []
    for config in dict.fromkeys(configs):
        try:
            if config.is_file():
                found.append(config)
        except OSError:  # in a directory this user cannot see (root's HOME on PATH)
            continue
    return found


def _venv_bases(search_path: str, programs: Iterable[Path], hidden: Iterable[Path]) -> list[Path]:
    """The Python a virtual environment was made from (its pyvenv.cfg's `home`), when it lies in a hidden place: a
    venv beside the repository whose python links into ~/.pyenv or uv's ~/.local/share/uv/python."""
    hidden = list(hidden)
    bases: list[Path] = []
    for config in _venv_configs(search_path, programs):
        try:
            lines = config.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition("=")
            if name.strip() != "home" or not value.strip():
                continue
            base = Path(value.strip()).resolve()
            base = base.parent if base.name in _BIN_DIRS else base
            if any(base == h or _inside(base, h) for h in hidden):
                bases.append(base)
    return bases


def resolve(requested: str | SandboxMode, executable: str = "bwrap", *, protected: Iterable[Path] = (),
            writable: Iterable[Path] = (), network: bool = False, shown: Iterable[Path] = (),
            passed_env: Iterable[str] = (), landlock_allowed: bool = True) -> Sandbox:
    """The sandbox this machine can give for `requested`: bubblewrap, else Landlock (landlock_allowed), else a
    ConfigError naming what to install or pass; `off` only when asked for. The secrets of this process's
    environment are held back."""
    requested = SandboxMode(requested)
    passed_env = tuple(passed_env)
    held = without_secrets(os.environ, passed_env).held_back
    common = {"protected": tuple(protected), "extra": tuple(writable), "network": network,
              "shown": tuple(shown), "passed_env": passed_env, "held_back": held}
    if requested == SandboxMode.OFF:
        return Sandbox(requested=requested, mode=SandboxMode.OFF, network=True, passed_env=passed_env, held_back=held)
    reason = _unavailable(executable, network=network)
    if reason is None:
        return Sandbox(requested=requested, mode=SandboxMode.WRITE, backend=Backend.BUBBLEWRAP,
                       executable=shutil.which(executable), **common)
    abi = landlock.abi_version() if landlock_allowed else None
    if abi is not None and abi >= landlock.MIN_ABI:
        logger.info("no bubblewrap (%s): Landlock ABI %d stands in", reason, abi)
        return Sandbox(requested=requested, mode=SandboxMode.WRITE, backend=Backend.LANDLOCK, executable=sys.executable,
                       unavailable=reason, landlock_abi=abi, **common)
    lock = "Landlock: not in this kernel" if abi is None else f"Landlock ABI {abi} is too old (needs {landlock.MIN_ABI})"
    raise ConfigError(f"no sandbox for the tests on this machine ({reason}; {lock}): install bubblewrap, or pass "
                      "--sandbox off to run the model's code unconfined")


def _unavailable(executable: str, network: bool) -> str | None:
    """Why bubblewrap cannot confine a test run here (None: it can), found by running one."""
    if not sys.platform.startswith("linux"):
        return "sandbox-exec is not supported yet" if sys.platform == "darwin" else f"no sandbox on {sys.platform}"
    found = shutil.which(executable)
    if found is None:
        return f"{executable} not found"
    probe = bwrap_argv(found, Policy(writable=(), network=network), ["true"], Path("/"))
    try:
        done = subprocess.run(probe, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{executable} cannot run: {exc}"
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"{executable} cannot create its namespaces: {lines[-1] if lines else f'exit {done.returncode}'}"
    return None
