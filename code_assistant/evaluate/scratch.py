"""A case's repository in a scratch directory of its own: copied from a path, cloned from git at a commit, or
downloaded from PyPI (pip) or npm (npm pack) at a version — never the user's tree. A download runs in the test
command's sandbox with the network on (pip prepares an sdist's metadata by running its build backend: the package's
code). The copy is made a git repository with one commit when it is not one already, so that the agent works in a
checkout and the judge can apply a test patch with `git apply`.

Its `.git` is always ours: a case's tree, a clone and a package are written by someone else, and a `.git/config` they
ship names programs git runs (core.fsmonitor at the first `git status`, hooks, filters). A copied path leaves its
`.git` behind, an archive's `.git` is never unpacked, a clone starts from `git init`; every git command here is
vcs.untrusted_git, with `--` before what a case names."""
from __future__ import annotations

import dataclasses
import logging
import re
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

from code_assistant import vcs
from code_assistant.errors import ConfigError
from code_assistant.evaluate.cases import Source, SourceKind
from code_assistant.verify.runner import TestCommandError, TestRunner
from code_assistant.verify.sandbox import Sandbox

logger = logging.getLogger(__name__)

DOWNLOAD_TIMEOUT_S = 300.0
# git as a scratch copy needs it: its own identity (the user's configuration is not read: vcs.untrusted_git)
_GIT_SELF = ("-c", "user.name=code-assistant eval", "-c", "user.email=eval@code-assistant.invalid")
_GIT_DIR = ".git"  # a folder or a file (`gitdir: ELSEWHERE`) of this name is never copied or unpacked


class ScratchError(ConfigError):
    """The case's repository could not be had (not found, not downloadable, a commit that is not there)."""


def materialize(source: Source, dest: Path, sandbox: Sandbox) -> Path:
    """The repository of `source` at `dest` (which must not exist), as a git checkout; returns dest. A download runs
    in `sandbox`, with the network on."""
    try:
        match source.kind:
            case SourceKind.PATH:
                _copy(Path(source.where), dest)
            case SourceKind.GIT:
                _clone(source.where, source.commit or "HEAD", dest)
            case SourceKind.PYPI:
                _download(source, dest, sandbox, [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary",
                                                  ":all:", "--no-cache-dir", "--disable-pip-version-check", "-q"])
            case SourceKind.NPM:
                _download(source, dest, sandbox, ["npm", "pack", "--silent"])
    except vcs.GitError as exc:
        raise ScratchError(f"{source.describe()}: {exc}") from None
    if not (dest / _GIT_DIR).exists():
        _git(dest, "init", "-q")
        _git(dest, "add", "-A", "--force")
        _git(dest, "commit", "-q", "--allow-empty", "--no-verify", "-m", "the case's repository")
    return dest


_PATCH_PATHS = re.compile(r"^(?:---|\+\+\+) (?:[ab]/)?(\S+)", re.MULTILINE)


def patch_paths(patch: str) -> list[str]:
    """The files a unified diff touches, relative to the checkout (its `---`/`+++` lines, /dev/null left out)."""
    found = [m.group(1) for m in _PATCH_PATHS.finditer(patch) if m.group(1) != "/dev/null"]
    return [p for p in dict.fromkeys(found) if not p.startswith("/") and ".." not in Path(p).parts]


def reset_to_case(repo: Path, paths: list[str]) -> list[str]:
    """The files of `paths` put back as the case's commit has them (one that it does not have is removed), as
    SWE-bench's harness does before applying a test patch: a test the agent added to such a file must not keep the
    patch from applying. Returns the paths the agent had changed."""
    if not paths:
        return []
    status = vcs.git(repo, "status", "--porcelain", "-z", "--no-renames", "--untracked-files=all", "--", *paths)
    changed = [entry[3:] for entry in status.split("\0") if len(entry) > 3]
    for path in changed:
        if vcs.try_git(repo, "cat-file", "-e", f"HEAD:{path}") is not None:
            vcs.git(repo, *_GIT_SELF, "checkout", "HEAD", "--", path)
        else:
            (repo / path).unlink(missing_ok=True)
    return changed


def apply_patch(repo: Path, patch: str) -> str | None:
    """`patch` (a unified diff) applied to the checkout; None, or why it does not apply."""
    patch_file = repo.with_name(repo.name + ".test.patch")  # beside the checkout, never in it
    patch_file.write_text(patch if patch.endswith("\n") else patch + "\n", encoding="utf-8")
    try:
        _git(repo, "apply", "--whitespace=nowarn", "--", str(patch_file))
    except vcs.GitError as exc:
        return str(exc)
    finally:
        patch_file.unlink(missing_ok=True)
    return None


def _git(repo: Path, *args: str, check: bool = True, timeout: float = 120) -> str:
    return vcs.untrusted_git(repo, *_GIT_SELF, *args, check=check, timeout=timeout)


def _copy(path: Path, dest: Path) -> None:
    """The tree at `path`, its `.git` left behind (the copy gets one commit of the tree as it is)."""
    if not path.is_dir():
        raise ScratchError(f"the case's repository is not a directory: {path}")
    shutil.copytree(path, dest, symlinks=True, ignore=lambda folder, names: [n for n in names if n == _GIT_DIR])


def _clone(url: str, commit: str, dest: Path) -> None:
    """Only the commit when the server gives it by its id (GitHub does), else the whole history. The URL comes
    after `--` (cases.py has refused one that starts with '-' and a scheme not in its list already)."""
    if url.startswith("-") or not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        raise ScratchError(f"refused: git URL {url!r} at {commit!r}")  # parse_source refuses these first
    dest.mkdir(parents=True)
    _git(dest, "init", "-q")
    try:
        _git(dest, "fetch", "-q", "--depth", "1", "--", url, commit, timeout=DOWNLOAD_TIMEOUT_S)
        fetched = "FETCH_HEAD"
    except vcs.GitError:
        _git(dest, "fetch", "-q", "--", url, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*",
             timeout=DOWNLOAD_TIMEOUT_S)
        fetched = commit
    _git(dest, "checkout", "-q", "--detach", fetched, "--")


def _download(source: Source, dest: Path, sandbox: Sandbox, command: list[str]) -> None:
    """A package's source archive fetched by its registry's own client into a download folder beside `dest` (in
    the sandbox, the network on), and unpacked as the repository (its single top folder taken off)."""
    folder = dest.with_name(dest.name + "-download")
    # The archive goes into a folder that exists before the run: under Landlock the working tree's top level takes
    # no new entry (its absent `.git` is carved out by allowing only the entries there are), a folder in it does.
    received = folder / "archive"
    received.mkdir(parents=True)
    where = ["--pack-destination", received.name] if source.kind == SourceKind.NPM else ["-d", received.name]
    runner = TestRunner([*command, *where, source.where], cwd=folder, timeout=DOWNLOAD_TIMEOUT_S,
                        sandbox=dataclasses.replace(sandbox, network=True))
    try:
        done = runner.run()
    except TestCommandError:
        raise ScratchError(f"{source.where}: {command[0]} is needed to download a {source.kind} case") from None
    archives = [p for p in received.iterdir() if p.name.endswith((".tar.gz", ".tgz", ".zip", ".tar.bz2"))]
    if not done.passed or len(archives) != 1:
        lines = [line for line in done.output.strip().splitlines() if line.strip()]
        why = "timed out" if done.timed_out else lines[-1] if lines else f"exit {done.exit_code}"
        raise ScratchError(f"{source.where}: {source.kind} download failed: {why}")
    unpacked = folder / "unpacked"
    _unpack(archives[0], unpacked)
    tops = list(unpacked.iterdir())
    (tops[0] if len(tops) == 1 and tops[0].is_dir() else unpacked).rename(dest)
    shutil.rmtree(folder)


def _unpack(archive: Path, into: Path) -> None:
    """An archive unpacked with nothing outside `into` (tarfile's data filter: no absolute paths, links out, devices)
    and no `.git` at any depth (`shipped_git`)."""
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            names = z.namelist()
            for name in names:
                if name.startswith("/") or ".." in Path(name).parts:
                    raise ScratchError(f"{archive.name}: a path leaves the archive: {name}")
            kept = [name for name in names if not shipped_git(name)]
            _say_dropped(archive, len(names) - len(kept))
            z.extractall(into, members=kept)
        return
    dropped = 0

    def data_without_git(member: tarfile.TarInfo, path: str) -> tarfile.TarInfo | None:
        nonlocal dropped
        if shipped_git(member.name):
            dropped += 1
            return None
        return tarfile.data_filter(member, path)

    with tarfile.open(archive) as t:
        try:
            t.extractall(into, filter=data_without_git)
        except tarfile.FilterError as exc:
            raise ScratchError(f"{archive.name}: {exc}") from None
    _say_dropped(archive, dropped)


def shipped_git(name: str) -> bool:
    """Whether an archive's member lies in (or is) a `.git`: git would read its config and run what it names."""
    return _GIT_DIR in Path(name).parts


def _say_dropped(archive: Path, count: int) -> None:
    if count:
        logger.warning("%s shipped a .git (%d entries): not unpacked; the copy gets a .git of its own", archive.name,
                       count)
