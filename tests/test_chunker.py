from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from code_assistant.parse.chunker import Chunk, chunk_file
from code_assistant.parse.code_parser import parse_source


def covered(source: str, chunks: list[Chunk]) -> None:
    """Every non-blank line is in exactly one chunk."""
    lines = source.splitlines()
    hits = [0] * (len(lines) + 1)
    for chunk in chunks:
        for row in range(chunk.start_line, chunk.end_line + 1):
            hits[row] += 1
    assert [r for r in range(1, len(lines) + 1) if lines[r - 1].strip() and hits[r] != 1] == []


def big_function(name: str, statements: int, indent: str = "") -> str:
    body = "".join(f"{indent}    value_{i} = compute_something(value_{i - 1}, factor={i})\n" for i in range(statements))
    return f"{indent}def {name}(value_0):\n{body}{indent}    return value_{statements - 1}\n"


def test_one_chunk_per_definition_with_headers() -> None:
    source = "import os\n\n\n" + big_function("first", 8) + "\n\n" + big_function("second", 8)
    chunks = chunk_file("pkg/mod.py", source, max_tokens=256)
    covered(source, chunks)
    by_symbol = {c.symbol: c for c in chunks}
    assert by_symbol["first"].kind == "function" and by_symbol["second"].kind == "function"
    assert by_symbol["first"].text.startswith("# file: pkg/mod.py\ndef first(value_0):\n")
    first = parse_source("pkg/mod.py", source).symbols[0]
    assert (by_symbol["first"].start_line, by_symbol["first"].end_line) == (first.start_line, first.end_line)


def test_small_neighbours_are_merged() -> None:
    source = "import os\nimport sys\n\nX = 1\n\ndef a():\n    return 1\n\ndef b():\n    return 2\n"
    chunks = chunk_file("m.py", source, max_tokens=256)
    assert len(chunks) == 1 and (chunks[0].start_line, chunks[0].end_line) == (1, 10)
    assert chunks[0].symbol is None and chunks[0].kind == "module"


def test_large_class_split_by_method_with_class_header() -> None:
    methods = "\n".join(big_function(f"method_{i}", 6, indent="    ") for i in range(4))
    source = f"class Store(Base):\n    \"\"\"Keeps things.\"\"\"\n    limit = 3\n\n{methods}"
    chunks = chunk_file("store.py", source, max_tokens=256)
    covered(source, chunks)
    assert chunks[0].symbol == "Store" and chunks[0].kind == "class" and chunks[0].start_line == 1
    method_chunks = [c for c in chunks if c.kind == "method"]
    assert [c.symbol for c in method_chunks] == [f"Store.method_{i}" for i in range(4)]
    assert all(c.text.startswith("# file: store.py\n# in: class Store(Base):\n    def method_") for c in method_chunks)


def test_definition_that_fits_is_never_cut() -> None:
    source = big_function("fits", 10) + "\n" + big_function("other", 3)
    chunks = chunk_file("m.py", source, max_tokens=400)
    fits = parse_source("m.py", source).symbols[0]
    assert any(c.start_line <= fits.start_line and fits.end_line <= c.end_line for c in chunks)


def test_oversized_definition_split_into_windows_with_same_header() -> None:
    source = "import os\n\n" + big_function("huge", 60)
    chunks = chunk_file("m.py", source, max_tokens=200)
    covered(source, chunks)
    windows = [c for c in chunks if c.symbol == "huge"]
    assert len(windows) > 2
    assert all(c.text.startswith("# file: m.py\n# in: def huge(value_0):\n") for c in windows)
    assert all(c.end_line + 1 == d.start_line for c, d in zip(windows, windows[1:]))
    assert all(len(c.text) // 3 + 1 <= 200 for c in windows)


def test_windows_prefer_blank_lines() -> None:
    paragraphs = ["".join(f"    step_{p}_{i} = run({i})\n" for i in range(6)) for p in range(8)]
    source = "def long():\n" + "\n".join(paragraphs)
    chunks = chunk_file("m.py", source, max_tokens=150)
    covered(source, chunks)
    lines = source.splitlines()
    for chunk in chunks[:-1]:
        assert chunk.end_line == len(lines) or not lines[chunk.end_line].strip()  # cut before a blank line


def test_custom_token_counter() -> None:
    source = big_function("f", 5) + "\n" + big_function("g", 5)
    chunks = chunk_file("m.py", source, max_tokens=60, count_tokens=lambda text: len(text.split()))
    covered(source, chunks)
    assert {c.symbol for c in chunks} == {"f", "g"}


def test_brace_language_methods_and_header() -> None:
    body = "".join(f"    total += compute(value, {i});\n" for i in range(12))
    methods = "".join(f"  m{i}(value) {{\n    let total = 0;\n{body}    return total;\n  }}\n" for i in range(3))
    source = f"import {{ compute }} from './compute';\n\nexport class Totals {{\n{methods}}}\n"
    chunks = chunk_file("web/totals.js", source, max_tokens=200)
    covered(source, chunks)
    method_chunks = [c for c in chunks if c.kind == "method"]
    assert [c.symbol for c in method_chunks] == ["Totals.m0", "Totals.m1", "Totals.m2"]
    assert method_chunks[0].text.startswith("// file: web/totals.js\n// in: export class Totals\n")


def test_file_without_definitions_and_unknown_language() -> None:
    source = "".join(f"key_{i} = {i}\n" for i in range(200))
    chunks = chunk_file("settings.ini", source, max_tokens=100)
    covered(source, chunks)
    assert all(c.kind == "window" and c.symbol is None for c in chunks)


def test_markdown_sections() -> None:
    source = "# Title\n\nIntro.\n\n## Install\n\nRun it.\n\n## Usage\n\n" + "".join(
        f"Paragraph {i} with several words in it to take some room.\n\n" for i in range(40))
    chunks = chunk_file("README.md", source, max_tokens=120)
    covered(source, chunks)
    assert chunks[0].symbol == "# Title" and chunks[0].kind == "section"
    assert any(c.symbol == "## Usage" and "# in: ## Usage" in c.text for c in chunks[1:])


def test_regex_languages_get_definition_chunks() -> None:
    source = "class Greeter\n  def hello(name)\n    puts name\n  end\nend\n\ndef helper\n  1\nend\n"
    chunks = chunk_file("g.rb", source, max_tokens=256)
    covered(source, chunks)
    assert parse_source("g.rb", source).parser == "regex"


def test_a_layout_rebuilds_the_same_chunks_without_the_chunker() -> None:
    """A warm query plans its vector fill from the layout the index keeps: the chunks must be exactly the ones the
    chunker made, text included (their ids hash the text)."""
    from code_assistant.index.vectors import from_layout, to_layout

    package = Path(__file__).resolve().parent.parent / "code_assistant"
    files = sorted(package.rglob("*.py"))[:40]
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        chunks = chunk_file(path.name, text, max_tokens=120)
        layout = to_layout(chunks, text)
        assert all(entry[5] is None for entry in layout), path  # header + lines, always, today
        assert from_layout(path.name, text, json.loads(json.dumps(layout))) == chunks, path


def test_a_line_the_file_repeats_is_counted_once() -> None:
    """Chunking counts tokens line by line (the model's tokenizer, a call per line): blank lines, closing brackets
    and `return` recur all through a file, and each distinct line costs one call, with the same chunks as a count
    of every line would give."""
    source = "".join(f"def f{i}(x):\n\n    if x:\n        return None\n\n    return x * {i}\n\n\n" for i in range(40))
    asked: list[str] = []

    def count(text: str) -> int:
        asked.append(text)
        return len(text.split()) + 1

    chunks = chunk_file("m.py", source, max_tokens=30, count_tokens=count)
    lines = set(source.splitlines())
    assert Counter(text for text in asked if text[:-1] in lines) == Counter(f"{line}\n" for line in lines)
    assert len(lines) == 2 * 40 + 3 and source.count("\n") == 8 * 40  # a quarter of the lines are distinct
    covered(source, chunks)
    assert [c.symbol for c in chunks[:2]] == ["f0", "f1"]
