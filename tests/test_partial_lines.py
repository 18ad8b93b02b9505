"""Search texts that start or stop mid-line, refusals that name the real difference, blank lines kept as written.

Every case goes through the public door: `FileEditor(repo_path).apply_edit(EditOperation(...))` on a real file.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from code_assistant.edit.editor import FileEditor
from code_assistant.edit.edits import EditOperation, EditResult

CALC = "def add(a, b):\n    return a * b\n\n\ndef mul(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a - b\n"


def apply(tmp_path: Path, content: str, search: str, replace: str, name: str = "calc.py") -> tuple[EditResult, str]:
    repo = tmp_path / "repo"
    repo.mkdir(exist_ok=True)
    (repo / name).write_bytes(content.encode())
    editor = FileEditor(repo_path=repo, state_dir=tmp_path / "state")
    result = editor.apply_edit(EditOperation(name, search, replace))
    editor.finish()
    return result, (repo / name).read_bytes().decode()


@pytest.mark.parametrize("search, replace", [
    ("return a * b\n\n\ndef mul", "return a + b\n\n\ndef mul"),  # starts after the indentation, stops before (a, b):
    ("a * b\n\n\ndef mul(a", "a + b\n\n\ndef mul(a"),  # starts and stops inside lines
    ("def add(a, b):\n    return a *", "def add(a, b):\n    return a +"),  # stops before the last operand
    ("a * b", "a + b"),  # a piece of one line
])
def test_an_exact_search_text_found_once_applies_wherever_the_lines_break(tmp_path: Path, search: str,
                                                                          replace: str) -> None:
    result, after = apply(tmp_path, CALC, search, replace)
    assert result.ok and result.strategy == "exact", result.message
    assert after == FIXED


def test_the_file_text_around_a_mid_line_match_is_kept_when_the_cut_line_changes(tmp_path: Path) -> None:
    result, after = apply(tmp_path, CALC, "return a * b\n\n\ndef mul", "return a + b\n\n\ndef multiply")
    assert result.ok
    assert after == FIXED.replace("def mul(a, b)", "def multiply(a, b)")


def test_an_exact_search_text_found_twice_is_refused_as_ambiguous(tmp_path: Path) -> None:
    content = "x = compute(a, b)\ny = compute(a, b)\n"
    result, after = apply(tmp_path, content, "compute(a, b)", "compute(b, a)")
    assert not result.ok and "found 2 times, at lines 1, 2" in result.message
    assert after == content


def test_one_whole_line_occurrence_wins_over_copies_inside_longer_lines(tmp_path: Path) -> None:
    content = "def f():\n    return 1\n\n\ndef g():\n    if x:\n        return 1\n"
    result, after = apply(tmp_path, content, "    return 1\n", "    return 2\n")
    assert result.ok and after == content.replace("    return 1\n", "    return 2\n", 1)


def test_a_whole_line_search_deleting_the_last_line_keeps_the_missing_final_newline(tmp_path: Path) -> None:
    result, after = apply(tmp_path, "a = 1\nb = 2", "b = 2", "")
    assert result.ok and after == "a = 1"


def test_a_replacement_without_the_searchs_closing_newline_does_not_join_lines(tmp_path: Path) -> None:
    result, after = apply(tmp_path, "    x = 1\ny = 2\n", "x = 1\n", "x = 3")
    assert result.ok and after == "    x = 3\ny = 2\n"


def test_a_cut_first_line_with_trailing_space_drift_is_matched_tolerantly(tmp_path: Path) -> None:
    result, after = apply(tmp_path, CALC, "return a * b  \n\n\ndef mul", "return a + b\n\n\ndef mul")
    assert result.ok and result.strategy == "whitespace_partial", result.message
    assert after == FIXED


def test_a_cut_last_line_with_lost_indentation_is_re_indented(tmp_path: Path) -> None:
    content = "class C:\n    def f(self):\n        x = 1\n        return x + 1\n"
    result, after = apply(tmp_path, content, "def f(self):\n    x = 1\n    return x",
                          "def f(self):\n    x = 2\n    return x")
    assert result.ok and result.strategy == "indent_partial", result.message
    assert after == content.replace("x = 1", "x = 2")


def test_a_cut_line_that_becomes_ambiguous_is_refused(tmp_path: Path) -> None:
    content = "def f():\n    a = 1\n    return a + 1\n\n\ndef g():\n    a = 1\n    return a + 2\n"
    result, after = apply(tmp_path, content, "a = 1\n    return a +", "a = 5\n    return a +")
    assert not result.ok and "found 2 times" in result.message
    assert after == content


def test_a_refusal_names_missing_leading_spaces_instead_of_showing_two_equal_lines(tmp_path: Path) -> None:
    content = "def add(a, b):\n    total = a + b\n    return total\n"
    result, after = apply(tmp_path, content, "def add(a, b):\n  total = a + b\n    return total\n", "x\n")
    assert not result.ok and after == content
    assert "missing 2 leading spaces" in result.message and "'    '" in result.message
    assert "'total = a + b' differs from file line 2 'total = a + b'" not in result.message


def test_a_refusal_names_a_line_cut_before_its_end(tmp_path: Path) -> None:
    content = "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"
    result, _ = apply(tmp_path, content, "def add\n    return a + b\n\n\ndef mul(a, b):\n", "x\n")
    assert not result.ok
    assert "cut before '(a, b):'" in result.message


def test_a_refusal_names_a_tab_against_spaces(tmp_path: Path) -> None:
    content = "func f() {\n\tx := 1\n\ty := 2\n\treturn x\n}\n"
    result, _ = apply(tmp_path, content, "func f() {\n    x := 1\n\ty := 2\n", "x\n", name="f.go")
    assert not result.ok
    assert "indented with '    ' where the file has '\\t' (tabs against spaces)" in result.message, result.message


def test_a_refusal_names_uneven_indentation_with_repr(tmp_path: Path) -> None:
    content = "class C:\n    def f(self):\n        x = 1\n        return x\n"
    result, _ = apply(tmp_path, content, "def f(self):\n  x = 1\n    return x\n", "x\n")
    assert not result.ok
    assert "does not shift by the same amount" in result.message and "'        '" in result.message


def test_blank_lines_keep_their_whitespace_when_the_replacement_is_re_indented(tmp_path: Path) -> None:
    content = "class C:\n    def f(self):\n        return 1\n"
    search = "def f(self):\n    return 1\n"
    replace = "def f(self):\n    x = 1\n    \n    return x\n"
    result, after = apply(tmp_path, content, search, replace)
    assert result.ok and result.strategy == "indent"
    assert after == "class C:\n    def f(self):\n        x = 1\n    \n        return x\n"


def test_blank_lines_keep_their_whitespace_when_indentation_is_removed(tmp_path: Path) -> None:
    content = "def f():\n    return 1\n"
    result, after = apply(tmp_path, content, "        def f():\n            return 1\n",
                          "        def f():\n            x = 1\n    \n            return x\n")
    assert result.ok and result.strategy == "indent"
    assert after == "def f():\n    x = 1\n    \n    return x\n"


def test_blank_lines_keep_their_whitespace_under_trailing_space_tolerance(tmp_path: Path) -> None:
    content = "def f():\n    return 1\n"
    result, after = apply(tmp_path, content, "def f():  \n    return 1\n",
                          "def f():  \n    x = 1\n    \n    return x\n")
    assert result.ok and result.strategy == "whitespace"
    assert after == "def f():\n    x = 1\n    \n    return x\n"


def test_blank_lines_of_a_replaced_symbol_keep_their_whitespace(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "m.py").write_text("class C:\n    def f(self):\n        return 1\n")
    editor = FileEditor(repo_path=repo, state_dir=tmp_path / "state")
    result = editor.apply_edit(EditOperation("m.py", action="replace_symbol", symbol="C.f",
                                             content="def f(self):\n    x = 1\n    \n    return x\n"))
    editor.finish()
    assert result.ok, result.message
    assert (repo / "m.py").read_text() == "class C:\n    def f(self):\n        x = 1\n    \n        return x\n"
