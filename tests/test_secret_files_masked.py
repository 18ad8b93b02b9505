"""What the read gate refuses to read, no door shows: the values in the repository's secret files (.env, secrets.yml,
credentials.json, keys: gate.py's table) are masked like the environment's secrets in test output, `run` output, git
output and tool results, before the model sees them and in the run log.

Tried as an attacker would: a repository whose .env (ignored by git), secrets.yml and credentials.json hold markers, a
test that prints their values, and a scripted model that asks `run` for `cat .env`, the files' git history and a diff.
The pure parts (which values a file holds, the floor under which a value is not held, which files are searched) are
checked directly.
"""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from code_assistant import redact
from code_assistant.gate import Gate
from tests.repos import CALC_PY, ROOT, answer, modify, python_repo, run_cli
from tests.scripted_server import ScriptedServer

PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
ENV_TOKEN = "tok-env-MARKER-51c2"
YAML_KEY = "yml-MARKER-7d1e"
JSON_ID = "json-MARKER-0a9f-client"
JSON_PASSWORD = "pw-json-MARKER-33"
KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"  # the start of a PKCS#8 key
MARKERS = ("MARKER", KEY_BODY)

ENV = f"API_TOKEN={ENV_TOKEN}\nDEBUG=true\nWORKERS=1\nPORT=8080\nHOST=localhost\n"
SECRETS_YML = f"production:\n  api_key: {YAML_KEY}\n  region: us-east\n  tls_key: |\n" \
              f"    -----BEGIN PRIVATE KEY-----\n    {KEY_BODY}\n    -----END PRIVATE KEY-----\n"
CREDENTIALS_JSON = ('{\n  "type": "service_account",\n  "client_id": "%s",\n  "password": "%s"\n}\n'
                    % (JSON_ID, JSON_PASSWORD))
# a test that prints the values alone, which no shape of the redactor knows, then fails on the bug
PRINTING_TEST = '''import json
from pathlib import Path

import calc


def test_add():
    print([line.split("=", 1)[1] for line in Path(".env").read_text().splitlines()])
    print(Path("secrets.yml").read_text().replace(":", " "))
    print(list(json.loads(Path("credentials.json").read_text()).values()))
    assert calc.add(2, 3) == 5
'''


# ----- which values a secret file holds, and the floor ------------------------------------------------------------
def test_a_secret_files_values_are_its_values_not_its_names_and_not_the_common_ones() -> None:
    assert redact.file_values(ENV) == [ENV_TOKEN]
    assert set(redact.file_values(SECRETS_YML)) >= {YAML_KEY, KEY_BODY}
    assert set(redact.file_values(CREDENTIALS_JSON)) == {JSON_ID, JSON_PASSWORD}
    assert redact.file_values("machine example.com login me password hunter2pw\n") == ["hunter2pw"]
    assert redact.file_values('{"client_id": "one-line-1234"}\n{"client_id": "next-line-5678"}\n') == [
        "one-line-1234", "next-line-5678"], "a JSON document on each line (one-line JSON in a diff's history)"
    assert redact.file_values("export DB_PASSWORD='hunter2' # the old one\n") == ["hunter2"]
    held = redact.file_values("DEBUG=true\nWORKERS=1\nPORT=8080\nHOST=localhost\nREGION=us-east\nNAME=My Project\n"
                              "STAGE=production\nHOME_DIR=${HOME}\n")
    assert held == [], "numbers, booleans and plain words are no secrets (FILE_VALUE_MIN_CHARS and the words rule)"
    assert redact.file_values("SECRET=abc\n") == [], f"under {redact.MIN_HELD_CHARS} characters nothing is held"
    assert redact.file_values("SECRET=plainwords\n") == ["plainwords"], "under a secret's name, plain words are held"


def test_a_json_string_is_held_as_written_and_as_read() -> None:
    text = '{"private_key": "-----BEGIN PRIVATE KEY-----\\n%s\\n-----END PRIVATE KEY-----\\n"}' % KEY_BODY
    held = redact.file_values(text)
    assert KEY_BODY in held and f"-----BEGIN PRIVATE KEY-----\n{KEY_BODY}\n-----END PRIVATE KEY-----" in held
    assert "-----BEGIN PRIVATE KEY-----" not in held, "a key's fence alone would mask every key's, and hides nothing"


def test_the_gate_finds_the_secret_files_its_table_names_ignored_or_not(tmp_path: Path) -> None:
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, ".gitignore": ".env\n", ".env": ENV, "secrets.yml": SECRETS_YML,
                                  "config/credentials.json": CREDENTIALS_JSON,
                                  ".env.example": "API_TOKEN=changeme123\n",
                                  "deploy/app.yml": "replicas: 3\n", "certs/server.pem": f"{KEY_BODY}\n",
                                  "node_modules/pkg/.env": "TOKEN=theirs-123456\n"})
    (repo / "linked.env").symlink_to(tmp_path / "outside.env")
    (tmp_path / "outside.env").write_text("TOKEN=outside-123456\n")
    found = Gate(repo).secret_texts()
    assert sorted(found) == [".env", "certs/server.pem", "config/credentials.json", "secrets.yml"]
    assert found[".env"] == ENV


# ----- the attack: every door, one run --------------------------------------------------------------------------
def _secret_repo(tmp_path: Path) -> Path:
    repo = python_repo(tmp_path, {"calc.py": CALC_PY, "tests/test_calc.py": PRINTING_TEST, ".gitignore": ".env\n",
                                  "pytest.ini": "[pytest]\npythonpath = .\naddopts = -p no:cacheprovider\n",
                                  "secrets.yml": SECRETS_YML, "credentials.json": CREDENTIALS_JSON})
    (repo / ".env").write_text(ENV)
    return repo


def _run_tool(command: str) -> dict:
    return {"name": "run", "arguments": {"command": command}}


def test_no_door_shows_what_the_gate_refuses_to_read(tmp_path: Path, isolated_env: Path, sandbox_backend: str) -> None:
    """Under either backend of the sandbox: the masking is at the model seam, whatever ran the command."""
    repo = _secret_repo(tmp_path)
    (repo / "credentials.json").write_text(CREDENTIALS_JSON.replace(JSON_ID, JSON_ID + "-new"))  # git diff: the old
    script = [{"tool_calls": [_run_tool("cat .env credentials.json"), _run_tool("git log -p"),
                              _run_tool("git diff"), {"name": "read", "arguments": {"path": ".env"}}]},
              answer(modify("calc.py", "    return a - b", "    return a + b"))]
    with ScriptedServer(script) as server:
        proc = run_cli(["--repo", str(repo), "--task", "fix add", "--test-command", PYTEST, "--no-reproduce"],
                       server_url=server.url)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    sent = server.all_text_sent()
    assert "[REDACTED:held-value]" in sent, "the doors did show the files' lines: masked"
    assert "DEBUG=true" in sent and "region  us-east" in sent, "what is no secret stays readable"
    assert "+  region: us-east" in sent and "diff --git a/credentials.json" in sent, "git log -p and git diff ran"
    assert "service_account" in sent, "a JSON value in plain words is no secret"
    for marker in MARKERS:
        assert marker not in sent, f"{marker} reached the model"
    logs = [path for path in isolated_env.rglob("*") if path.is_file()]
    assert any(path.suffix == ".jsonl" for path in logs), "the run log was written"
    for path in logs:
        text = path.read_text(errors="replace")
        assert not any(marker in text for marker in MARKERS), f"a marker in {path}"
    assert not any(marker in proc.stdout + proc.stderr for marker in MARKERS)


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")
def test_the_mcp_servers_test_tool_masks_them_for_the_clients_model(tmp_path: Path, isolated_env: Path) -> None:
    """mcp serve's client is a model too: its `test` tool answers with the failing test's output, masked; its `diff`
    resource shows a plan's change to a file that repeats a value, masked."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    repo = _secret_repo(tmp_path)
    params = StdioServerParameters(command=sys.executable, args=[str(ROOT / "main.py"), "mcp", "serve", "--repo",
                                                                 str(repo), "--test-command", PYTEST],
                                   env={"HOME": str(isolated_env), "PYTHONDONTWRITEBYTECODE": "1"})
    plan = {"changes": [{"file_path": "calc.py", "action": "modify", "search": "    return a - b",
                         "replace": f"    return a - b  # {ENV_TOKEN}"}]}
    seen: dict[str, str] = {}

    async def serve() -> None:
        async with Client(params, mode="legacy") as client:
            seen["test"] = (await client.call_tool("test", {})).content[0].text
            await client.call_tool("apply", {"plan": plan})
            seen["diff"] = (await client.read_resource("code-assistant://diff")).contents[0].text

    asyncio.run(asyncio.wait_for(serve(), 240))
    assert "test_add" in seen["test"] and "[REDACTED:held-value]" in seen["test"], seen["test"]
    assert "return a - b  # [REDACTED:held-value]" in seen["diff"], seen["diff"]
    assert not any(marker in seen["test"] + seen["diff"] for marker in MARKERS), seen


@pytest.mark.parametrize("name", [".env", ".env.production", "secrets.json", "credentials", ".npmrc"])
def test_each_kind_of_secret_file_is_searched(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_text("TOKEN=value-MARKER-1\n_authToken=npm-MARKER-2\n")
    assert list(Gate(tmp_path).secret_texts()) == [name]
