"""The tools-reach bench's measuring parts: what an issue names, what a model would call for it, and when a tool's
output counts as reaching a gold file."""
from __future__ import annotations

from bench.issue_names import Named, named
from bench.tools_reach import found, grep_pattern, planned_calls
from bench.tools_reach_report import render

FILES = ["src/pkg/schema.py", "src/pkg/fields.py", "src/pkg/__init__.py", "docs/index.rst", "tests/test_schema.py"]


def test_named_takes_paths_first_innermost_frame_first_resolved_against_the_repository() -> None:
    issue = ('Traceback (most recent call last):\n  File "/env/site-packages/pkg/fields.py", line 3, in load\n'
             '  File "/env/site-packages/pkg/schema.py", line 9, in _do_load\nTypeError: bad\n'
             "See https://github.com/o/r/blob/main/docs/index.rst#L3 and nothing/such.py")
    paths = [n.text for n in named(issue, FILES) if n.kind == "path"]
    assert paths == ["src/pkg/schema.py", "src/pkg/fields.py", "docs/index.rst"]


def test_named_keeps_code_names_in_order_of_kind_and_leaves_words_out() -> None:
    issue = ("`Schema.load(data)` fails when `many` is set. The ModelSerializer calls max_age in "
             "sympy.core.basic but not the print function.\n```\nres.replace(x)\nsimplify(expr)\n```")
    found_names = [(n.kind, n.text) for n in named(issue, FILES)]
    assert found_names == [("backtick", "Schema.load"), ("backtick", "many"), ("dotted", "sympy.core.basic"),
                           ("camel", "ModelSerializer"), ("snake", "max_age"), ("dotted", "res.replace"),
                           ("call", "simplify")]


def test_named_never_returns_builtins_dunders_or_product_names() -> None:
    issue = "`print` and `len()` on GitHub; pvlib.__version__ is 0.9, `x` and M.T; ValueError(...)"
    assert named(issue, FILES) == []


def test_a_bare_file_name_is_a_path_only_when_one_file_has_it() -> None:
    assert named("see schema.py", FILES) == [Named("path", "src/pkg/schema.py")]
    assert named("see __init__.py", [*FILES, "other/__init__.py"]) == []


def test_planned_calls_search_first_then_read_paths_and_look_names_up_within_the_cap() -> None:
    names = [Named("path", "src/pkg/schema.py"), Named("snake", "max_age"), Named("dotted", "Cookie.value")]
    calls = planned_calls("the issue", names, max_calls=12)
    assert calls == [("search", {"query": "the issue", "k": 8}), ("read", {"path": "src/pkg/schema.py"}),
                     ("symbol", {"name": "max_age"}), ("grep", {"pattern": r"\bmax_age\b"}),
                     ("symbol", {"name": "Cookie.value"}), ("grep", {"pattern": r"\bvalue\b"})]
    assert len(planned_calls("x", [Named("snake", f"n_{i}") for i in range(20)], max_calls=12)) == 12
    assert grep_pattern("tracing::instrument") == r"\binstrument\b"


def test_found_needs_the_path_at_the_start_of_a_line() -> None:
    golds = ["src/pkg/schema.py"]
    assert found("src/pkg/schema.py:12: def load(self):", golds) == golds
    assert found("src/pkg/schema.py  (bm25, dense)\nsrc/pkg/schema.py:3: x", golds) == golds
    assert found("src/pkg/schema.py: lines 1-400 of 900", golds) == golds
    assert found("other.py:1: from src/pkg/schema.py import x", golds) == []
    assert found("src/pkg/schema.pyc:1: x", golds) == []


def _record(shown: bool, calls: list[list[str]], title: list[str], bm25: int | None, language: str = "py") -> dict:
    return {"set": "s", "instance_id": f"i{len(calls)}{shown}", "repo": "o/r", "language": language,
            "golds": ["g.py"],
            "context": {"shown": shown, "map": False}, "bm25": {"rank": bm25, "in_budget": bm25 == 1},
            "names": [["snake", "max_age"]], "title_search": {"tool": "search", "found": title, "capped": False,
                                                              "error": False, "tokens": 10, "seconds": 0.1},
            "calls": [{"n": n, "tool": "search" if n == 1 else "symbol", "arguments": {"name": "max_age"},
                       "found": hit, "capped": False, "error": False, "tokens": 5, "seconds": 0.1}
                      for n, hit in enumerate(calls, start=1)]}


def test_the_gain_counts_calls_that_find_what_the_context_does_not_show() -> None:
    records = {"s": [_record(True, [["g.py"]], ["g.py"], 1), _record(False, [[], ["g.py"]], [], 9),
                     _record(False, [[], [], []], [], None), {"set": "s", "instance_id": "e", "repo": "o/r",
                                                              "language": "py", "golds": ["g.py"], "error": "no mirror"}]}
    text = render(records)
    row = next(line for line in text.splitlines() if line.startswith("| s | 3 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "1/3 (33%)"  # the first context
    assert cells[4] == "1/3 (33%)"  # search
    assert cells[6] == "1/3 (33%)"  # a named look-up (the second call)
    assert cells[8] == "0 / 1 / 1 (33%)"  # gain within 1, 2 and 12 calls
    assert cells[9] == "1/3 (33%)"  # BM25 top 8
    assert "Not evaluated: s/e (no mirror)" in text
