"""Where the cases run: `Workers`, threads of this process each running one case at a time (the agent is a
subprocess, so the threads only wait), or a Dask cluster (cluster.py). Both yield each case's run as it finishes."""
from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Protocol

from code_assistant.evaluate.case_run import CaseInterrupted, CaseRun, EvalConfig, Watch, run_case
from code_assistant.evaluate.cases import Case

logger = logging.getLogger(__name__)


class Pool(Protocol):
    """Runs cases, yielding each one's run as it finishes (in no set order); a case stopped from outside is not
    yielded. It tells `watch` each phase of a case as it begins (from another thread)."""

    def run(self, cases: list[Case], config: EvalConfig, watch: Watch) -> Iterator[CaseRun]: ...

    def close(self) -> None: ...


class Workers:
    """`workers` cases at a time on this machine, each phase of each told as it begins (from the workers' threads)."""

    def __init__(self, workers: int) -> None:
        self.workers = max(1, workers)
        self.stop = threading.Event()  # set when the eval is stopped: every running case is interrupted

    def run(self, cases: list[Case], config: EvalConfig, watch: Watch) -> Iterator[CaseRun]:
        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="eval") as pool:
            pending: set[Future[CaseRun]] = {pool.submit(run_case, case, config, None, self.stop, watch)
                                             for case in cases}
            try:
                while pending:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for future in finished:
                        try:
                            yield future.result()
                        except CaseInterrupted:
                            continue
            finally:  # stopped (Ctrl-C, or the consumer went away): the running cases roll back and end
                self.stop.set()
                for future in pending:
                    future.cancel()

    def close(self) -> None:
        self.stop.set()
