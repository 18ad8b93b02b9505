"""`eval` with a real model: SmolLM2-135M-Instruct through llama-cpp-python's server on one shipped case that CI can
get (a package from PyPI). A 135M model rarely fixes anything; what is asserted is that the case ends with a verdict
that is true: the kept scratch copy, as the judge left it (the agent's change and the hidden tests in it), is tested
again here by plain pytest, outside the product, and every test's fate and the verdict must agree with it.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.llama_server import LlamaServer
from tests.repos import ROOT

CASE = "py-parse-compile-case-sensitive"
WINDOW = 2048


def test_smollm2_on_a_shipped_pypi_case_ends_with_a_true_verdict(tmp_path: Path) -> None:
    env = {**os.environ, "OPENAI_API_KEY": "k", "OPENAI_CONTEXT_WINDOW": str(WINDOW),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "TMPDIR": str(tmp_path)}  # the kept scratch copy: in tmp_path
    with LlamaServer(n_ctx=WINDOW, log=tmp_path / "llama.log") as llama:
        proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "eval", str(ROOT / "evals" / "smoke.jsonl"),
                               "--only", CASE, "--out", str(tmp_path / "eval"), "--keep-scratch", "--json",
                               "--model", "smollm2", "--base-url", llama.url, "--max-iterations", "1",
                               "--no-reproduce"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
                              stdin=subprocess.DEVNULL, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    result = json.loads((tmp_path / "eval" / "results.jsonl").read_text())
    assert result["id"] == CASE and result["model"] == "smollm2" and result["calls"] >= 1
    assert result["verdict"] in ("resolved", "unresolved"), result  # judged: the download and the tests ran

    repo = Path(result["scratch"]) / "repo"
    assert (repo / "test_eval_case_sensitive.py").is_file()  # the hidden tests, applied by the judge after the agent
    again = subprocess.run([sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *sorted(
        {test.split("::")[0] for test in result["tests"]})], cwd=repo, capture_output=True, text=True, check=False,
        env={**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}, timeout=300)
    passed = set(re.findall(r"^PASSED (\S+)", again.stdout, re.MULTILINE))
    failed = set(re.findall(r"^FAILED (\S+)", again.stdout, re.MULTILINE))
    fates = {test: "passed" if test in passed else "failed" if test in failed else "missing" for test in result["tests"]}
    assert passed | failed and result["tests"] == fates, again.stdout
    assert result["resolved"] == all(fate == "passed" for fate in fates.values())
