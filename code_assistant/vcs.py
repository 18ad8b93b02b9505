"""The git seam: the one place git is run (`git`, `try_git`; `untrusted_git` on a tree the user did not make), and
the --branch/--worktree/--commit workflow."""
from __future__ import annotations

import logging
import os
import re
import subprocess
import time
from pathlib import Path

from code_assistant.errors import ConfigError

logger = logging.getLogger(__name__)


class GitError(ConfigError):
    """A git step failed or the repository is not in a state the requested workflow allows."""


# git on a tree the user did not make (an eval's scratch copy, a case's clone, a downloaded package): no
# configuration but ours and the tree's own `.git/config` (which we make: scratch.py drops a shipped one) is read, and
# every setting through which configuration names a program for git to run is emptied. Command-line `-c` wins over
# every file; the system's and the user's files are not read at all.
UNTRUSTED_CONFIG = (
    "core.fsmonitor=false", "core.hooksPath=/dev/null", "core.sshCommand=ssh -o BatchMode=yes",
    "core.gitProxy=", "core.askPass=", "core.pager=cat", "core.editor=true", "core.alternateRefsCommand=",
    "credential.helper=", "diff.external=", "gpg.program=false", "commit.gpgSign=false", "tag.gpgSign=false",
    "uploadpack.packObjectsHook=", "submodule.recurse=false", "fetch.recurseSubmodules=false",
    "protocol.allow=never", "protocol.https.allow=always", "protocol.http.allow=always",
    "protocol.ssh.allow=always", "protocol.file.allow=always", "protocol.ext.allow=never",
    "safe.bareRepository=explicit",
)
# The same in the environment: the system's and the user's files unread, no prompt for a password, the transports of
# UNTRUSTED_CONFIG only (for a subprocess git starts that reads no -c: a remote helper). GIT_* variables of this
# process that move the repository or add configuration (GIT_DIR, GIT_CONFIG_PARAMETERS, ...) are not passed on; the
# user's GIT_SSH_COMMAND is (their key).
UNTRUSTED_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0",
                 "GIT_ALLOW_PROTOCOL": "https:http:ssh:file", "GIT_PROTOCOL_FROM_USER": "0", "GIT_PAGER": "cat"}
_KEPT_GIT_ENV = ("GIT_SSH_COMMAND", "GIT_SSH", "GIT_SSH_VARIANT")


# Settings through which git runs a program, and a harmless value for each. A repository's own configuration (its
# .git/config, config.worktree and the files they include — a tree unpacked from an archive, or a file of the tree that
# the model edited and the configuration includes) decides none of them for the assistant's git: where it sets one,
# git is given the harmless value and then the user's own (system, global), so that the user's settings still hold and
# nothing the repository holds runs outside the sandbox. Hooks never run: a repository's hooks are its code.
_PROGRAM_SETTINGS = tuple((re.compile(pattern, re.IGNORECASE), harmless) for pattern, harmless in (
    (r"core\.fsmonitor", "false"),
    (r"(?:core|sequence)\.editor", "true"),
    (r"core\.pager", "cat"),
    (r"pager\..+", "false"),
    ((r"core\.(?:sshcommand|gitproxy|askpass|alternaterefscommand)|diff\.external|uploadpack\.packobjectshook"
      r"|credential(?:\..+)?\.helper|gpg\.ssh\.defaultkeycommand"), ""),
    (r"gpg(?:\.openpgp)?\.program", "gpg"),
    (r"gpg\.x509\.program", "gpgsm"),
    (r"gpg\.ssh\.program", "ssh-keygen"),
    (r"filter\..+\.(?:clean|smudge|process)", ""),
    (r"filter\..+\.required", "false"),
    (r"diff\..+\.command", "false"),
    (r"diff\..+\.textconv", "cat"),
    (r"merge\..+\.driver", "git merge-file --marker-size=%L %A %O %B"),  # what git does without a driver
    (r"remote\..+\.uploadpack", "git-upload-pack"),
    (r"remote\..+\.receivepack", "git-receive-pack"),
))
_NO_HOOKS = ("-c", "core.hooksPath=/dev/null")
_REPOSITORY_SCOPES = {"local", "worktree"}
_USER_SCOPES = {"system", "global", "command"}


def _harmless(key: str) -> str | None:
    return next((value for pattern, value in _PROGRAM_SETTINGS if pattern.fullmatch(key)), None)


def repository_overrides(listing: str) -> tuple[str, ...]:
    """git's `-c` pairs, from `git config --list --show-scope -z` (records `scope NUL key LF value NUL`): no hook, and
    for every program-running setting the repository's configuration makes, the harmless value, then the user's own
    values of it in order (the last one wins; a list such as credential.helper is emptied, then the user's added)."""
    words = listing.split("\0")
    entries = [(scope, *setting.partition("\n")[::2]) for scope, setting in zip(words[::2], words[1::2], strict=False)]
    repository = [key for scope, key, _ in entries if scope in _REPOSITORY_SCOPES and _harmless(key) is not None]
    pairs: list[str] = []
    for key in dict.fromkeys(repository):
        values = [_harmless(key) or "", *(v for scope, k, v in entries if k == key and scope in _USER_SCOPES)]
        pairs += [word for value in values for word in ("-c", f"{key}={value}")]
    return (*_NO_HOOKS, *pairs)


def _hardened(repo: Path, args: tuple[str, ...], env: dict[str, str] | None) -> list[str]:
    """git's argv for `args` in `repo`: no hook, and none of the repository's program-running settings."""
    try:
        listing = subprocess.run(["git", "config", "--list", "--show-scope", "-z"], cwd=repo, capture_output=True,
                                 text=True, encoding="utf-8", errors="surrogateescape", timeout=30, env=env,
                                 stdin=subprocess.DEVNULL, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        listing = ""
    return ["git", *repository_overrides(listing), *args]


def _run(repo: Path, args: tuple[str, ...], timeout: float,
         env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_hardened(repo, args, env), cwd=repo, capture_output=True, text=True, encoding="utf-8",
                          errors="surrogateescape", timeout=timeout, env=env, stdin=subprocess.DEVNULL, check=False)


def _command(args: tuple[str, ...]) -> tuple[str, ...]:
    """args without the `-c NAME=VALUE` pairs before the subcommand: what an error names."""
    while len(args) > 1 and args[0] == "-c":
        args = args[2:]
    return args


def untrusted_environment() -> dict[str, str]:
    """This process's environment as git on an untrusted tree is given it (UNTRUSTED_ENV)."""
    kept = {k: v for k, v in os.environ.items() if not k.startswith("GIT_") or k in _KEPT_GIT_ENV}
    return {**kept, **UNTRUSTED_ENV}


def untrusted_git(repo: Path, *args: str, check: bool = True, timeout: float = 120) -> str:
    """`git` on a tree the user did not make, hardened (UNTRUSTED_CONFIG, UNTRUSTED_ENV). The caller still puts `--`
    between options and what a case or a package names (a URL, a path)."""
    hardened = tuple(word for setting in UNTRUSTED_CONFIG for word in ("-c", setting))
    return git(repo, *hardened, *args, check=check, timeout=timeout, env=untrusted_environment())


def git(repo: Path, *args: str, check: bool = True, timeout: float = 120, env: dict[str, str] | None = None) -> str:
    """git's stdout; a failing command (or no git at all) is a GitError naming the step, unless check=False."""
    step = " ".join(_command(args)[:2])
    try:
        proc = _run(repo, args, timeout, env)
    except (OSError, subprocess.SubprocessError) as exc:
        raise GitError(f"git {step} could not run: {exc}") from exc
    if check and proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise GitError(f"git {step} failed: {detail[-1] if detail else f'exit {proc.returncode}'}")
    return proc.stdout


def try_git(repo: Path, *args: str, timeout: float = 60) -> str | None:
    """git's stdout, or None when git is missing, fails or times out: for lookups that have a fallback."""
    try:
        proc = _run(repo, args, timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout if proc.returncode == 0 else None


def started_git(repo: Path, *args: str) -> subprocess.Popen[str] | None:
    """git started in the background, its stdout and stderr piped (the caller waits for it or kills it); None when
    git cannot start. For a lookup that runs beside other work and has a fallback."""
    try:
        return subprocess.Popen(_hardened(repo, args, None), cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, encoding="utf-8", errors="surrogateescape", stdin=subprocess.DEVNULL)
    except OSError:
        return None


def is_git_repo(path: Path) -> bool:
    return (try_git(path, "rev-parse", "--is-inside-work-tree") or "").strip() == "true"


def toplevel(repo: Path) -> Path:
    return Path(git(repo, "rev-parse", "--show-toplevel").strip())


def current_branch(repo: Path) -> str:
    return git(repo, "rev-parse", "--abbrev-ref", "HEAD").strip()


def dirty_files(repo: Path) -> set[str]:
    """Paths (relative to repo) with staged, unstaged or untracked changes."""
    out = git(repo, "status", "--porcelain", "-z", "--untracked-files=all", "--", ".")
    prefix = repo.resolve().relative_to(toplevel(repo).resolve()).as_posix()
    paths: set[str] = set()
    entries = out.split("\0")
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            path = entry[3:]
            if entry[0] in "RC":  # a rename carries its source as the next entry
                i += 1
            if prefix not in ("", "."):
                path = path[len(prefix) + 1:] if path.startswith(prefix + "/") else path
            paths.add(path)
        i += 1
    return paths


def default_branch_name(task: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", task.lower()).strip("-")[:40] or "task"
    return f"assistant/{slug}-{time.strftime('%Y%m%d-%H%M%S')}"


def branch_exists(repo: Path, name: str) -> bool:
    return git(repo, "rev-parse", "--verify", "--quiet", f"refs/heads/{name}", check=False).strip() != ""


def create_branch(repo: Path, name: str) -> None:
    if branch_exists(repo, name):
        raise GitError(f"branch {name} already exists; choose another name with --branch NAME")
    git(repo, "switch", "-c", name)


def switch(repo: Path, name: str) -> None:
    git(repo, "switch", name)


def delete_branch(repo: Path, name: str) -> None:
    git(repo, "branch", "-D", name)


def add_worktree(repo: Path, path: Path, branch: str) -> Path:
    if branch_exists(repo, branch):
        raise GitError(f"branch {branch} already exists; choose another name with --branch NAME")
    path.parent.mkdir(parents=True, exist_ok=True)
    git(repo, "worktree", "add", "-b", branch, str(path), "HEAD")
    return path


def remove_worktree(repo: Path, path: Path) -> None:
    git(repo, "worktree", "remove", "--force", str(path))


def commit_paths(repo: Path, paths: list[str], message: str) -> str:
    """Commit exactly these paths (created, modified or deleted) and nothing else that may be staged."""
    if not paths:
        raise GitError("nothing to commit")
    git(repo, "add", "-A", "--", *paths)
    identity = [] if _has_identity(repo) else ["-c", "user.name=code-assistant", "-c",
                                               "user.email=code-assistant@localhost"]
    git(repo, *identity, "commit", "--no-verify", "-q", "-m", message, "--only", "--", *paths)
    return git(repo, "rev-parse", "--short", "HEAD").strip()


def revert(repo: Path, commit: str) -> str:
    """A new commit that takes `commit` back (git revert); a revert git refuses (local changes in its files, a
    conflict) is a GitError and changes nothing. Returns the new commit's short sha."""
    identity = [] if _has_identity(repo) else ["-c", "user.name=code-assistant", "-c",
                                               "user.email=code-assistant@localhost"]
    try:
        git(repo, *identity, "revert", "--no-edit", commit)
    except GitError:
        try_git(repo, "revert", "--abort")
        raise
    return git(repo, "rev-parse", "--short", "HEAD").strip()


def _has_identity(repo: Path) -> bool:
    return bool(git(repo, "config", "user.email", check=False).strip())


def commit_message(task: str, iterations: int, files: list[str]) -> str:
    title = task.strip().splitlines()[0][:68] if task.strip() else "change"
    body = "\n".join(f"- {f}" for f in files)
    return (f"code-assistant: {title}\n\nTask: {task.strip()}\nTests passed on iteration {iterations}.\n\n"
            f"Files:\n{body}\n")


class Workflow:
    """--branch / --worktree / --commit around one run. Without those flags it does nothing (backups only)."""

    def __init__(self, repo: Path, task: str, *, branch: str | None, worktree: bool, commit: bool,
                 allow_dirty: bool, keep_branch: bool, worktrees_dir: Path) -> None:
        self.repo, self.task = repo, task
        self.branch = branch if branch else (default_branch_name(task) if branch is not None or worktree else None)
        self.worktree, self.commit, self.allow_dirty, self.keep_branch = worktree, commit, allow_dirty, keep_branch
        self.worktrees_dir = worktrees_dir
        self.work_repo = repo
        self.original_branch: str | None = None
        self.dirty_at_start: set[str] = set()
        self.created_branch = False
        self.committed: str | None = None  # the full sha of the run's commit, once made

    @property
    def active(self) -> bool:
        return self.branch is not None or self.commit

    def start(self) -> Path:
        """Prepare the branch or worktree; returns the directory the run works in."""
        if not self.active:
            return self.repo
        if not is_git_repo(self.repo):
            raise GitError(f"--branch, --worktree and --commit need a git repository; {self.repo} is not one")
        if self.worktree and self.branch:
            path = self.worktrees_dir / re.sub(r"[^A-Za-z0-9._-]+", "-", self.branch)
            self.work_repo = add_worktree(self.repo, path, self.branch)
            self.created_branch = True
        elif self.branch:
            self.original_branch = current_branch(self.repo)
            create_branch(self.repo, self.branch)
            self.created_branch = True
        self.dirty_at_start = dirty_files(self.work_repo)
        return self.work_repo

    def guard(self, files: list[str]) -> None:
        """Before any write: with --commit, the files the answer touches must not hold the user's pending work."""
        if not self.commit or self.allow_dirty:
            return
        dirty = sorted(set(files) & self.dirty_at_start)
        if dirty:
            raise GitError(f"{', '.join(dirty)} ha{'s' if len(dirty) == 1 else 've'} uncommitted changes and "
                           "--commit is on; commit or stash them first, or pass --allow-dirty")

    def finish(self, *, success: bool, files: list[str], iterations: int) -> list[str]:
        """Commit on success, clean up on failure; returns progress lines for the user."""
        lines: list[str] = []
        if not self.active:
            return lines
        if success and self.commit and files:
            own = [f for f in files if f not in self.dirty_at_start]
            skipped = [f for f in files if f in self.dirty_at_start]
            if own:
                sha = commit_paths(self.work_repo, own, commit_message(self.task, iterations, own))
                self.committed = git(self.work_repo, "rev-parse", "HEAD").strip()
                where = self.branch or current_branch(self.work_repo)
                lines.append(f"[Committed {sha} on {where}: {len(own)} file(s)]")
            if skipped:
                lines.append(f"[Not committed (they held your pending changes): {', '.join(skipped)}]")
            if self.worktree and not skipped:
                remove_worktree(self.repo, self.work_repo)
                lines.append(f"[Worktree removed; the commit is on branch {self.branch}]")
        elif success and self.worktree:
            lines.append(f"[Changes are in the worktree {self.work_repo} on branch {self.branch}]")
        elif not success and self.created_branch and not self.keep_branch:
            if self.worktree:
                remove_worktree(self.repo, self.work_repo)
            elif self.original_branch:
                switch(self.repo, self.original_branch)
            delete_branch(self.repo, str(self.branch))
            lines.append(f"[Branch {self.branch} removed]")
        return lines
