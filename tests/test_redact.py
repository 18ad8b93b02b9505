"""redact() as a spec: what counts as a secret, what ordinary code stays untouched.

Fake credentials are assembled from pieces so this file itself never looks like it holds one; the private keys of the
key-block tests are made by openssl and ssh-keygen when the tests run.
"""
from __future__ import annotations

import base64
import json
import logging
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from code_assistant.redact import RULES, looks_like_secret_file, mask_key_blocks, redact
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


NETRC_PW = "Tr0ub4dor" + "&3-netrc"
USER_PASS_B64 = base64.b64encode(b"deploy:" + b"Tr0ub4dor&3").decode()  # docker's and npm's `auth`
NPM_TOKEN = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
PYPI_TOKEN = "pypi-" + "AgEIcHlwaS5vcmcCJDdlNzY2ZjRmLTBkNzUtNDk3Ni04NDBlLTI3YjAzNmY4ZmI1ZQACKlsz"
OPAQUE = "3f9a7c2e" + "1b8d4f6a"
UUID = "7f3e2c1a-" + "9b8d-4e6f-a1b2-c3d4e5f60718"
# DER in base64, wrapped as PEM wraps it: a private key's (PKCS#1: a SEQUENCE, version 0, the modulus) and a
# certificate's (a SEQUENCE inside the SEQUENCE): what the bytes are decides, not the shape
DER_KEY = base64.b64encode(bytes.fromhex("308204a40201000282010100") + bytes(range(7, 255)) * 2).decode()
DER_CERT = base64.b64encode(bytes.fromhex("3082016e30820113a0030201020214") + bytes(range(9, 250))).decode()
KEY_LINES, CERT_LINES = textwrap.wrap(DER_KEY, 64), textwrap.wrap(DER_CERT, 64)
KEY_MIDDLE = KEY_LINES[3:]  # what a `read` range or a `tail` shows: neither the BEGIN line nor the DER's start
CERT_PEM = "-----BEGIN CERTIFICATE-----\n" + "\n".join(CERT_LINES) + "\n-----END CERTIFICATE-----\n"


def numbered(lines: list[str], first: int, text: str | None = None) -> str:
    """Lines as the `read` tool shows them; `text` in place of each one's content when given."""
    return "\n".join(f"{n:>5}  {text or line}" for n, line in enumerate(lines, first))


R = "[REDACTED:{}]".format
# One case (at least) for every row of RULES and every format a credential comes in: (text, what redact makes of it)
FORMATS = [
    pytest.param(f"machine api.example.com login deploy password {NETRC_PW}\n",
                 f"machine api.example.com login deploy password {R('netrc-password')}\n", id="netrc-one-line"),
    pytest.param(f"machine git.example.com\n  login deploy\n  password {NETRC_PW}\n",
                 f"machine git.example.com\n  login deploy\n  password {R('netrc-password')}\n", id="netrc-lines"),
    pytest.param(f"default password {NETRC_PW} login anonymous",
                 f"default password {R('netrc-password')} login anonymous", id="netrc-password-before-login"),
    pytest.param(f"    3      password {NETRC_PW}", f"    3      password {R('netrc-password')}",
                 id="netrc-password-line-of-a-read-range"),
    pytest.param(f'{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{USER_PASS_B64}"}}}}}}',
                 f'{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{R("docker-auth")}"}}}}}}', id="docker-auth"),
    pytest.param(f'"ghcr.io": {{"identitytoken": "{OPAQUE}"}}', f'"ghcr.io": {{"identitytoken": "{R("docker-auth")}"}}',
                 id="docker-identitytoken"),
    pytest.param("    client-key-data: " + base64.b64encode(PEM.encode()).decode(),
                 f"    client-key-data: {R('private-key')}", id="kube-client-key-data"),
    pytest.param(f"  user:\n    token: {OPAQUE}\n", f"  user:\n    token: {R('secret')}\n", id="kube-token"),
    pytest.param("  user:\n    password: kubeAdm1n\n", f"  user:\n    password: {R('secret')}\n", id="kube-password"),
    pytest.param(f"//npm.pkg.example.com/:_authToken={UUID}", f"//npm.pkg.example.com/:_authToken={R('npm-auth')}",
                 id="npmrc-authToken"),
    pytest.param(f"//registry.npmjs.org/:_authToken={NPM_TOKEN}", f"//registry.npmjs.org/:_authToken={R('npm-token')}",
                 id="npm-token"),
    pytest.param(f"_auth={USER_PASS_B64}\nemail=me@example.com", f"_auth={R('npm-auth')}\nemail=me@example.com",
                 id="npmrc-auth"),
    pytest.param('//registry.example.com/:_password="aHVudGVy" + "Mi1ucG0="'.replace('" + "', ""),
                 f'//registry.example.com/:_password="{R("npm-auth")}"', id="npmrc-password"),
    pytest.param(f"[pypi]\nusername = __token__\npassword = {PYPI_TOKEN}\n",
                 f"[pypi]\nusername = __token__\npassword = {R('pypi-token')}\n", id="pypi-token"),
    pytest.param("[testpypi]\nusername = deploy\npassword = hunter2\n",
                 f"[testpypi]\nusername = deploy\npassword = {R('ini-password')}\n", id="pypirc-password"),
    pytest.param(f"https://deploy:{OPAQUE}@git.example.com\n", f"https://deploy:{R('url-password')}@git.example.com\n",
                 id="git-credentials-store"),
    pytest.param("db_pass: hunter2x", f"db_pass: {R('secret')}", id="db_pass-yaml"),
    pytest.param("SMTP_PASS=CorrectHorse9", f"SMTP_PASS={R('secret')}", id="PASS-env"),
    pytest.param("smtpPwd = 'Tr0ub4dor&3'", f"smtpPwd = '{R('secret')}'", id="camelCase-pwd"),
    pytest.param(f"Authorization: Basic {USER_PASS_B64}", f"Authorization: Basic {R('authorization')}",
                 id="basic-header"),
    pytest.param(f"curl -H 'Authorization: Bearer {OPAQUE}' https://api.example.com",
                 f"curl -H 'Authorization: Bearer {R('authorization')}' https://api.example.com", id="bearer-in-curl"),
    pytest.param(f'headers = {{"Proxy-Authorization": "Basic {USER_PASS_B64}"}}',
                 f'headers = {{"Proxy-Authorization": "Basic {R("authorization")}"}}', id="proxy-header-in-a-dict"),
    pytest.param("root:$6$Zt3qWv9x$9m2jJk8yGkzv1Tq3Yb0bQ4nR7sUuE2wVxLpCdAaH5fIoKlMnBgHjZ1cX0vNQwErTyUiOpAsDfGhJkLzXcVbNm/:19000:0:99999:7:::",
                 f"root:{R('password-hash')}:19000:0:99999:7:::", id="shadow-sha512-crypt"),
    pytest.param("admin:$2y$10$abcdefghijklmnopqrstuuK6pHTdm3xq1Z0Z7a8jY4fZ6L9k2rV.W", f"admin:{R('password-hash')}",
                 id="htpasswd-bcrypt"),
    pytest.param(numbered(KEY_MIDDLE, 5), numbered(KEY_MIDDLE, 5, R("private-key")), id="key-lines-in-a-read-range"),
    pytest.param("\n".join(KEY_MIDDLE[-2:] + ["-----END RSA PRIVATE KEY-----"]),
                 "\n".join([R("private-key")] * 2 + ["-----END RSA PRIVATE KEY-----"]), id="key-lines-then-END"),
    pytest.param("k.py:1: -----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(f"k.py:{n}: {line}" for n, line in
                                                                         enumerate(KEY_LINES, 2)),
                 "k.py:1: -----BEGIN RSA PRIVATE KEY-----\n" + "\n".join(f"k.py:{n}: {R('private-key')}" for n in
                                                                         range(2, len(KEY_LINES) + 2)),
                 id="key-lines-under-BEGIN-in-grep"),
    pytest.param(f"deploy.py:7:     '{KEY_LINES[0]}'", f"deploy.py:7:     '{R('private-key')}'",
                 id="a-keys-first-line-alone"),
    pytest.param(f'{{"signing_key": "{DER_KEY}"}}', f'{{"signing_key": "{R("private-key")}"}}', id="der-on-one-line"),
]


@pytest.mark.parametrize(("text", "expected"), FORMATS)
def test_each_credential_format_is_redacted_and_the_rest_kept(text: str, expected: str) -> None:
    assert redact(text) == (expected, 1)


def _fires(rule: object, text: str) -> bool:
    return any(rule.accept is None or rule.accept(m) for m in rule.pattern.finditer(text))  # type: ignore[attr-defined]


def test_every_row_of_the_table_has_a_case() -> None:
    cases = [p.values[0] for p in FORMATS] + [PEM, OPENAI_KEY, ANTHROPIC_KEY, AWS_KEY_ID, GITHUB_TOKEN, SLACK_TOKEN,
                                              GOOGLE_KEY, STRIPE_KEY, JWT, f"aws_secret_access_key={AWS_SECRET}",
                                              'password = "hunter2hunter2"']
    assert [n for n, rule in enumerate(RULES) if not any(_fires(rule, text) for text in cases)] == []


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
    assert redact(text) == (("[default]\naws_access_key_id = [REDACTED:aws-access-key-id]\n"
                             "aws_secret_access_key = [REDACTED:aws-secret-key]\n"), 2)


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
    'cp "$1$PREFIX/usr/local/bin/tool" "$2"',  # shell: a positional argument before a variable, no crypt hash
    'password = request.form["password"]',
    "token = get_token()",
    "def verify_password(password):",
    "client = Client(api_key=settings.api_key)",
    'key = os.environ["API_KEY"]',
    "max_tokens: int = 4096",
    'token_url = "https://oauth2.googleapis.com/token"',
    'TOKEN_ENV = "OPENAI_API_KEY"',
    'grant = {"token_type": "access_token"}',
    # real code the shapes must leave alone: ours, openai's, pytest's, lock files, public keys and certificates
    '"tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",',
    '"max_tokens_per_1_minute": max_tokens_per_1_minute,',
    "self.enable_assertion_pass_hook:\n            self.format_variables: list[str] = []",
    "passed_env: tuple[str, ...] = ()  # --pass-env: secret-looking variables the user lets through",
    "bypass_cache: enabled1",
    "machine learning password reset",
    "the password must hold 12 characters\n",
    "self._auth = auth\n_auth = None\n",
    'headers["Authorization"] = f"Bearer {token}"',
    '"Authorization": "Bearer " + token,',
    "Authorization: Bearer $GITHUB_TOKEN",
    "Authorization: Bearer YOUR_TOKEN",
    '"auth": "oauth2"',
    "//registry.npmjs.org/:_authToken=${NPM_TOKEN}",
    "rows = data[key]\npassword = get_password()\n",
    "[database]\npassword = ${DB_PASSWORD}\n",
    CERT_PEM,
    numbered(CERT_LINES, 2),  # a certificate's lines: its DER says it is no key
    "\n".join(["9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"] * 3),  # sha256 digests
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIKx1Lw9aFc8V4Hk1m8n9Qp2r3s4t5u6v7w8x9y0z1A2B me@host",
    '"integrity": "sha512-' + "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08KJ/4+Abc=" + '"',
    "golang.org/x/text v0.3.7 h1:olpwvP2KacW1ZWvsR7uQhoyTYvKAupfQrRGBFM352Gk=",
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


@pytest.mark.parametrize("text", [
    "password" * 300_000, "a://" + "b:" * 500_000, 'token = "' + "a" * 1_000_000,
    "-----BEGIN RSA PRIVATE KEY-----\n" + "QUJD\n" * 200_000,
    "M" + "a" * 1_000_000 + "\n" + ("abcdefgh" * 8 + "\n") * 15_000,  # a base64 word, then lines of a key's width
    ("machine h login u account a " * 9_000 + "\n[s]\n" + "  x = 1\n" * 9_000 + '"auth": "' * 9_000
     + "Authorization: Basic " * 9_000 + "_auth=" * 9_000),
], ids=["a-megabyte-word", "a-scheme-then-colons", "an-unclosed-quote", "a-key-with-no-end", "base64-shapes",
        "credential-keywords-without-credentials"])
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


# ----- real keys, whatever part of them is in view ----------------------------------------------------------------
_KEYGEN = {"rsa-pkcs1": "openssl genrsa -traditional 2048", "rsa-pkcs8": "openssl genpkey -algorithm RSA",
           "ec-sec1": "openssl ecparam -name prime256v1 -genkey -noout",
           "ec-pkcs8": "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256",
           "openssh-ed25519": "ssh-keygen -q -t ed25519 -N '' -C '' -f {path} && cat {path}"}


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """One private key of each flavour, made by openssl and ssh-keygen."""
    if not shutil.which("openssl") or not shutil.which("ssh-keygen"):
        pytest.skip("openssl and ssh-keygen make the keys")
    folder = tmp_path_factory.mktemp("keys")
    return {name: subprocess.run(command.format(path=folder / name), shell=True, capture_output=True, text=True,
                                 check=True).stdout for name, command in _KEYGEN.items()}


def _views(pem: str) -> dict[str, str]:
    """The key as a tool, a test's output or a config shows it: whole, a `read` range that starts after its BEGIN
    line, `grep` over its file, `tail -n +2`, its last lines, indented under a YAML key, in base64 (kube)."""
    lines = pem.strip().splitlines()
    return {"whole": pem, "read-from-line-2": numbered(lines[1:], 2), "read-from-line-3": numbered(lines[2:], 3),
            "grep": "\n".join(f"deploy/key.txt:{n}: {line}" for n, line in enumerate(lines, 1)),
            "tail": "\n".join(lines[1:]), "last-lines": "\n".join(lines[-3:]),
            "yaml": "tls:\n  key: |\n" + textwrap.indent(pem, "    "),
            "kube": f"    client-key-data: {base64.b64encode(pem.encode()).decode()}\n"}


@pytest.mark.parametrize("view", ["whole", "read-from-line-2", "read-from-line-3", "grep", "tail", "last-lines", "yaml",
                                  "kube"])
def test_no_line_of_a_private_key_survives_whatever_part_is_in_view(keys: dict[str, str], view: str) -> None:
    for name, pem in keys.items():
        body = [line for line in pem.splitlines() if not line.startswith("-----")]
        out, count = redact(_views(pem)[view])
        assert count >= 1 and [line for line in body if line in out] == [], f"{name}, {view}"


def test_a_certificate_in_view_stays_and_a_key_beside_it_does_not(keys: dict[str, str]) -> None:
    out, count = redact(CERT_PEM + keys["ec-sec1"])
    assert count == 1 and out.startswith(CERT_PEM) and out.endswith("[REDACTED:private-key]\n")


def test_in_a_file_holding_a_key_every_line_of_its_block_is_masked_and_the_line_numbers_kept(
        keys: dict[str, str]) -> None:
    pem = keys["rsa-pkcs1"].splitlines()
    text = "\n".join(["import ssl", 'KEY = """', *pem, '"""', f'CONFIG = {{"key": {json.dumps(keys["ec-pkcs8"])}}}',
                      "def load():", ""])
    assert mask_key_blocks(text) == "\n".join(["import ssl", 'KEY = """', pem[0], *[R("private-key")] * (len(pem) - 2),
                                               pem[-1], '"""', f'CONFIG = {{"key": "{R("private-key")}\\n"}}',
                                               "def load():", ""])
    assert mask_key_blocks("no key here\n") == "no key here\n" and mask_key_blocks(CERT_PEM) == CERT_PEM


def test_model_replies_from_the_answer_corpus_are_untouched() -> None:
    """Real models' answers (code, diffs, prose, reasoning): none holds a credential, so none may lose a character."""
    replies = sorted((Path(__file__).parent / "fixtures" / "answers").glob("*.txt"))
    assert replies
    assert [p.name for p in replies if redact(p.read_text(encoding="utf-8"))[1]] == []
