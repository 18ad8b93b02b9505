"""Issue 57's holes 8 and 10 and bug 8b, tried against the checkout it is run in (`python -m bench.secret_doors`; for
"before", this file copied into an older checkout's bench/ and run there): prints one JSON object.

- hole 8: a repository whose .env (ignored by git), secrets.yml and credentials.json hold markers, a test that prints
  their values, a scripted model that asks `run` for `cat .env credentials.json`, `git log -p` and `git diff` (the
  working tree's credentials.json changed): which markers reach the model's requests and the run log;
- hole 10: an approved MCP server tools/server.py (argparse), then a plan adds tools/gettext.py that writes a marker;
  a later `ask` with no terminal: does the planted module run;
- 8b: usage.shared_tokens on a tool-calls-only message (content None) beside a text.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from tests.repos import CALC_PY, answer, create, modify, python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
MARKERS = {"env": "tok-env-MARKER-51c2", "yml": "yml-MARKER-7d1e", "json": "json-MARKER-0a9f-client"}
PRINTING_TEST = ('import json\nfrom pathlib import Path\nimport calc\n\n\ndef test_add():\n'
                 '    print([l.split("=", 1)[1] for l in Path(".env").read_text().splitlines()])\n'
                 '    print(list(json.loads(Path("credentials.json").read_text()).values()))\n'
                 '    print(Path("secrets.yml").read_text().replace(":", " "))\n    assert calc.add(2, 3) == 5\n')


def secret_files(home: Path) -> dict[str, object]:
    repo = python_repo(Path(tempfile.mkdtemp()), {
        "calc.py": CALC_PY, "tests/test_calc.py": PRINTING_TEST, ".gitignore": ".env\n",
        "pytest.ini": "[pytest]\npythonpath = .\n", "secrets.yml": f"prod:\n  api_key: {MARKERS['yml']}\n",
        "credentials.json": json.dumps({"type": "service_account", "client_id": MARKERS["json"]})})
    (repo / ".env").write_text(f"API_TOKEN={MARKERS['env']}\nDEBUG=true\n")
    (repo / "credentials.json").write_text(json.dumps({"type": "service_account", "client_id": MARKERS["json"] + "-2"}))
    commands = ("cat .env credentials.json", "git log -p", "git diff")
    calls = [{"name": "run", "arguments": {"command": command}} for command in commands]
    script = [{"tool_calls": calls}, answer(modify("calc.py", "    return a - b", "    return a + b"))]
    started = time.perf_counter()
    with ScriptedServer(script) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=server.url)
    sent = server.all_text_sent()
    logs = "".join(path.read_text(errors="replace") for path in home.rglob("*.jsonl"))
    return {"run_s": round(time.perf_counter() - started, 1), "exit": proc.returncode,
            "markers_sent": sorted(k for k, v in MARKERS.items() if v in sent),
            "marker_occurrences_sent": sum(sent.count(v) for v in MARKERS.values()),
            "markers_in_run_log": sorted(k for k, v in MARKERS.items() if v in logs)}


def shadowed_import() -> dict[str, object]:
    from code_assistant.approvals import Approvals
    from code_assistant.settings import load_settings
    from code_assistant.tools.mcp import trust
    from code_assistant.tools.mcp.config import configured

    tmp = Path(tempfile.mkdtemp())
    marker = tmp / "planted-ran"
    repo = python_repo(tmp, {"calc.py": CALC_PY, "tools/server.py": "import argparse\nargparse.ArgumentParser()\n"})
    (repo / ".mcp.json").write_text(json.dumps({"mcpServers": {"docs": {"command": sys.executable,
                                                                        "args": ["tools/server.py"]}}}))
    server = configured(repo)[0][0]
    Approvals(load_settings(repo).repo_state_dir / trust.APPROVALS).approve(trust.identity(server, {}, repo))
    planted = (f"open({str(marker)!r}, 'w').close()\ndef gettext(m): return m\n"
               "def ngettext(s, p, n): return s if n == 1 else p\n")
    (tmp / "plan.json").write_text(answer(create("tools/gettext.py", planted)))
    run_cli(["apply", "--repo", str(repo), str(tmp / "plan.json")])
    with ScriptedServer(["add subtracts"]) as model:
        run_cli(["ask", "--repo", str(repo), "what does add do?"], server_url=model.url,
                extra_env={"CODE_ASSISTANT_MCP_START_TIMEOUT": "15"})
    return {"planted_module_ran": marker.exists()}


def tool_calls_beside_text() -> str:
    from code_assistant.model.usage import shared_tokens

    calls = {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}
    try:
        shared_tokens([calls], [{"role": "assistant", "content": "x"}])
    except TypeError as exc:
        return f"TypeError: {exc}"
    return "ok"


def main() -> None:
    home = Path(tempfile.mkdtemp())
    os.environ.update({"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")})
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        os.environ.pop(name, None)
    print(json.dumps({"hole8": secret_files(home), "hole10": shadowed_import(), "8b": tool_calls_beside_text()}))


if __name__ == "__main__":
    main()
