"""Issue 37's leaf users (a file that imports repository files and that no file imports: a demo, a script, a
compatibility layer that wraps the core) as a ranking feature. The bench's folds that keep each repository whole are
tested beside the bench (bench/tests/test_held_out.py)."""
from __future__ import annotations

import pytest

from code_assistant.index.indexer import RepoIndex
from code_assistant.retrieve import fusion, signals
from tests.repos import indexed_tree

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
    return indexed_tree(tmp_path_factory.mktemp("library"), LIBRARY)


def test_the_index_counts_the_repository_files_each_file_imports(library: RepoIndex) -> None:
    degree = library.db.imports(["src/render.js", "demo/app.js", "src/h.js", "src/index.js"])
    assert degree["src/render.js"] == 1 and degree["demo/app.js"] == 1 and degree.get("src/h.js", 0) == 0
    assert degree["src/index.js"] == 2


def test_a_leaf_user_is_marked_and_the_core_it_uses_is_not(library: RepoIndex) -> None:
    sig = signals.gather(library, "Rendering a list with render() diffs the children twice")
    paths, matrix = fusion.features(sig)
    leaf = {p: matrix[i, fusion.NAMES.index("leaf")] for i, p in enumerate(paths)}
    assert leaf["demo/app.js"] == 1.0, "imports the library, nothing imports it"
    assert leaf["src/render.js"] == 0.0 and leaf["src/diff.js"] == 0.0, "imported by the library"
    assert leaf.get("src/index.js", 0.0) == 0.0, "an entry is not a leaf user, though nothing imports it"
