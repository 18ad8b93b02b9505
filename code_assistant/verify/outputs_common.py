"""What every test-output parser shares: the failure record and turning raw frames into repo locations."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

MAX_MESSAGE_CHARS = 1500
MAX_FRAMES = 5

# path fragments that mark a frame as belonging to a toolchain or dependency, never to the repository
_FOREIGN = ("site-packages", "dist-packages", "node_modules/", "node:", "<frozen", "/lib/python3", "/usr/lib/go",
            "/usr/local/go", "/go/pkg/mod/", "/rustc/", "/.cargo/registry/", "/.rustup/", "_testmain.go", "<anonymous>")


@dataclass
class TestFailure:
    """One failing test (or a collection/build error) as the model should see it."""
    __test__ = False  # not a pytest test class

    test_id: str
    status: str = "failed"  # "failed" | "error" (collection/import/build error)
    file: str | None = None  # repo-relative when possible
    line: int | None = None
    message: str = ""
    frames: list[tuple[str, int]] = field(default_factory=list)  # in-repo frames, innermost last


def repo_path(path: str, repo: Path | None) -> str | None:
    """A repo-relative path for a frame path, or None when the frame lies outside the repository."""
    path = path.strip()
    if path.startswith("file://"):
        path = path[len("file://"):]
    if not path or any(marker in path for marker in _FOREIGN):
        return None
    candidate = Path(path)
    if not candidate.is_absolute():
        return path[2:] if path.startswith("./") else path
    if repo is None:
        return path
    for root in (repo, repo.resolve()):
        try:
            return candidate.relative_to(root).as_posix()
        except ValueError:
            continue
    return None


def clean_frames(raw: list[tuple[str, int]], repo: Path | None) -> list[tuple[str, int]]:
    """Keep in-repo frames (innermost last), drop consecutive duplicates, keep the last MAX_FRAMES."""
    frames: list[tuple[str, int]] = []
    for path, line in raw:
        rel = repo_path(path, repo)
        if rel is not None and (not frames or frames[-1] != (rel, line)):
            frames.append((rel, line))
    return frames[-MAX_FRAMES:]


def trim_message(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    lines = [line.rstrip() for line in text.strip("\n").splitlines()]
    text = "\n".join(lines).strip()
    return text if len(text) <= limit else text[:limit].rstrip() + " […]"


def dedent(lines: list[str]) -> str:
    indent = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return "\n".join(line[indent:] for line in lines)


def finish(failure: TestFailure, raw_frames: list[tuple[str, int]], repo: Path | None,
           fallback: tuple[str, int] | None = None) -> TestFailure:
    """Fill frames, file and line (innermost in-repo frame, else the fallback location) and trim the message."""
    failure.frames = clean_frames(raw_frames, repo)
    if failure.frames:
        failure.file, failure.line = failure.frames[-1]
    elif fallback is not None and (rel := repo_path(fallback[0], repo)) is not None:
        failure.file, failure.line = rel, fallback[1]
    failure.message = trim_message(failure.message)
    return failure
