"""Which files of a repository are indexed: git ls-files or a .gitignore-aware walk, minus what must not be."""

import logging
import os
from pathlib import Path

import pathspec

from code_assistant import languages
from code_assistant.gate import Gate, Refused, secret_name
from code_assistant.vcs import try_git

logger = logging.getLogger(__name__)

def _git_files(repo: Path) -> list[str] | None:
    if not (repo / ".git").exists():
        return None
    out = try_git(repo, "ls-files", "-co", "--exclude-standard", "-z")
    return None if out is None else [p for p in out.split("\0") if p]


def _gitignore_spec(lines: list[str]) -> pathspec.PathSpec:
    """A .gitignore's patterns; a line git would ignore as invalid (a lone `!`) is left out, as git does."""
    try:
        return pathspec.PathSpec.from_lines("gitignore", lines)
    except ValueError:  # pathspec's GitIgnorePatternError
        valid = []
        for line in lines:
            try:
                pathspec.PathSpec.from_lines("gitignore", [line])
            except ValueError:
                continue
            valid.append(line)
        return pathspec.PathSpec.from_lines("gitignore", valid)


def _walk_files(repo: Path) -> list[str]:
    """Files below repo, honouring .gitignore files (root and nested) when git is not available."""
    found: list[str] = []
    specs: list[tuple[str, pathspec.PathSpec]] = []
    for dirpath, dirnames, filenames in os.walk(repo):
        rel_dir = os.path.relpath(dirpath, repo).replace(os.sep, "/")
        rel_dir = "" if rel_dir == "." else rel_dir
        if ".gitignore" in filenames:
            lines = (Path(dirpath) / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
            # git's rule for one path: the last pattern that matches it decides. The walk prunes ignored directories
            # itself, so GitIgnoreSpec's rule for files below an excluded directory is not needed, and it gets
            # `*` + `!*/` ("ignore all but directories", go-zero's .gitignore) wrong: it keeps the directories out.
            specs.append((rel_dir, _gitignore_spec(lines)))

        def ignored(rel: str, is_dir: bool) -> bool:
            for base, spec in specs:
                if base and not rel.startswith(base + "/"):
                    continue
                sub = rel[len(base) + 1:] if base else rel
                if spec.match_file(sub + ("/" if is_dir else "")):
                    return True
            return False

        dirnames[:] = sorted(d for d in dirnames if d not in languages.IGNORED_DIRS
                             and not (Path(dirpath) / d / "pyvenv.cfg").is_file()  # a virtualenv by any name
                             and not ignored(f"{rel_dir}/{d}" if rel_dir else d, True))
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if not ignored(rel, False):
                found.append(rel)
    return found


def list_repo_files(repo: Path, exclude: list[Path] | None = None) -> list[str]:
    """Indexable repo-relative paths: known languages, not ignored, vendored, minified, secret or too big."""
    return _listed(repo, exclude, indexable=True)


def visible_files(repo: Path, exclude: list[Path] | None = None) -> list[str]:
    """The files a model may look at (grep, read): tracked or untracked but not ignored, in any language, but never
    a secret by name, a symlink or a file below one, a vendored or dependency directory's, or one under `exclude`
    (the assistant's state). What a file holds is judged when it is read (the read gate)."""
    return _listed(repo, exclude, indexable=False)


def _listed(repo: Path, exclude: list[Path] | None, *, indexable: bool) -> list[str]:
    candidates = _git_files(repo)
    if candidates is None:
        candidates = _walk_files(repo)
    root = repo.resolve()
    excluded = [str(p.resolve()) for p in (exclude or [])]
    # symlinked files and files below a symlinked directory (git lists a tracked file whose directory a test run
    # replaced by a link) are skipped below, so a listed file's real path is root/rel: an exclusion is a prefix test
    # on strings, not a resolve() per file
    root_text = str(root)
    linked: dict[str, bool] = {}  # directory -> whether it, or a directory above it, is a symlink
    result: list[str] = []
    for rel in candidates:
        parts = rel.split("/")
        if any(part in languages.IGNORED_DIRS for part in parts[:-1]):
            continue
        # the cheap test first: most of a big tree's unindexable files are out before the secret names' patterns
        if (indexable and (languages.language_for(rel) is None or languages.MINIFIED_RE.search(rel))) \
                or secret_name(rel):
            continue
        absolute = os.path.join(root_text, rel)
        if os.path.islink(absolute) or _below_a_link(root_text, parts[:-1], linked):  # may lead out of the tree
            continue
        if excluded and any(absolute == e or absolute.startswith(e + os.sep) for e in excluded):
            continue
        result.append(rel)
    return sorted(set(result))


def _below_a_link(root: str, dirs: list[str], linked: dict[str, bool]) -> bool:
    """Whether any of a file's directories (`dirs`, from the top) is a symlink; `linked` remembers each directory."""
    for depth in range(1, len(dirs) + 1):
        rel = "/".join(dirs[:depth])
        if rel not in linked:
            linked[rel] = os.path.islink(os.path.join(root, rel))
        if linked[rel]:
            return True
    return False


def read_text(gate: Gate, rel: str) -> str | None:
    """An indexed file's text, through the read gate (None: refused by it, larger than MAX_FILE_BYTES, binary,
    generated)."""
    try:
        text = gate.read(rel, max_bytes=languages.MAX_FILE_BYTES)
    except Refused:
        return None
    head = text[:600]
    if any(marker in head for marker in languages.GENERATED_MARKERS):
        return None
    return text
