"""The package's layering, checked by import-linter against the contracts in pyproject.toml."""
from __future__ import annotations

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
    """Every stage of the pipeline has its own folder; MCP has one with a room each way (the server, a door; the client,
    the user's servers as the model's tools); loose at the root are only the session's door, the workspace every
    operation is given, and the base."""
    root = ROOT / "code_assistant"
    modules = {p.stem for p in root.glob("*.py")} - {"__init__"}
    stages = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert modules == {"session", "workspace", "settings", "languages", "errors", "tokens", "redact", "vcs",
                       "interrupts", "gate", "approvals", "env_files"}
    assert stages == {"cli", "console", "operations", "evaluate", "agent", "tools", "mcp", "retrieve", "answers",
                      "edit", "verify", "model", "index", "parse"}
    assert {p.name for p in (root / "mcp").iterdir() if (p / "__init__.py").is_file()} == {"client", "server"}
