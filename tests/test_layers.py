"""The package's layering, checked by import-linter against the contracts in pyproject.toml."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_imports_point_down_the_pipeline_and_siblings_have_no_cycles() -> None:
    lint = Path(sys.executable).parent / "lint-imports"
    done = subprocess.run([str(lint), "--no-cache"], check=False, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "7 kept, 0 broken" in done.stdout


def test_the_package_root_holds_only_the_doors_the_workspace_and_the_base() -> None:
    """Every stage of the pipeline has its own folder; MCP's door (mcp/server) has one, and the user's servers as the
    model's tools are tools (tools/mcp, below the workspace that starts them, so no arrow runs back up through a folder
    holding a door); loose at the root are only the session's door, the workspace every
    operation is given, and the base (a session's memory and what a person is shown while an operation works are in
    it: the workspace, the console and the agent all use them)."""
    root = ROOT / "code_assistant"
    modules = {p.stem for p in root.glob("*.py")} - {"__init__"}
    stages = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert modules == {"session", "workspace", "settings", "languages", "errors", "tokens", "redact", "vcs",
                       "interrupts", "gate", "approvals", "env_files", "memory", "waiting", "review",
                       "display"}
    assert stages == {"cli", "console", "operations", "evaluate", "agent", "tools", "mcp", "retrieve", "answers",
                      "edit", "verify", "model", "index", "parse"}
    assert {p.name for p in (root / "mcp").iterdir() if (p / "__init__.py").is_file()} == {"server"}
    assert (root / "tools" / "mcp" / "__init__.py").is_file()


BUILT_IN_ONE_PLACE = {"FileEditor": "edit", "TestRunner": "verify", "Limits": "edit"}
# The eval judges a run from outside: it runs the product's command line, then a case's hidden tests with the test
# runner, and may import no workspace (pyproject's contract).
JUDGES_FROM_OUTSIDE = "evaluate"
KITS = "agent/kit.py"  # where every kit of a task is built


def test_what_a_run_uses_is_built_beside_the_kit_or_in_its_own_room() -> None:
    """Every FileEditor, TestRunner and Limits of the package is made in agent/kit.py (Kits, where every kit of a
    task is built, and the editor `apply` uses) or inside the stage it belongs to (the editor's scratch copy and
    Limits.of in edit/, the test command's runners in verify/testing.py): a reader finds where anything a run uses
    comes from in one place. The workspace builds none of them. The eval's judge runs a case's tests apart from any
    run."""
    package = ROOT / "code_assistant"
    found: list[str] = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if not isinstance(node, ast.Call):
                continue
            name = node.func.id if isinstance(node.func, ast.Name) else \
                node.func.attr if isinstance(node.func, ast.Attribute) else None
            room = BUILT_IN_ONE_PLACE.get(name or "")
            if room is not None and rel.parts[0] not in (room, JUDGES_FROM_OUTSIDE) and str(rel) != KITS:
                found.append(f"{rel}:{node.lineno}: {name}(...)")
    assert found == []
