"""The read gate: the one check every path passes before the assistant reads a file for the model (a frame, a file a
request shows, a tool's argument, an MCP `read`, a citation, the owner's instructions, the index) or writes one for it.

A path is taken as the repository-relative name the model, a test's output or an index gave. It is refused when it is
absolute or climbs with `..`, when it resolves — every symlink followed, the test run's own included — outside the
tree, into `.git`, or into the assistant's own index and state; and, to be read, when it is a secret file by name
(SECRET_FILES: one table) or by content (`redact.looks_like_secret_file`, and the table's entries that are secret only
when they hold a credential). A read opens the resolved file without following a link and checks again, on the open
file, where it is: a link swapped in meanwhile is not followed out of the tree. A refusal is a `Refused` whose reason
is a value and whose message is written for the model.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import stat
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING

from code_assistant import redact
from code_assistant.languages import IGNORED_DIRS

if TYPE_CHECKING:
    from code_assistant.settings import Settings

logger = logging.getLogger(__name__)

MAX_READ_BYTES = 2 * 1024 * 1024  # a file larger than this is not read (a data dump, a bundle)
BINARY_PROBE = 8192  # a NUL byte in this many first bytes: binary
SECRET_FILES_READ = 200  # at most this many of a repository's secret files are read for their values to be masked
_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_O_PATH = getattr(os, "O_PATH", 0)  # Linux


class Refusal(StrEnum):
    """Why the gate refused a path."""

    INVALID = "invalid"
    ABSOLUTE = "absolute"
    PARENT = "parent"  # climbs with ..
    OUTSIDE = "outside"  # resolves outside the tree (through a link)
    GIT = "git"
    PRIVATE = "private"  # the assistant's own index, state or logs
    SECRET = "secret"
    MISSING = "missing"
    DIRECTORY = "directory"
    NOT_A_FILE = "not_a_file"  # a FIFO, a socket, a device
    BINARY = "binary"
    TOO_LARGE = "too_large"
    UNREADABLE = "unreadable"


class Refused(ValueError):
    """A path the assistant will not read (or write) for the model; the message says why, for the model."""

    def __init__(self, reason: Refusal, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class SecretFile:
    """A kind of file that holds credentials: `name` matches its repository-relative path (anchored after a `/`);
    with `holds`, it is secret only when its text matches that too."""

    what: str
    name: re.Pattern[str]
    holds: re.Pattern[str] | None = None


def _secret(what: str, name: str, holds: str | None = None) -> SecretFile:
    return SecretFile(what, re.compile(rf"(?:^|/)(?:{name})$", re.IGNORECASE),
                      re.compile(holds, re.IGNORECASE | re.MULTILINE) if holds else None)


SECRET_FILES: tuple[SecretFile, ...] = (
    _secret("an environment file", r"\.env(?!\.(?:example|sample|template)$)(?:\.[^/]*)?|\.envrc"),
    _secret("a key or certificate store", r"[^/]*\.(?:pem|key|p12|pfx|jks|keystore|ppk)"),
    _secret("an SSH key", r"id_(?:rsa|dsa|ecdsa|ed25519)[^/]*"),
    _secret("a directory of keys", r"\.(?:ssh|gnupg|aws|azure)/.+"),
    _secret("a login file", r"[._]netrc|\.git-credentials|\.pgpass|\.htpasswd|\.vault-token"),
    _secret("a credentials file", r"credentials(?:\.(?:json|ya?ml|toml|csv))?|secrets?\.(?:json|ya?ml|toml)"),
    _secret("a client configuration with logins", r"\.docker/config\.json|\.kube/config|\.config/gh/hosts\.ya?ml"),
    _secret("Terraform state", r"[^/]*\.tfstate(?:\.backup)?"),
    _secret("an npm or Yarn configuration with a token", r"\.npmrc|\.yarnrc(?:\.ya?ml)?",
            holds=r"_auth|_password|authtoken|npmauth|^\s*password\s*[:=]"),
    _secret("a PyPI configuration with a password", r"\.pypirc", holds=r"^\s*password\s*[:=]"),
    _secret("a Docker configuration with logins", r"[^/]*config\.json",
            holds=r'"(?:auth|identitytoken|registrytoken)"\s*:\s*"[^"]'),
    _secret("a Kubernetes configuration with a key", r"config|[^/]*kubeconfig[^/]*|[^/]*\.ya?ml",
            holds=r"^\s*(?:client-key-data|client-certificate-data)\s*:\s*\S{16,}"),
)


_BY_NAME = re.compile("|".join(kind.name.pattern for kind in SECRET_FILES if kind.holds is None), re.IGNORECASE)


def secret_name(rel: str) -> bool:
    """A file that holds credentials by its name alone (SECRET_FILES without `holds`): never indexed, listed or read."""
    return _BY_NAME.search(rel.replace(os.sep, "/")) is not None


def secret_file(rel: str, text: str) -> bool:
    """A file that holds credentials, by its name, by its name and what it holds, or by a live-looking credential or
    a private key anywhere in its text."""
    rel = rel.replace(os.sep, "/")
    return any(kind.name.search(rel) and (kind.holds is None or kind.holds.search(text)) for kind in SECRET_FILES) \
        or redact.looks_like_secret_file(text)


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@dataclass(frozen=True)
class Gate:
    """The gate of one tree: `root`, and the assistant's own directories (`private`: the index, the state, the run
    logs) that are never read nor written for the model even where they lie inside it."""

    root: Path
    private: tuple[Path, ...] = field(default=())
    _judged: dict[tuple[str, int, int, int, int], bool] = field(default_factory=dict, init=False, repr=False,
                                                                compare=False)
    """(path, inode, size, mtime, bytes read) -> whether the text is a secret's: a scan over the tree (grep) judges
    each version of a file once."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(os.path.realpath(self.root)))
        object.__setattr__(self, "private", tuple(Path(os.path.realpath(p)) for p in self.private))

    @classmethod
    def of(cls, settings: Settings) -> Gate:
        """The gate of the settings' repository, its index, state and run logs kept out."""
        return cls(settings.repo, (settings.index_path, settings.state_path, settings.runs_dir))

    # ----- where a path leads -----------------------------------------------------------------------------------------
    def place(self, path: str | os.PathLike[str]) -> Path:
        """The real path a repository-relative path leads to, every link followed, when it lies in the tree outside
        .git and the assistant's own directories; it need not exist (an edit may create it). Else Refused."""
        return Path(self._where(str(path))[1])

    def _where(self, given: str) -> tuple[str, str]:
        raw = given.strip()
        if not raw or "\x00" in raw:
            raise Refused(Refusal.INVALID, f"invalid file path {given!r}: give a path relative to the repository root")
        if raw.startswith(("/", "~")) or os.path.isabs(raw):
            hint = ""
            real = os.path.realpath(os.path.expanduser(raw))
            if _inside(real, str(self.root)) and real != str(self.root):
                hint = f" (did you mean {os.path.relpath(real, self.root)!r}?)"
            raise Refused(Refusal.ABSOLUTE, f"absolute path {raw!r} refused: use a path relative to the repository "
                                            f"root{hint}")
        parts = raw.replace(os.sep, "/").split("/")
        if ".." in parts:
            raise Refused(Refusal.PARENT, f"path {raw!r} refused: '..' may not be used; give a path inside the "
                                          "repository")
        if any(p.lower() == ".git" for p in parts):
            raise Refused(Refusal.GIT, f"path {raw!r} refused: files under .git/ are not shown and never edited")
        real = _real_path(os.path.join(self.root, raw))
        return self._checked(raw, real), real

    def _checked(self, raw: str, real: str) -> str:
        """The repository-relative form of a real path, when it lies where the model may look."""
        root = str(self.root)
        if not _inside(real, root) or real == root:
            raise Refused(Refusal.OUTSIDE, f"path {raw!r} refused: it resolves (through a symlink) outside the "
                                           "repository")
        rel = real[len(root.rstrip("/")) + 1:].replace(os.sep, "/")
        if any(p.lower() == ".git" for p in rel.split("/")):
            raise Refused(Refusal.GIT, f"path {raw!r} refused: it resolves into .git/, which is not shown and never "
                                       "edited")
        if any(_inside(real, str(own)) for own in self.private):
            raise Refused(Refusal.PRIVATE, f"path {raw!r} refused: it is inside the assistant's own data directory")
        return rel

    # ----- what may be shown ------------------------------------------------------------------------------------------
    def admit(self, path: str | os.PathLike[str]) -> str:
        """The repository-relative path of the file behind `path` (a link inside the tree: its target's), when it is
        a file the model may be shown by its name: placed as `place` says, and no secret file by name. Else
        Refused."""
        raw = str(path).strip()
        rel, real = self._where(raw)
        if secret_name(rel) or (raw != rel and secret_name(raw)):
            raise Refused(Refusal.SECRET, f"{rel}: a file that may hold secrets is never shown")
        try:
            mode = os.stat(real).st_mode
        except OSError:
            raise Refused(Refusal.MISSING, f"{rel}: no such file in the repository") from None
        if stat.S_ISDIR(mode):
            raise Refused(Refusal.DIRECTORY, f"{rel} is a directory")
        if not stat.S_ISREG(mode):
            raise Refused(Refusal.NOT_A_FILE, f"{rel} is not a regular file")
        return rel

    def admits(self, path: str | os.PathLike[str]) -> bool:
        """Whether `admit` lets the path through."""
        try:
            self.admit(path)
        except Refused:
            return False
        return True

    def read(self, path: str | os.PathLike[str], *, max_bytes: int | None = MAX_READ_BYTES, head: bool = False,
             judge: bool = True) -> str:
        """The text of a file the model may be shown (`admit`), read through a descriptor that is checked to be that
        file still, and refused when its text is a secret's. Larger than `max_bytes`: refused, or with `head` its
        first `max_bytes` only. Binary or unreadable: refused. Undecodable bytes are replaced. `judge=False`: what it
        holds is not judged yet — for a scan that shows a file's lines only where it finds a match, and asks `shows`
        of that file first (judging every file a grep passes over cost a cold grep five times its time)."""
        rel = self.admit(path)
        real = os.path.join(self.root, rel)
        try:
            fd = os.open(real, _FLAGS)
        except OSError as exc:
            reason = Refusal.OUTSIDE if exc.errno == errno.ELOOP else Refusal.UNREADABLE
            raise Refused(reason, f"{rel} could not be read (it changed while it was opened)") from None
        try:
            opened = _opened_path(fd)
            if opened is not None:
                self._checked(rel, opened)
                if opened != real:
                    raise Refused(Refusal.OUTSIDE, f"{rel} could not be read (it changed while it was opened)")
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise Refused(Refusal.NOT_A_FILE, f"{rel} is not a regular file")
            if max_bytes is not None and info.st_size > max_bytes and not head:
                raise Refused(Refusal.TOO_LARGE, f"{rel} is too large to show ({info.st_size} bytes)")
            data = _read_all(fd, max_bytes)
            version = (rel, info.st_ino, info.st_size, info.st_mtime_ns, len(data))
        except OSError:
            raise Refused(Refusal.UNREADABLE, f"{rel} could not be read") from None
        finally:
            os.close(fd)
        if b"\0" in data[:BINARY_PROBE]:
            raise Refused(Refusal.BINARY, f"{rel} is binary")
        text = data.decode("utf-8", errors="replace")
        if judge and not self.shows(rel, text, version):
            raise Refused(Refusal.SECRET, f"{rel}: a file that may hold secrets is never shown")
        return text

    def shows(self, rel: str, text: str, version: tuple[str, int, int, int, int] | None = None) -> bool:
        """Whether a file `admit` let through, read as `text`, may be shown: no secret by what it holds. `version`
        (path, inode, size, mtime, bytes read): a file judged once per version."""
        if version is None:
            return not secret_file(rel, text)
        if (secret := self._judged.get(version)) is None:
            secret = self._judged[version] = secret_file(rel, text)
        return not secret

    def secret_texts(self) -> dict[str, str]:
        """The repository's secret files by SECRET_FILES (by name; with `holds`, those holding it), ignored by git or
        not, and what each holds: what the gate never shows, for the redactor to mask wherever else it turns up (a
        test's output, `run cat .env`, a diff). Every directory is searched but .git, the assistant's own and those
        the index never enters (dependencies, virtualenvs, caches: languages.IGNORED_DIRS); links are not followed;
        at most SECRET_FILES_READ files of at most MAX_READ_BYTES. A file secret by what it holds alone (a key in a
        config.py) is not among them: a credential that makes it so has a shape the redactor masks already."""
        found: dict[str, str] = {}
        root = str(self.root)
        for folder, dirs, files in os.walk(root):
            dirs[:] = sorted(d for d in dirs if d not in IGNORED_DIRS
                             and not any(_inside(os.path.join(folder, d), str(own)) for own in self.private)
                             and not os.path.isfile(os.path.join(folder, d, "pyvenv.cfg")))
            for name in sorted(files):
                rel = os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/")
                if not any(kind.name.search(rel) for kind in SECRET_FILES):
                    continue
                text = self._secret_text(rel)
                if text is not None and any(kind.name.search(rel) and (kind.holds is None or kind.holds.search(text))
                                            for kind in SECRET_FILES):
                    found[rel] = text
                    if len(found) >= SECRET_FILES_READ:
                        logger.warning("more than %d secret files in %s: the rest are not masked by value",
                                       SECRET_FILES_READ, root)
                        return found
        return found

    def _secret_text(self, rel: str) -> str | None:
        """A secret file's text, opened without following a link (None: a link, not a regular file, binary,
        unreadable)."""
        try:
            fd = os.open(os.path.join(self.root, rel), _FLAGS)
        except OSError:
            return None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = _read_all(fd, MAX_READ_BYTES)
        except OSError:
            return None
        finally:
            os.close(fd)
        return None if b"\0" in data[:BINARY_PROBE] else data.decode("utf-8", errors="replace")

    def text(self, path: str | os.PathLike[str], *, max_bytes: int | None = MAX_READ_BYTES,
             head: bool = False, judge: bool = True) -> str | None:
        """`read`, or None for a file refused (for the doors that pass over what they may not show)."""
        try:
            return self.read(path, max_bytes=max_bytes, head=head, judge=judge)
        except Refused:
            return None


def _real_path(path: str) -> str:
    """`path` with every symlink followed: where /proc says it of a descriptor that opens nothing (O_PATH: no device
    is opened, no FIFO waited on), else (a link, a path still to be made, no /proc) by os.path.realpath."""
    if _O_PATH:
        try:
            fd = os.open(path, _O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return os.path.realpath(path)
        try:
            if not stat.S_ISLNK(os.fstat(fd).st_mode) and (where := _opened_path(fd)) is not None:
                return where
        finally:
            os.close(fd)
    return os.path.realpath(path)


def _opened_path(fd: int) -> str | None:
    """Where an open descriptor's file really is (None where /proc cannot say)."""
    try:
        where = os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None
    return where if where.startswith("/") else None


def _read_all(fd: int, limit: int | None) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while limit is None or size < limit:
        chunk = os.read(fd, 1 << 20 if limit is None else min(1 << 20, limit - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)
