"""bench/definition_count.py counts, per language, the files the index would hold and the definitions the parser sees
in them (a CommonJS file's member assignments among them), and the files without one."""
from __future__ import annotations

from pathlib import Path

from bench.definition_count import count
from tests.repos import python_repo


def test_definitions_are_counted_per_language_over_the_indexed_files(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {
        "lib/response.js": "res.redirect = function redirect(url) {\n  return url;\n};\nexports.parse = () => 1;\n",
        "lib/data.js": "module.exports = [1, 2, 3];\n",
        "pkg/calc.py": "def add(a, b):\n    return a + b\n",
        "README.md": "# not code\n"})
    counts = count(repo)
    assert {k: (v["files"], v["definitions"], v["bare files"]) for k, v in counts.items()} == {
        "javascript": (2, 2, 1), "python": (1, 1, 0)}
