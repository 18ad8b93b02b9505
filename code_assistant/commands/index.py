"""`index`: embed every file now (resumable: an interrupt keeps the finished batches)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from code_assistant import console
from code_assistant.commands import parts
from code_assistant.errors import EXIT_INTERRUPTED, EXIT_OK
from code_assistant.settings import Settings


@dataclass(frozen=True)
class IndexOptions:
    json: bool = False


def index_all(settings: Settings, options: IndexOptions) -> int:
    """Index, then embed every file that lacks vectors, with a progress bar; an interrupt keeps finished batches."""
    repo_index, _ = parts.index(settings, quiet=options.json)
    from code_assistant.index.vectors import FillReport

    missing = repo_index.vectors.missing()
    if not options.json:
        console.say(f"[Embedding: {len(missing)} of {len(repo_index.files)} files lack vectors]")
    report, interrupted = FillReport(), False
    with console.embed_progress(len(missing)) as progress:
        try:
            repo_index.vectors.fill(missing, budget=None, progress=progress, report=report)
        except KeyboardInterrupt:
            interrupted = True  # every finished batch is stored: the next run continues from there
    done, total = repo_index.db.vectors.counts()
    if options.json:
        print(json.dumps({"files": total, "files_embedded": done, "chunks": report.chunks,
                          "chunks_embedded": report.embedded, "chunks_reused": report.reused,
                          "chunks_stored": repo_index.chunks.count(), "seconds": round(report.seconds, 2),
                          "interrupted": interrupted}))
    else:
        rate = report.embedded / report.seconds if report.seconds else 0.0
        console.say(f"[{'Interrupted' if interrupted else 'Embedded'}: {report.embedded} chunks embedded "
                    f"({report.reused} reused) in {report.seconds:.1f} s, {rate:.1f} chunks/s; {done} of {total} "
                    f"files complete{'; run it again to continue' if interrupted else ''}]")
    return EXIT_INTERRUPTED if interrupted else EXIT_OK
