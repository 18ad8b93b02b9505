"""Issue 61: the share of a 2k/4k/8k window a run's first request gives the code, as the request is built (no model).

    python -m bench.context_share [CHECKOUT] [--repo=PATH]

CHECKOUT: the code to measure (default: this one; another checkout's path measures its code); --repo: a larger
repository to build the requests in (its suite taken as passing), else the tests' calc repository with a helpers.py of
120 functions and its failing test. The window's ratio is SmolLM2's measured one (1.17, with the margin).
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(next((a for a in sys.argv[1:] if not a.startswith("--")), Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(ROOT))

from code_assistant.agent.kit import request_config
from code_assistant.agent.requests import PlanRequest, Requests
from code_assistant.model.fitting import message_tokens
from code_assistant.model.window import ContextWindow
from code_assistant.settings import TOOLS_MIN_WINDOW, load_settings
from code_assistant.tools.box import Form
from code_assistant.tools.specs import SHORT_LIST
from code_assistant.workspace import Workspace
from tests.repos import CALC_PY, TEST_CALC_PY, python_repo

RATIO = 1.17 * 1.03  # SmolLM2's tokens per counted token on code (window.py), with the margin a measured ratio gets

from code_assistant.verify.runner import TestResult

OTHER = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--repo=")), None)

def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        if OTHER:  # a larger repository (a copy of this project), its suite passing, a task about one of its parts
            repo = Path(OTHER)
            task = ("Ctrl-C during a session's task starts the line queued meanwhile at once; it should wait at the "
                    "prompt")
        else:
            helpers = "\n\n".join(f'def helper_{i}(value):\n    """Scale value by {i}."""\n    return value * {i}\n'
                                  for i in range(120))
            repo = python_repo(Path(tmp), {
                "calc.py": CALC_PY, "helpers.py": helpers, "tests/test_calc.py": TEST_CALC_PY,
                "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
            task = "Fix add() so the tests pass"
        settings = load_settings(repo, test_command=f"{sys.executable} -m pytest -q", index_path=Path(tmp) / "index",
                                 state_path=Path(tmp) / "state")
        ws = Workspace(settings)
        index = ws.quiet_index()
        baseline = TestResult(command=["pytest"], exit_code=0, passed=True, timed_out=False, output="", duration_s=1.0,
                              passed_count=40, failed_count=0, runner="pytest") if OTHER else ws.tests.runner().run()
        print("| window | context (counted) | context, server tokens | share of the window | whole request | tools |")
        print("|---|---|---|---|---|---|")
        for size in (2048, 4096, 8192):
            window = ContextWindow(size, "bench", ratio=RATIO, measured=True)
            small = size < TOOLS_MIN_WINDOW
            box = ws.tools.box(repo, lambda: index, form=Form.JSON if small else Form.NATIVE, auto=True)
            box = box.only(list(SHORT_LIST)) if small else box
            requests = Requests(request_config(settings), window, tools=box)
            requests.task = task
            requests.fit_tools()
            messages, context = requests.plan(PlanRequest(index=index, task=task, baseline=baseline))
            whole = message_tokens(messages) + requests._schema()
            if "-v" in sys.argv:
                print(context.budget, requests.room(), context.budget_log, file=sys.stderr)
            print(f"| {size} | {context.tokens} | {round(context.tokens * RATIO)} | "
                  f"{context.tokens * RATIO / size:.0%} | {round(whole * RATIO)} + {window.reserve} reserve | "
                  f"{', '.join(t.spec.name for t in box.tools) or 'none'} |")
        ws.close()


if __name__ == "__main__":
    main()
