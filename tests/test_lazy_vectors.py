"""The first answer does not wait for the whole repository to be embedded: a query embeds only what its top
candidates lack, within a budget; `code-assistant index` embeds everything, resumably."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from code_assistant.index import embeddings, store
from code_assistant.index.indexer import Indexer
from code_assistant.retrieve.ranking import rank
from tests.repos import ROOT, run_cli, write_tree


def _module(i: int) -> str:
    """A module of a few definitions, every line its own text (no two chunks alike)."""
    defs = []
    for j in range(3):
        body = "".join(f"    ledger_{i}_{j}_{k} = account_{k}(entry, {i * 100 + j * 10 + k})\n" for k in range(30))
        defs.append(f"def settle_{i}_{j}(entry):\n    \"\"\"Settle entry {i}.{j}.\"\"\"\n{body}    return entry\n")
    return "\n\n".join(defs)


def _ledger_repo(root: Path, modules: int) -> Path:
    files = {f"ledger/part_{i}.py": _module(i) for i in range(modules)}
    files["ledger/rates.py"] = "def exchange_rate(currency):\n    return RATES[currency]\n\n\nRATES = {'EUR': 1.1}\n"
    return write_tree(root / "repo", files)


def _context(repo: Path, index: Path, *extra: str) -> dict:
    done = run_cli(["--repo", str(repo), "--task", "exchange_rate fails for an unknown currency", "--context-only",
                    "--json", "--index-path", str(index), *extra])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_cold_query_embeds_at_most_its_budget_and_the_next_reuses_it(tmp_path: Path) -> None:
    repo = _ledger_repo(tmp_path, 12)
    first = _context(repo, tmp_path / "index", "--embed-budget", "10")
    assert first["files"][0] == "ledger/rates.py", "the fast signals find the file before any vector exists"
    assert 0 < first["chunks_embedded"] <= 10
    again = _context(repo, tmp_path / "index", "--embed-budget", "10")
    assert again["files"] == first["files"] and again["chunks_embedded"] <= 10
    third = _context(repo, tmp_path / "index", "--embed-budget", "0")
    assert third["chunks_embedded"] == 0 and third["files"][0] == "ledger/rates.py"


def test_a_second_query_reuses_the_vectors_of_the_first(tmp_path: Path) -> None:
    repo = _ledger_repo(tmp_path, 3)
    first = _context(repo, tmp_path / "index")
    assert first["chunks_embedded"] > 0
    second = _context(repo, tmp_path / "index")
    assert second["chunks_embedded"] == 0 and second["files"] == first["files"]


def test_index_resumes_after_an_interrupt_and_embeds_no_chunk_twice(tmp_path: Path) -> None:
    repo = _ledger_repo(tmp_path, 16)
    index = tmp_path / "index"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    first = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "index", "--repo", str(repo), "--json",
                              "--index-path", str(index)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=env)
    assert first.stderr is not None
    deadline = time.monotonic() + 240
    for line in first.stderr:  # a line per written batch
        if line.startswith("[Embedding:") or time.monotonic() > deadline:
            break
    first.send_signal(signal.SIGINT)  # Ctrl-C
    out, err = first.communicate(timeout=120)
    assert first.returncode == 130, err
    stopped = json.loads(out)
    assert stopped["interrupted"] and 0 < stopped["files_embedded"] < stopped["files"]

    resumed = run_cli(["index", "--repo", str(repo), "--json", "--index-path", str(index)])
    assert resumed.returncode == 0, resumed.stderr
    done = json.loads(resumed.stdout)
    assert not done["interrupted"] and done["files_embedded"] == done["files"]
    assert 0 < done["chunks_embedded"] < done["chunks_stored"], "the second run continued, it did not start over"
    assert stopped["chunks_embedded"] + done["chunks_embedded"] == done["chunks_stored"], "no chunk embedded twice"

    complete = run_cli(["index", "--repo", str(repo), "--json", "--index-path", str(index)])
    assert json.loads(complete.stdout)["chunks_embedded"] == 0, "a complete index is used as it is"


def test_the_lazy_and_the_full_index_rank_the_same_file_first(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", {
        "billing/invoice.py": "class Invoice:\n    def total(self, lines):\n        return sum(l.amount for l in lines)"
                              "\n\n    def render_pdf(self):\n        return b''\n",
        "billing/tax.py": "def vat(amount, rate=0.2):\n    return amount * rate\n",
        "billing/customer.py": "class Customer:\n    def __init__(self, name):\n        self.name = name\n",
        "web/routes.py": "def invoice_page(request):\n    return render('invoice.html')\n",
    })
    embedder = embeddings.make_embedder("local")
    tasks = ["Invoice.total ignores discounted lines", "vat uses the wrong rate for food",
             "Customer name is not stored"]

    def top(index_path: Path, full: bool) -> list[str]:
        chunks = store.ChunkStore(store.open_client(index_path), store.collection_name(str(repo), embedder.name))
        index, _ = Indexer(repo, index_path, embedder, chunks).update()
        if full:
            index.vectors.fill()
        return [rank(index, task, embed_budget=None if not full else 0).files[0].path for task in tasks]

    assert top(tmp_path / "lazy", full=False) == top(tmp_path / "full", full=True) == [
        "billing/invoice.py", "billing/tax.py", "billing/customer.py"]


def test_a_warm_query_on_an_unchanged_repository_chunks_no_file(tmp_path: Path) -> None:
    """Which chunks a file has is known from the index once it was chunked: the same query again re-chunks
    nothing (counted), and finds every chunk it wants stored."""
    repo = _ledger_repo(tmp_path, 6)
    embedder = embeddings.make_embedder("local")

    def query() -> tuple[int, int]:
        chunks = store.LazyChunkStore(tmp_path / "index", repo, embedder.name)
        index, _ = Indexer(repo, tmp_path / "index", embedder, chunks).update()
        ranked = rank(index, "settle_3_1 posts the wrong ledger entry", embed_budget=200)
        return index.vectors.chunked, ranked.embedded

    cold_chunked, cold_embedded = query()
    assert cold_chunked > 0 and cold_embedded > 0
    assert query() == (0, 0), "a warm query: no file chunked, no chunk embedded"


def test_context_only_without_vectors_loads_neither_chroma_nor_onnxruntime(tmp_path: Path) -> None:
    """The fast path imports only what it uses: in the CLI's own process, after a --context-only --embed-budget 0
    answer on a repository with no vectors, chromadb and onnxruntime were never imported."""
    repo = _ledger_repo(tmp_path, 2)
    script = ("import sys\nfrom code_assistant import cli\n"
              f"code = cli.main(['--repo', {str(repo)!r}, '--task', 'exchange_rate fails', '--context-only', "
              f"'--json', '--embed-budget', '0', '--index-path', {str(tmp_path / 'index')!r}])\n"
              "print(code, [m for m in ('chromadb', 'onnxruntime') if m in sys.modules])\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    answer, status = done.stdout.strip().splitlines()
    assert json.loads(answer)["files"][0] == "ledger/rates.py"
    assert status == "0 []", status
