"""Write a commit's tree from a bare git directory into a working directory, incrementally.

The mirrors are bare repositories whose largest blobs (>= 4 MiB) are absent, so `git checkout` is not an option:
the tree is listed with `git ls-tree -r` and the blobs are streamed out of `git cat-file --batch`, skipping the
missing ones. One working directory is re-used for many commits of the same repository: files whose content did
not change are left alone (their mtimes survive, so an incremental indexer only sees real changes), changed files
are rewritten, and files that are no longer in the tree are deleted.

A manifest (path -> blob id, mode) is kept next to the working directory, never inside it:
`<dest parent>/.<dest name>.manifest.json`.

    python -m bench.checkout /work/.mirror/pylint-dev+astroid/repo <commit> /tmp/swebench/astroid
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MANIFEST_VERSION = 1


class CheckoutError(RuntimeError):
    """The commit could not be listed or read from the git directory."""


@dataclass
class TreeEntry:
    path: str
    mode: str
    sha: str


@dataclass
class Stats:
    """What one materialization did."""

    commit: str
    files: int = 0  # files of the tree now on disk
    bytes: int = 0  # their total size
    written: int = 0  # created or rewritten
    unchanged: int = 0  # left untouched (mtime preserved)
    deleted: int = 0  # removed: gone from the tree, untracked, or their blob is missing
    missing: int = 0  # blobs absent from the mirror (files >= 4 MiB), not written
    skipped: int = 0  # submodules (gitlinks)
    seconds: float = 0.0
    missing_paths: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return asdict(self)


def _git(git_dir: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "--git-dir", str(git_dir), *args], capture_output=True)
    if proc.returncode != 0:
        raise CheckoutError(f"git {' '.join(args)} failed in {git_dir}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def list_tree(git_dir: Path, commit: str) -> list[TreeEntry]:
    """Every blob (and gitlink) of the commit's tree, recursively."""
    out = _git(git_dir, "ls-tree", "-r", "-z", "--full-tree", commit)
    entries = []
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, path = record.partition(b"\t")
        mode, _kind, sha = meta.decode().split(" ")
        entries.append(TreeEntry(path=os.fsdecode(path), mode=mode, sha=sha))
    return entries


def _read_blobs(git_dir: Path, shas: list[str]):
    """Yield (sha, bytes | None) for each sha in order; None when the blob is missing from the mirror."""
    proc = subprocess.Popen(
        ["git", "--git-dir", str(git_dir), "cat-file", "--batch"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def feed() -> None:
        try:
            proc.stdin.write("".join(f"{sha}\n" for sha in shas).encode())
        finally:
            proc.stdin.close()

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        for sha in shas:
            header = proc.stdout.readline().decode().rstrip("\n")
            parts = header.split(" ")
            if len(parts) == 2 and parts[1] == "missing":
                yield sha, None
                continue
            if len(parts) != 3:
                raise CheckoutError(f"unexpected cat-file header for {sha}: {header!r}")
            size = int(parts[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)  # the newline after the content
            yield sha, data
    finally:
        writer.join()
        proc.stdout.close()
        proc.wait()


def manifest_path(dest: Path) -> Path:
    return dest.parent / f".{dest.name}.manifest.json"


def _load_manifest(dest: Path) -> dict[str, list[str]]:
    path = manifest_path(dest)
    if not path.is_file() or not dest.is_dir():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    if data.get("version") != MANIFEST_VERSION:
        return {}
    return data.get("files", {})


def _save_manifest(dest: Path, commit: str, files: dict[str, list[str]]) -> None:
    path = manifest_path(dest)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": MANIFEST_VERSION, "commit": commit, "files": files}))
    tmp.replace(path)


def _on_disk(dest: Path) -> set[str]:
    """Every file and symlink under dest, as posix paths relative to it."""
    found = set()
    for root, dirs, files in os.walk(dest):
        rel_root = Path(root).relative_to(dest)
        for name in files:
            found.add((rel_root / name).as_posix())
        for name in list(dirs):
            if os.path.islink(os.path.join(root, name)):
                found.add((rel_root / name).as_posix())
                dirs.remove(name)
    return found


def _remove(dest: Path, rel: str) -> None:
    path = dest / rel
    if path.is_symlink() or path.is_file():
        path.unlink()
    parent = path.parent
    while parent != dest:  # prune directories left empty
        try:
            parent.rmdir()
        except OSError:
            break
        parent = parent.parent


def _write(dest: Path, entry: TreeEntry, data: bytes) -> None:
    path = dest / entry.path
    if path.is_dir() and not path.is_symlink():
        raise CheckoutError(f"{entry.path} is a directory on disk but a file in the tree")
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_symlink() or path.exists():
        path.unlink()
    if entry.mode == "120000":
        os.symlink(os.fsdecode(data), path)
        return
    tmp = path.with_name(f".{path.name}.materialize-tmp")
    tmp.write_bytes(data)
    os.chmod(tmp, 0o755 if entry.mode == "100755" else 0o644)
    tmp.replace(path)


def _unchanged(dest: Path, entry: TreeEntry, previous: list[str] | None) -> bool:
    """True when the manifest says this exact blob is already on disk and the file still looks like it."""
    if previous is None or previous[0] != entry.sha or previous[1] != entry.mode:
        return False
    path = dest / entry.path
    if entry.mode == "120000":
        return path.is_symlink()
    try:
        return not path.is_symlink() and path.is_file() and path.stat().st_size == int(previous[2])
    except (OSError, IndexError, ValueError):
        return False


def materialize(git_dir: str | Path, commit: str, dest: str | Path) -> Stats:
    """Make dest hold exactly the tree of commit (minus blobs missing from the mirror), touching only what changed."""
    started = time.perf_counter()
    git_dir, dest = Path(git_dir), Path(dest)
    commit = _git(git_dir, "rev-parse", "--verify", f"{commit}^{{commit}}").decode().strip()
    entries = list_tree(git_dir, commit)
    dest.mkdir(parents=True, exist_ok=True)
    previous = _load_manifest(dest)
    stats = Stats(commit=commit)

    blobs = [e for e in entries if e.mode != "160000"]
    stats.skipped = len(entries) - len(blobs)
    to_write: dict[str, list[TreeEntry]] = {}
    manifest: dict[str, list[str]] = {}
    for entry in blobs:
        if _unchanged(dest, entry, previous.get(entry.path)):
            stats.unchanged += 1
            manifest[entry.path] = previous[entry.path]
        else:
            to_write.setdefault(entry.sha, []).append(entry)

    # Delete what should not be there before writing, so a file -> directory change in the tree works.
    wanted = {e.path for e in blobs}
    for rel in sorted(_on_disk(dest) - wanted):
        _remove(dest, rel)
        stats.deleted += 1

    for sha, data in _read_blobs(git_dir, list(to_write)):
        for entry in to_write[sha]:
            if data is None:
                stats.missing += 1
                stats.missing_paths.append(entry.path)
                if (dest / entry.path).is_symlink() or (dest / entry.path).is_file():
                    _remove(dest, entry.path)
                    stats.deleted += 1
                continue
            _write(dest, entry, data)
            stats.written += 1
            manifest[entry.path] = [entry.sha, entry.mode, str(len(data))]

    _save_manifest(dest, commit, manifest)
    stats.files = len(manifest)
    stats.bytes = sum(int(v[2]) for v in manifest.values())
    stats.seconds = round(time.perf_counter() - started, 3)
    log.info("materialized %s at %s: %s", dest, commit[:10], stats)
    return stats


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("git_dir", help="bare git directory, e.g. /work/.mirror/owner+name/repo")
    parser.add_argument("commit", help="commit (or any rev) to write out")
    parser.add_argument("dest", help="working directory, re-used across commits")
    args = parser.parse_args(argv)
    try:
        stats = materialize(args.git_dir, args.commit, args.dest)
    except CheckoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    summary = stats.as_dict()
    summary["missing_paths"] = summary["missing_paths"][:20]
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
