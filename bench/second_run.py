"""Issue 61: requests and seconds to the first plan on the second run against a 2,048-token llama-cpp-python server
(SmolLM2-135M), no --context-window: `python -m bench.second_run CHECKOUT [CHECKOUT...]` runs each checkout's main.py
twice (one HOME per checkout, so the second run has the first's state folder) through one recording proxy and prints
a row a run: the chat requests sent before the first one answered with a plan, their statuses, and the seconds from the
start to that answer."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.llama_server import LlamaServer, RecordingProxy
from tests.repos import CALC_PY, TEST_CALC_PY, python_repo

TASK = "Fix add() so the tests pass"

with tempfile.TemporaryDirectory() as tmp, LlamaServer(n_ctx=2048, log=Path(tmp) / "server.log") as llama:
    print("| checkout | run | requests to the first plan | statuses | seconds to the first plan | context | "
          "window said |")
    print("|---|---|---|---|---|---|---|")
    for checkout in [Path(a).resolve() for a in sys.argv[1:]]:
        home = Path(tmp) / f"home-{checkout.name}"
        home.mkdir()
        with RecordingProxy(llama.url) as proxy:  # one server address for both runs, as a user's
            for run in (1, 2):
                helpers = "\n\n".join(f'def helper_{i}(value):\n    """Scale value by {i}."""\n    return value * {i}\n'
                                      for i in range(120))
                repo = python_repo(Path(tempfile.mkdtemp(dir=tmp)), {
                    "calc.py": CALC_PY, "helpers.py": helpers, "tests/test_calc.py": TEST_CALC_PY,
                    "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n"})
                env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache"), "OPENAI_API_KEY": "k",
                       "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "OPENAI_BASE_URL": proxy.url}
                env.pop("OPENAI_CONTEXT_WINDOW", None)
                before = len(proxy.chats)
                started = time.monotonic()
                proc = subprocess.Popen([sys.executable, str(checkout / "main.py"), "--repo", str(repo), "--task", TASK,
                                         "--test-command", f"{sys.executable} -m pytest -q", "--model", "smollm2",
                                         "--max-iterations", "1", "--no-reproduce"],
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                        cwd=checkout)
                planned = None
                lines = []
                assert proc.stdout is not None
                for line in proc.stdout:
                    lines.append(line)
                    if planned is None and (line.startswith(("[Plan:", "Result:")) or "could not be read" in line):
                        planned = time.monotonic() - started
                proc.wait()
                chats = list(proxy.chats)[before:]
                window = next((ln.strip() for ln in lines if ln.startswith("[Model:")), "")
                context = [ln.strip() for ln in lines if ln.startswith("[Context:")]
                statuses = [c["status"] for c in chats]
                first_ok = next((i + 1 for i, c in enumerate(chats) if c["status"] == 200 and c.get("events")),
                                None)
                print(f"| {checkout.name} | {run} | {first_ok} | {statuses} | {planned:.0f} | {' → '.join(context)} | "
                      f"{window} |", flush=True)
