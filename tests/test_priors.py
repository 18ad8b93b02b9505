"""The priors that transfer across repositories (issue 37): core-ness by PageRank on the import graph, leaf users,
the task's behaviour words found in a file's identifiers by their stems, a file's role by its name; and the bench's
folds that keep each repository whole."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.held_out import folds
from code_assistant.index import embeddings, store
from code_assistant.index.indexer import Indexer, RepoIndex
from code_assistant.retrieve import fusion, priors, signals
from code_assistant.retrieve.file_roles import role
from tests.repos import write_tree

# A renderer library: a core reconciler and diff routine, a compat layer and a demo that use it.
LIBRARY = {
    "package.json": '{"name": "tiny-vdom", "main": "src/index.js"}\n',
    "src/index.js": "export { render } from './render.js'\nexport { h } from './h.js'\n",
    "src/h.js": "export function h(type, props, ...children) {\n  return { type, props, children }\n}\n",
    "src/diff.js": "import { h } from './h.js'\n\nexport function diffChildren(parent, next, prev) {\n"
                   "  const patches = []\n  for (let i = 0; i < next.length; i++) {\n"
                   "    if (next[i] !== prev[i]) patches.push(reconcileNode(parent, next[i], prev[i]))\n  }\n"
                   "  return patches\n}\n\nfunction reconcileNode(parent, next, prev) {\n"
                   "  return { parent, next, prev }\n}\n",
    "src/render.js": "import { diffChildren } from './diff.js'\n\nexport function render(vnode, parent) {\n"
                     "  return diffChildren(parent, [vnode], parent.children || [])\n}\n",
    "compat/index.js": "import { render, h } from '../src/index.js'\n\n"
                       "export function createElement(type, props, ...children) {\n"
                       "  return h(type, props, ...children)\n}\nexport { render }\n",
    "demo/app.js": "import { render, h } from '../src/index.js'\n\n"
                   "render(h('ul', null, h('li', null, 'reconciled list')), document.body)\n",
}


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> RepoIndex:
    root = tmp_path_factory.mktemp("library")
    repo = write_tree(root / "repo", LIBRARY)
    embedder = embeddings.make_embedder("local")
    client = store.open_client(root / "index")
    chunks = store.ChunkStore(client, store.collection_name(str(repo), embedder.name))
    return Indexer(repo, root / "index", embedder, chunks).update()[0]


def test_page_rank_puts_the_file_everything_depends_on_first() -> None:
    graph = {"app.py": ["views.py"], "views.py": ["models.py", "db.py"], "models.py": ["db.py"], "cli.py": ["db.py"]}
    found = priors.page_rank(["app.py", "views.py", "models.py", "db.py", "cli.py"], graph)
    assert max(found, key=lambda p: found[p]) == "db.py"
    assert found["app.py"] == found["cli.py"] == min(found.values()), "nothing imports them"
    assert abs(sum(found.values()) - 5) < 1e-9, "times the number of files: 1 on average"
    assert priors.page_rank([], {}) == {}


def test_stems_meet_across_inflections() -> None:
    assert priors.stem("reconciling") == priors.stem("reconciles") == "reconcil"
    assert priors.stem("class") == "class" and priors.stem("bus") == "bus"
    words = priors.behaviour_words("The reconciler drops keyed children when diffing; see reconcileChildren()")
    assert "reconcile" in words["reconcil"] and "diff" in words["diff"]
    assert "the" not in words and "see" not in words, "short and stop words say nothing"


def test_word_cover_finds_the_files_whose_identifiers_name_the_behaviour(library: RepoIndex) -> None:
    cover = priors.word_cover(library, "Reconciling the children of a keyed list runs the diff twice")
    assert max(cover, key=lambda p: cover[p]) == "src/diff.js"
    assert cover["src/diff.js"] > cover["src/h.js"] > 0 and cover.get("src/index.js", 0.0) == 0.0


def test_the_library_files_carry_their_priors_into_the_features(library: RepoIndex) -> None:
    sig = signals.gather(library, "Reconciling the children of a keyed list runs the diff twice")
    paths, matrix = fusion.features(sig)
    column = {name: matrix[:, fusion.NAMES.index(name)] for name in ("role", "leaf", "core", "cover")}
    row = {p: i for i, p in enumerate(paths)}
    assert column["leaf"][row["demo/app.js"]] == 1.0 and column["role"][row["demo/app.js"]] == 1.0
    assert column["leaf"][row["src/diff.js"]] == 0.0 and column["role"][row["src/diff.js"]] == 0.0
    assert column["core"][row["src/diff.js"]] > column["core"][row["demo/app.js"]]
    assert column["cover"][row["src/diff.js"]] > column["cover"][row["demo/app.js"]]


@pytest.mark.parametrize(("path", "expected"), [
    ("examples/todo/app.js", "demo"), ("docs/conf.py", "demo"), ("src/Button.stories.tsx", "demo"),
    ("benchmarks/render.js", "bench"), ("src/render.bench.ts", "bench"), ("internal/testdata/a.go", "fixture"),
    ("src/compat/index.js", "compat"), ("lib/polyfill.js", "compat"), ("dist/preact.min.js", "build"),
    ("cjs/react.development.js", "build"), ("src/diff.js", None), ("lib/router.go", None),
])
def test_a_files_role_by_its_name(path: str, expected: str | None) -> None:
    assert role(path) == expected


def test_folds_keep_every_repository_whole_and_balance_their_sizes() -> None:
    records = [{"repo": repo, "set": "s", "instance_id": f"{repo}-{i}"}
               for repo, n in (("a/big", 9), ("b/mid", 5), ("c/mid", 4), ("d/one", 1), ("e/one", 1)) for i in range(n)]
    three = folds(records, 3)
    assert sorted(len(f) for f in three) == [5, 6, 9]
    assert all(len({r["repo"] for r in f} & {r["repo"] for r in g}) == 0 for f in three for g in three if f is not g)
    assert sorted(len(f) for f in folds(records, 0)) == [1, 1, 4, 5, 9], "0: one repository per fold"
