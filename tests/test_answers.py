"""Answers as real models write them, parsed directly: the corpus (tests/fixtures/answers), reasoning set aside,
JSON repaired only when the repair changes nothing but punctuation, SEARCH/REPLACE blocks and unified diffs."""
from __future__ import annotations

from collections import Counter

import pytest

from code_assistant.answers.plan import PlanParseError, parse_answer
from code_assistant.answers.plan_json import lex_object, unfaithful
from code_assistant.answers.reasoning import DONE_SHOWN, THINKING_SHOWN, ReasoningFilter, split_reasoning
from code_assistant.answers.search_replace import parse_blocks
from code_assistant.answers.unified_diff import parse_diff
from tests.answer_corpus import Case, cases, check

CORPUS = cases()


@pytest.mark.parametrize("item", CORPUS, ids=[c.name for c in CORPUS])
def test_every_answer_of_the_corpus_parses_to_its_plan_or_is_refused_for_its_reason(item: Case) -> None:
    assert check(item) is None, f"{item.name} ({item.why}): {check(item)}"


def test_the_corpus_covers_every_shape_with_answers_that_parse_and_answers_that_are_refused() -> None:
    assert len(CORPUS) >= 30
    shapes = Counter(c.shape for c in CORPUS)
    assert set(shapes) == {"json", "prose", "reasoning", "sloppy-json", "search-replace", "unified-diff"}
    for shape in ("reasoning", "sloppy-json", "search-replace", "unified-diff"):
        outcomes = {c.refused for c in CORPUS if c.shape == shape}
        assert outcomes == {True, False}, f"{shape}: both kinds of answer are needed"
    formats = {c.expect.get("format") for c in CORPUS}
    assert {"json", "json_repaired", "search_replace", "unified_diff"} <= formats


# ----- reasoning ----------------------------------------------------------------------------------------------------
def test_reasoning_blocks_are_set_aside_and_kept() -> None:
    split = split_reasoning('<think>\ndraft {"changes": []}\n</think>\n\n{"changes": [1]}')
    assert (split.answer, split.reasoning, split.unclosed) == ('{"changes": [1]}', 'draft {"changes": []}', False)
    assert split_reasoning("no reasoning here").answer == "no reasoning here"


def test_a_closing_tag_without_an_opening_one_ends_the_reasoning() -> None:
    split = split_reasoning('thinking {"changes": []}\n</think>\nanswer')
    assert (split.answer, split.reasoning) == ("answer", 'thinking {"changes": []}')


def test_an_unclosed_block_is_all_reasoning() -> None:
    split = split_reasoning("<thinking>\nstill going {")
    assert (split.answer, split.unclosed) == ("", True)


def test_a_tag_inside_a_line_is_text_not_reasoning() -> None:
    text = '{"changes": [{"file_path": "t.html", "action": "create", "content": "<think>x</think>"}]}'
    assert split_reasoning(text).answer == text
    [op] = parse_answer(text).ops
    assert op.content == "<think>x</think>"


def test_gpt_oss_final_channel_is_the_answer() -> None:
    text = "<|channel|>analysis<|message|>hmm {}<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>"
    assert (split_reasoning(text).answer, split_reasoning(text).reasoning) == ("ok", "hmm {}")


def test_an_answer_that_is_only_reasoning_says_so() -> None:
    with pytest.raises(PlanParseError) as caught:
        parse_answer("<think>\nI would need to see more files.")
    assert caught.value.only_reasoning and "only reasoning" in str(caught.value)


@pytest.mark.parametrize("size", [1, 3, 16, 1000])
def test_the_stream_shows_markers_instead_of_reasoning_whatever_the_pieces(size: int) -> None:
    text = 'Plan:\n<think>\nsecret draft {"changes": []}\n</think>\n{"changes": [1]} and a <think> mid-line'
    shown: list[str] = []
    stream = ReasoningFilter(shown.append)
    for i in range(0, len(text), size):
        stream(text[i:i + size])
    stream.close()
    assert "".join(shown) == f'Plan:\n{THINKING_SHOWN}{DONE_SHOWN}{{"changes": [1]}} and a <think> mid-line'


def test_the_stream_of_an_answer_cut_off_mid_thought_ends_its_line() -> None:
    shown: list[str] = []
    stream = ReasoningFilter(shown.append)
    for piece in ("<thi", "nk>\nstill ", "thinking </thi"):
        stream(piece)
    stream.close()
    assert "".join(shown) == f"{THINKING_SHOWN}\n"


# ----- tolerant JSON ------------------------------------------------------------------------------------------------
def test_the_reader_tokenizes_strings_comments_and_literals() -> None:
    text = "{'a': \"x\\ny\", // c\n b: True, n: -1.5e2, /* {x} */ s: 'it\\'s'} trailing"
    lexed = lex_object(text, 0)
    assert lexed.end == text.index(" trailing")
    assert [(t.kind, t.value) for t in lexed.tokens] == [
        ("str", "a"), ("str", "x\ny"), ("word", "b"), ("word", "True"), ("word", "n"), ("num", "-1.5e2"),
        ("word", "s"), ("str", "it's")]
    assert lex_object('{"a": "open', 0).problem == "it ends inside a string"
    assert lex_object('{"a": [1, 2', 0).problem == "it ends with 2 bracket(s) still open"


def test_a_repair_may_change_punctuation_only() -> None:
    tokens = lex_object("{'changes': [{'file_path': 'a.py', 'overwrite': False,},]}", 0).tokens
    assert unfaithful({"changes": [{"file_path": "a.py", "overwrite": False}]}, tokens) is None
    assert "add 'x'" in str(unfaithful({"changes": [{"file_path": "a.py", "overwrite": False, "x": ""}]}, tokens))
    assert "drop" in str(unfaithful({"changes": [{"file_path": "a.py"}]}, tokens))
    assert unfaithful({"changes": [{"file_path": "b.py", "overwrite": False}]}, tokens) is not None
    assert unfaithful({"changes": [{"file_path": "a.py", "overwrite": None}]}, tokens) is not None


def test_a_duplicate_key_is_refused_not_collapsed() -> None:
    with pytest.raises(PlanParseError, match="without guessing"):
        parse_answer("{'changes': [{'file_path': 'a.py', 'search': 'x', 'search': 'y', 'replace': 'z',}]}")


def test_a_repaired_plan_is_still_checked_field_by_field() -> None:
    with pytest.raises(PlanParseError, match='change 1 has no "file_path"'):
        parse_answer("{'changes': [{'action': 'modify', 'search': 'x',},]}")
    with pytest.raises(PlanParseError, match='unknown action "rename"'):
        parse_answer("{'changes': [{'file_path': 'a.py', 'action': 'rename',}]}")


def test_strict_json_wins_over_a_repair_and_over_other_formats() -> None:
    plan = parse_answer('{"changes": [{"file_path": "a.py", "search": "x", "replace": "y"}]}\n'
                        'a.py\n<<<<<<< SEARCH\nx\n=======\nz\n>>>>>>> REPLACE\n')
    assert (plan.format, plan.ops[0].replace) == ("json", "y")


def test_code_with_braces_in_blocks_is_not_taken_for_json() -> None:
    answer = ("app.js\n```js\n<<<<<<< SEARCH\nfunction f() {\n  return {a: 1};\n=======\nfunction f() {\n"
              "  return {a: 2};\n>>>>>>> REPLACE\n```\n")
    plan = parse_answer(answer)
    assert plan.format == "search_replace" and plan.ops[0].replace == "function f() {\n  return {a: 2};\n"


# ----- SEARCH/REPLACE blocks and unified diffs ------------------------------------------------------------------
def test_aiders_older_markers_and_crlf_answers_are_read() -> None:
    [op] = parse_blocks("a.py\r\n<<<<<<< ORIGINAL\r\nx = 1\r\n=======\r\nx = 2\r\n>>>>>>> UPDATED\r\n")
    assert (op.file_path, op.search, op.replace) == ("a.py", "x = 1\r\n", "x = 2\r\n")


def test_a_block_that_replaces_with_nothing_deletes_the_lines() -> None:
    [op] = parse_blocks("a.py\n<<<<<<< SEARCH\nimport os\n=======\n>>>>>>> REPLACE\n")
    assert (op.action, op.search, op.replace) == ("modify", "import os\n", "")


def test_a_second_search_before_the_divider_is_an_unclosed_block() -> None:
    with pytest.raises(ValueError, match="block 1 \\(a.py\\) is not closed"):
        parse_blocks("a.py\n<<<<<<< SEARCH\nx\n<<<<<<< SEARCH\ny\n=======\nz\n>>>>>>> REPLACE\n")


def test_diffs_of_several_files_and_a_removal_only_hunk() -> None:
    ops = parse_diff("--- a/a.py\n+++ b/a.py\n@@ -1,2 +1 @@\n keep\n-drop\n--- a/b.py\n+++ b/b.py\n@@ @@\n-x\n+y\n")
    assert [(o.file_path, o.search, o.replace) for o in ops] == [("a.py", "keep\ndrop\n", "keep\n"),
                                                                  ("b.py", "x\n", "y\n")]


def test_a_diff_without_hunk_headers_is_read_from_its_file_header() -> None:
    [op] = parse_diff("--- a/a.py\n+++ b/a.py\n-x = 1\n+x = 2\n")
    assert (op.search, op.replace) == ("x = 1\n", "x = 2\n")


def test_blocks_or_a_diff_cut_off_at_the_token_limit_are_refused_but_a_whole_json_plan_is_not() -> None:
    """A diff cut off after a `-` line reads as a deletion; a cut after a block may have lost the blocks after it."""
    for text in ("--- a/a.py\n+++ b/a.py\n@@ @@\n-x = 1\n", "a.py\n<<<<<<< SEARCH\nx\n=======\ny\n>>>>>>> REPLACE\n"):
        assert parse_answer(text).ops
        with pytest.raises(PlanParseError, match="cut off") as caught:
            parse_answer(text, cut_off=True)
        assert caught.value.incomplete
    assert parse_answer('{"changes": [{"file_path": "a.py", "search": "x", "replace": "y"}]} Th', cut_off=True).ops


def test_a_diff_that_changes_nothing_is_refused() -> None:
    with pytest.raises(PlanParseError, match="no changed lines"):
        parse_answer("--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n x = 1\n")


# ----- a block that names no file -----------------------------------------------------------------------------------
UNNAMED = "```\n<<<<<<< SEARCH\ndef add(a, b):\n    return a - b\n=======\ndef add(a, b):\n    return a + b\n>>>>>>> REPLACE\n```"


def test_a_block_that_names_no_file_goes_to_the_one_file_holding_its_search_lines() -> None:
    """Qwen2.5-Coder-1.5B's first answer to calc-add in blocks: the right fix, no file named above it."""
    with pytest.raises(PlanParseError, match="block 1 names no file"):
        parse_answer(UNNAMED)
    asked: list[str] = []

    def owner(search: str) -> str | None:
        asked.append(search)
        return "calc.py"

    [op] = parse_answer(UNNAMED, owner=owner).ops
    assert (op.file_path, op.search, op.replace) == ("calc.py", "def add(a, b):\n    return a - b\n",
                                                      "def add(a, b):\n    return a + b\n")
    assert asked == ["def add(a, b):\n    return a - b\n"]
    with pytest.raises(PlanParseError, match="block 1 names no file"):  # no file, or several: refused, not guessed
        parse_answer(UNNAMED, owner=lambda search: None)
    named = "calc.py\n" + UNNAMED
    assert parse_answer(named, owner=lambda search: "other.py").ops[0].file_path == "calc.py"  # a name wins


def test_a_path_in_angle_brackets_names_the_blocks_file() -> None:
    """Qwen2.5-Coder-1.5B copies the blocks format's `<the path of the file ...>` placeholder with its brackets."""
    [op] = parse_answer("```\n<calc.py>\n" + UNNAMED.removeprefix("```\n")).ops
    assert op.file_path == "calc.py"
