"""A case's repository in a scratch directory of its own: copied from a path, cloned from git at a commit, or
downloaded from PyPI (pip) or npm (npm pack) at a version — never the user's tree. A download runs in the test
command's sandbox with the network on (pip prepares an sdist's metadata by running its build backend: the package's
code). The copy is made a git repository with one commit when it is not one already, so that the agent works in a
checkout and the judge can apply a test patch with `git apply`."""
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
# git as a scratch copy needs it: its own identity, no signing, no hooks of the user's
_GIT_SELF = ("-c", "user.name=code-assistant eval", "-c", "user.email=eval@code-assistant.invalid",
             "-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null")


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
    if not (dest / ".git").exists():
        vcs.git(dest, *_GIT_SELF, "init", "-q")
        vcs.git(dest, *_GIT_SELF, "add", "-A", "--force")
        vcs.git(dest, *_GIT_SELF, "commit", "-q", "--allow-empty", "--no-verify", "-m", "the case's repository")
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
        vcs.git(repo, *_GIT_SELF, "apply", "--whitespace=nowarn", str(patch_file))
    except vcs.GitError as exc:
        return str(exc)
    finally:
        patch_file.unlink(missing_ok=True)
    return None


def _copy(path: Path, dest: Path) -> None:
    if not path.is_dir():
        raise ScratchError(f"the case's repository is not a directory: {path}")
    shutil.copytree(path, dest, symlinks=True)


def _clone(url: str, commit: str, dest: Path) -> None:
    """Only the commit when the server gives it by its id (GitHub does), else the whole history."""
    dest.mkdir(parents=True)
    vcs.git(dest, *_GIT_SELF, "init", "-q")
    shallow = vcs.try_git(dest, *_GIT_SELF, "fetch", "-q", "--depth", "1", url, commit, timeout=DOWNLOAD_TIMEOUT_S)
    if shallow is None:
        vcs.git(dest, *_GIT_SELF, "fetch", "-q", url, "+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*",
                timeout=DOWNLOAD_TIMEOUT_S)
        vcs.git(dest, *_GIT_SELF, "checkout", "-q", "--detach", commit)
    else:
        vcs.git(dest, *_GIT_SELF, "checkout", "-q", "--detach", "FETCH_HEAD")


def _download(source: Source, dest: Path, sandbox: Sandbox, command: list[str]) -> None:
    """A package's source archive fetched by its registry's own client into a download folder beside `dest` (in
    the sandbox, the network on), and unpacked as the repository (its single top folder taken off)."""
    folder = dest.with_name(dest.name + "-download")
    folder.mkdir(parents=True)
    where = ["--pack-destination", "."] if source.kind == SourceKind.NPM else ["-d", "."]
    runner = TestRunner([*command, *where, source.where], cwd=folder, timeout=DOWNLOAD_TIMEOUT_S,
                        sandbox=dataclasses.replace(sandbox, network=True))
    try:
        done = runner.run()
    except TestCommandError:
        raise ScratchError(f"{source.where}: {command[0]} is needed to download a {source.kind} case") from None
    archives = [p for p in folder.iterdir() if p.name.endswith((".tar.gz", ".tgz", ".zip", ".tar.bz2"))]
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
    """An archive unpacked with nothing outside `into` (tarfile's data filter: no absolute paths, links out, devices)."""
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            for name in z.namelist():
                if name.startswith("/") or ".." in Path(name).parts:
                    raise ScratchError(f"{archive.name}: a path leaves the archive: {name}")
            z.extractall(into)
        return
    with tarfile.open(archive) as t:
        try:
            t.extractall(into, filter="data")
        except tarfile.FilterError as exc:
            raise ScratchError(f"{archive.name}: {exc}") from None
