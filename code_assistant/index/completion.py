"""The background completion of a big tree's index: whether one runs, waiting for it, starting it.

`Indexer.update(focus=..., background=True)` starts `python -m code_assistant.index.complete` (complete.py) when a
first answer left files pending. While it runs it holds `completing.lock` beside the index (with its pid in it,
written when it took the lock, just before it lists the tree: `began_ns`): a run with a task stores beside it only
what changed since it began and what was indexed already (Indexer._beside_completion), a run without one waits for it
(`wait_for`), and a second one is never started. Both write the index database in short transactions that skip a
file the other stored meanwhile (indexer.superseded).
"""
from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_NAME = "completing.lock"
LOG_NAME = "completing.log"
CLOCK_SLACK_NS = 1_000_000_000  # the file system stamps files from a coarse clock, behind time.time_ns()


@dataclass
class Started:
    """A completion this process started: until it holds its lock, this is when it began (less CLOCK_SLACK_NS)."""

    proc: subprocess.Popen[bytes]
    started_ns: int

    def alive(self) -> bool:
        return self.proc.poll() is None


def running(index_dir: Path) -> bool:
    """Whether a completion of this index holds its lock now."""
    lock = index_dir / LOCK_NAME
    if not lock.exists():
        return False
    with lock.open("a") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(held, fcntl.LOCK_UN)
    return False


def began_ns(index_dir: Path) -> int | None:
    """When the completion running now took its lock (the lock file's stamp, on the file system's clock: the files'),
    before it listed the tree; None when none runs."""
    if not running(index_dir):
        return None
    try:
        return (index_dir / LOCK_NAME).stat().st_mtime_ns
    except FileNotFoundError:
        return None


def wait_for(index_dir: Path) -> None:
    """Until no completion of this index runs (a run that indexes everything itself would do its work twice); at
    once in the completion itself (the lock file holds its pid)."""
    lock = index_dir / LOCK_NAME
    if not lock.exists() or lock.read_text(encoding="utf-8").strip() == str(os.getpid()):
        return
    with lock.open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        fcntl.flock(held, fcntl.LOCK_UN)


def start(repo: Path, index_path: Path, index_dir: Path, embedder_name: str, dimension: int,
          exclude: list[Path]) -> Started | None:
    """Start the completion of repo's index in the background (this checkout's code, a session of its own); None
    when it could not start."""
    package_root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(package_root),
                                                                     os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "code_assistant.index.complete", "--repo", str(repo), "--index-path",
               str(index_path), "--embedder", embedder_name, "--dimension", str(dimension)]
    for path in exclude:
        command += ["--exclude", str(path)]
    started_ns = time.time_ns() - CLOCK_SLACK_NS
    try:
        with (index_dir / LOG_NAME).open("w", encoding="utf-8") as log:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, cwd=index_dir, start_new_session=True)
    except OSError as exc:
        logger.warning("the rest of the index could not start in the background: %s", exc)
        return None
    logger.info("completing the index in the background (pid %d, log %s)", proc.pid, index_dir / LOG_NAME)
    return Started(proc, started_ns)
