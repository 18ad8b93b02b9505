"""The product does not import its laboratory: no module of the package, no entrance at the root and no test of the
suite imports `bench` (which may import them). What the package needs of a fit is data it owns
(retrieve/fusion_weights.json); the bench's own tests live beside it, in bench/tests."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported(path: Path) -> set[str]:
    """The top-level names of every module a file imports, wherever the import stands (in a function too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names


def test_neither_the_package_nor_the_suite_imports_bench() -> None:
    files = [*ROOT.glob("*.py"), *(ROOT / "code_assistant").rglob("*.py"), *(ROOT / "tests").rglob("*.py")]
    assert len(files) > 100
    offenders = sorted(str(p.relative_to(ROOT)) for p in files if "bench" in _imported(p))
    assert offenders == [], "move what the product uses into the package, and a bench's test to bench/tests"


def test_the_check_sees_an_import_wherever_it_stands_and_not_a_mention(tmp_path: Path) -> None:
    for source in ("import bench.fit\n", "import os, bench\n", "from bench import fit\n",
                   "def f():\n    from bench.held_out import folds\n"):
        (tmp_path / "m.py").write_text(source, encoding="utf-8")
        assert "bench" in _imported(tmp_path / "m.py"), source
    (tmp_path / "m.py").write_text('"""Speed goals live in bench/."""\nfrom . import bench\n', encoding="utf-8")
    assert "bench" not in _imported(tmp_path / "m.py")
