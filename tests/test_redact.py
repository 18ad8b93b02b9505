"""redact() as a spec: what counts as a secret, what ordinary code stays untouched.

Fake credentials are assembled from pieces so this file itself never looks like it holds one.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest

from code_assistant.redact import looks_like_secret_file, redact
from tests.repos import ROOT

OPENAI_KEY = "sk-" + "proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z_AbCdEf7g"
OPENAI_LEGACY = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8s9T0u1V2w3X4"
ANTHROPIC_KEY = "sk-" + "ant-" + "api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Ji1Hg0FeDcBa-_xyz"
AWS_KEY_ID = "AKIA" + "Z7XQ4B2MNP3R5T6W"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzq8h3k9L2m"
GITHUB_TOKEN = "ghp" + "_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
GITHUB_PAT = "github" + "_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTU"
SLACK_TOKEN = "xox" + "b-" + "123456789012-123456789012-AbCdEfGhIjKlMnOpQrStUvWx"
GOOGLE_KEY = "AI" + "za" + "SyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"
STRIPE_KEY = "sk_" + "live_" + "51Hx2b3C4d5E6f7G8h9I0jKlMnOp"
JWT = "eyJ" + "hbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = ("-----BEGIN RSA " + "PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nMIIEpAIBAAKCAQEA1234567890abcdefABCDEF\n"
       "abcdefABCDEF0123456789+/abcdefABCDEF==\n-----END RSA " + "PRIVATE KEY-----")


def test_pem_private_key_block_is_replaced_whole() -> None:
    assert redact(f"key:\n{PEM}\nafter\n") == ("key:\n[REDACTED:private-key]\nafter\n", 1)


def test_pem_private_key_escaped_inside_a_json_string() -> None:
    text = json.dumps({"type": "service_account", "private_key": PEM.replace("RSA ", "") + "\n"})
    out, n = redact(text)
    assert n == 1 and "MIIE" not in out and '"private_key": "[REDACTED:private-key]\\n"' in out


def test_openai_keys() -> None:
    assert redact(f"OPENAI_API_KEY={OPENAI_KEY}") == ("OPENAI_API_KEY=[REDACTED:openai-key]", 1)
    assert redact(f'OpenAI(api_key="{OPENAI_LEGACY}")') == ('OpenAI(api_key="[REDACTED:openai-key]")', 1)


def test_anthropic_key() -> None:
    assert redact(f"export ANTHROPIC_API_KEY='{ANTHROPIC_KEY}'") == (
        "export ANTHROPIC_API_KEY='[REDACTED:anthropic-key]'", 1)


def test_aws_access_key_id_and_secret() -> None:
    text = f"[default]\naws_access_key_id = {AWS_KEY_ID}\naws_secret_access_key = {AWS_SECRET}\n"
    assert redact(text) == ("[default]\naws_access_key_id = [REDACTED:aws-access-key-id]\n"
                            "aws_secret_access_key = [REDACTED:aws-secret-key]\n", 2)


def test_github_tokens() -> None:
    assert redact(f"token: {GITHUB_TOKEN}") == ("token: [REDACTED:github-token]", 1)
    assert redact(f"GH={GITHUB_PAT}") == ("GH=[REDACTED:github-token]", 1)


def test_slack_token() -> None:
    assert redact(f"slack = WebClient({SLACK_TOKEN!r})") == ("slack = WebClient('[REDACTED:slack-token]')", 1)


def test_google_api_key() -> None:
    assert redact(f'const key = "{GOOGLE_KEY}";') == ('const key = "[REDACTED:google-api-key]";', 1)


def test_stripe_key() -> None:
    assert redact(f'stripe.api_key = "{STRIPE_KEY}"') == ('stripe.api_key = "[REDACTED:stripe-key]"', 1)


def test_jwt() -> None:
    assert redact(f"Authorization: Bearer {JWT}") == ("Authorization: Bearer [REDACTED:jwt]", 1)


@pytest.mark.parametrize(("text", "expected"), [
    ('password = "hunter2hunter2"', 'password = "[REDACTED:secret]"'),
    ("DB_PASSWORD=CorrectHorse9Battery", "DB_PASSWORD=[REDACTED:secret]"),
    ('"client_secret": "9f8e7d6c5b4a39281706"', '"client_secret": "[REDACTED:secret]"'),
    ("api_key: 'q8w7e6r5t4y3u2i1'", "api_key: '[REDACTED:secret]'"),
    ('token: str = "abcd1234efgh5678"', 'token: str = "[REDACTED:secret]"'),
    ("SECRET_KEY=django-insecure-x9#k2!m4", "SECRET_KEY=[REDACTED:secret]"),
    ("db:\n  password: s3cr3t-pa55\n", "db:\n  password: [REDACTED:secret]\n"),
])
def test_generic_secret_assignment_keeps_the_name(text: str, expected: str) -> None:
    assert redact(text) == (expected, 1)


def test_connection_string_password_keeps_user_and_host() -> None:
    assert redact("DATABASE_URL=postgres://admin:s3cr3tP4ss@db.internal:5432/app") == (
        "DATABASE_URL=postgres://admin:[REDACTED:url-password]@db.internal:5432/app", 1)


@pytest.mark.parametrize("code", [
    'password = request.form["password"]',
    "token = get_token()",
    "def verify_password(password):",
    "client = Client(api_key=settings.api_key)",
    'key = os.environ["API_KEY"]',
    "max_tokens: int = 4096",
    'token_url = "https://oauth2.googleapis.com/token"',
    'TOKEN_ENV = "OPENAI_API_KEY"',
    'grant = {"token_type": "access_token"}',
    'url = f"postgres://{user}:{password}@{host}/db"',
    "DB_PASSWORD=${DB_PASSWORD}",
    "password = None",
    "self.token = token_v2",
    "secret_path = self.config.secret_path",
    "https://example.com:8080/path?q=1",
    'if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):',
    "task-sk-learn-model-selection-grid-search",
    'tokenizer = Tokenizer(bos_token="__start__")',
    '"Condition": {"StringEquals": {"secretsmanager:ResourceTag/team": "data"}}',
])
def test_ordinary_code_is_untouched(code: str) -> None:
    assert redact(code) == (code, 0)


def test_redacting_twice_equals_once() -> None:
    text = "\n".join([PEM, OPENAI_KEY, ANTHROPIC_KEY, AWS_KEY_ID, f"aws_secret_access_key={AWS_SECRET}",
                      GITHUB_TOKEN, SLACK_TOKEN, GOOGLE_KEY, STRIPE_KEY, JWT, 'password = "hunter2hunter2"',
                      "postgres://u:p4ssw0rd@h/db"])
    once, n = redact(text)
    assert n == 12
    assert redact(once) == (once, 0)


HANG_GUARD_S = 60  # anti-hang only: these inputs take about a second when scanned linearly, hours when not
_SCAN = ("import json, sys\nfrom code_assistant.redact import looks_like_secret_file, redact\ntext = sys.stdin.read()\n"
         "out, n = redact(text)\nprint(json.dumps([out == text, n, looks_like_secret_file(text)]))")


@pytest.mark.parametrize("text", ["password" * 300_000, "a://" + "b:" * 500_000, 'token = "' + "a" * 1_000_000,
                                  "-----BEGIN RSA PRIVATE KEY-----\n" + "QUJD\n" * 200_000],
                         ids=["a-megabyte-word", "a-scheme-then-colons", "an-unclosed-quote", "a-key-with-no-end"])
def test_pathological_input_is_scanned_in_linear_time(text: str) -> None:
    """Megabyte inputs made to make a backtracking pattern retry from every position: one that did (quadratic or
    worse) would not finish for hours, so finishing at all, with nothing redacted, is the property; the guard only
    keeps a regression from hanging the suite, and how fast a scan is belongs in bench/."""
    try:
        scan = subprocess.run([sys.executable, "-c", _SCAN], input=text, capture_output=True, text=True, cwd=ROOT,
                              timeout=HANG_GUARD_S, check=True)
    except subprocess.TimeoutExpired:
        pytest.fail(f"redact() did not finish {len(text)} characters within {HANG_GUARD_S} s: a pattern backtracks")
    assert json.loads(scan.stdout) == [True, 0, False]  # unchanged, nothing redacted, not a secret file


def test_redaction_is_logged_without_the_secret(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="code_assistant.redact"):
        redact(f"key={OPENAI_KEY}")
    assert "openai-key=1" in caplog.text and OPENAI_KEY not in caplog.text


def test_secret_files_are_recognised() -> None:
    assert looks_like_secret_file(f"# deploy key\n{PEM}\n")
    assert looks_like_secret_file(f"AWS_ACCESS_KEY_ID={AWS_KEY_ID}\n")
    assert looks_like_secret_file(f"settings = {{'token': '{GITHUB_TOKEN}'}}")


def test_ordinary_and_example_files_are_not_secret_files() -> None:
    assert not looks_like_secret_file("def login(password):\n    return check(password)\n")
    assert not looks_like_secret_file('password = "hunter2hunter2"  # test fixture\n')
    assert not looks_like_secret_file("aws_access_key_id = AKIA" + "IOSFODNN7EXAMPLE\n")  # AWS documentation's example
    assert not looks_like_secret_file(f"Authorization: Bearer {JWT}\n")
