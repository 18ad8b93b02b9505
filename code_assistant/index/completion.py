"""The background completion of a big tree's index: whether one runs, waiting for it, starting it.

`Indexer.update(focus=..., background=True)` starts `python -m code_assistant.index.complete` (complete.py) when a
first answer left files pending. While it runs it holds `completing.lock` beside the index (with its pid in it): a
run with a task reads what it has stored and adds nothing (`running`), a run without one waits for it (`wait_for`),
and a second one is never started.
"""
from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
from pathlib import Path

logger = logging.getLogger(__name__)

LOCK_NAME = "completing.lock"
LOG_NAME = "completing.log"


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
          exclude: list[Path]) -> int | None:
    """Start the completion of repo's index in the background (this checkout's code, a session of its own); its
    pid, or None when it could not start."""
    package_root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(package_root),
                                                                     os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "code_assistant.index.complete", "--repo", str(repo), "--index-path",
               str(index_path), "--embedder", embedder_name, "--dimension", str(dimension)]
    for path in exclude:
        command += ["--exclude", str(path)]
    try:
        with (index_dir / LOG_NAME).open("w", encoding="utf-8") as log:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=env, cwd=index_dir, start_new_session=True)
    except OSError as exc:
        logger.warning("the rest of the index could not start in the background: %s", exc)
        return None
    logger.info("completing the index in the background (pid %d, log %s)", proc.pid, index_dir / LOG_NAME)
    return proc.pid
