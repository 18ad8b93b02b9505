"""`index`: embed every file that lacks vectors now (resumable: an interrupt keeps the finished batches)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from code_assistant.operations.options import IndexOptions
from code_assistant.operations.outcomes import IndexOutcome

if TYPE_CHECKING:
    from code_assistant.workspace import Workspace


def execute(ws: Workspace, options: IndexOptions) -> IndexOutcome:
    from code_assistant.index.vectors import FillReport

    repo_index, _ = ws.index()
    missing = repo_index.vectors.missing()
    ws.say(f"[Embedding: {len(missing)} of {len(repo_index.files)} files lack vectors]")
    report, interrupted = FillReport(), False
    with ws.display.embed_progress(len(missing)) as progress:
        try:
            repo_index.vectors.fill(missing, budget=None, progress=progress, report=report)
        except KeyboardInterrupt:
            interrupted = True  # every finished batch is stored: the next run continues from there
    done, total = repo_index.db.vectors.counts()
    return IndexOutcome(files=total, files_embedded=done, chunks=report.chunks, chunks_embedded=report.embedded,
                        chunks_reused=report.reused, chunks_stored=repo_index.chunks.count(), seconds=report.seconds,
                        interrupted=interrupted)
