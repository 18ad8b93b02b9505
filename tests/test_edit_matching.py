"""The pure matcher: strategies in order, refusals written for the model, line endings and final newline kept."""
from __future__ import annotations

from code_assistant.edit.lines import split_lines
from code_assistant.edit.matching import apply_search_replace
from code_assistant.edit.symbol_edit import apply_symbol_edit

SRC = '''import os


def load(path):
    with open(path) as handle:
        data = handle.read()
    return data


class Store:
    def get(self, key):
        value = self.items.get(key)
        if value is None:
            raise KeyError(key)
        return value

    def put(self, key, value):
        self.items[key] = value
'''

GO_SRC = "package main\n\nfunc add(a int, b int) int {\n\tif a > 0 {\n\t\treturn a + b\n\t}\n\treturn b\n}\n"


def test_split_lines_round_trips_mixed_endings() -> None:
    text = "a\r\nb\nc"
    bodies, eols = split_lines(text)
    assert bodies == ["a", "b", "c"] and eols == ["\r\n", "\n", ""]
    assert "".join(b + e for b, e in zip(bodies, eols)) == text


def test_exact_match_replaces_only_that_region() -> None:
    out = apply_search_replace(SRC, "        data = handle.read()\n", "        data = handle.read().strip()\n")
    assert out.ok and out.strategy == "exact" and out.line == 6
    assert out.content == SRC.replace("handle.read()", "handle.read().strip()")


def test_trailing_whitespace_and_crlf_in_search_are_tolerated() -> None:
    search = "    return data   \r\n"
    out = apply_search_replace(SRC, search, "    return data.upper()\n")
    assert out.strategy == "whitespace"
    assert out.content == SRC.replace("    return data\n", "    return data.upper()\n")


def test_lost_indentation_is_restored_in_the_replacement() -> None:
    search = "value = self.items.get(key)\nif value is None:\n    raise KeyError(key)\n"
    replace = "value = self.items.get(key)\nif value is None:\n    return default\n"
    out = apply_search_replace(SRC, search, replace)
    assert out.ok and out.strategy == "indent"
    assert "            return default\n" in out.content
    assert out.content == SRC.replace("raise KeyError(key)", "return default")


def test_extra_indentation_is_removed_from_the_replacement() -> None:
    search = "        def put(self, key, value):\n            self.items[key] = value\n"
    replace = "        def put(self, key, value):\n            self.items[key] = value\n            self.dirty = True\n"
    out = apply_search_replace(SRC, search, replace)
    assert out.strategy == "indent"
    assert out.content == SRC + "        self.dirty = True\n"


def test_spaces_written_for_a_tab_indented_file_become_tabs() -> None:
    search = "    if a > 0 {\n        return a + b\n    }\n"
    replace = "    if a > 0 {\n        return a - b\n    }\n"
    out = apply_search_replace(GO_SRC, search, replace)
    assert out.strategy == "indent"
    assert out.content == GO_SRC.replace("a + b", "a - b")


def test_elision_keeps_the_lines_it_stands_for() -> None:
    search = "class Store:\n    def get(self, key):\n...\n        return value\n"
    replace = "class Store:\n    def get(self, key, default=None):\n...\n        return value or default\n"
    out = apply_search_replace(SRC, search, replace)
    assert out.strategy == "elision"
    expected = SRC.replace("def get(self, key):", "def get(self, key, default=None):").replace(
        "        return value\n", "        return value or default\n")
    assert out.content == expected


def test_a_class_line_above_a_method_with_the_lines_between_left_out_is_an_elision() -> None:
    """An excerpt shows `class Store:`, `⋮`, then `def put`: a small model copies the class line and the method as
    neighbours, with or without the ⋮."""
    for cut in ("", "⋮\n"):
        search = f"class Store:\n{cut}    def put(self, key, value):\n        self.items[key] = value\n"
        replace = (f"class Store:\n{cut}    def put(self, key, value):\n        self.items[key] = value\n"
                   "        self.n += 1\n")
        out = apply_search_replace(SRC, search, replace)
        assert out.ok and out.strategy == "elision", cut
        assert out.content == SRC.replace("        self.items[key] = value\n",
                                          "        self.items[key] = value\n        self.n += 1\n")
    changed = apply_search_replace(SRC, "class Store:\n    def put(self, key, value):\n",
                                   "class Shop:\n    def put(self, key, value):\n")
    assert not changed.ok, "a header the replace changes is no elision"
    two = "def add(a, b):\n    return a - b\n\n\ndef multiply(a, b):\n    return a * b\n"
    later = apply_search_replace(two, "def add(a, b):\n    return a * b\n", "def add(a, b):\n    return a + b\n")
    assert later.content != two.replace("a * b", "a + b"), "a later definition's equal line is not under the header"


def test_intraline_spacing_differences_match_and_unchanged_lines_keep_the_file_spelling() -> None:
    search = "    def put(self,key,value):\n        self.items[key]=value\n"
    replace = "    def put(self,key,value):\n        self.items[key]=value\n        self.count += 1\n"
    out = apply_search_replace(SRC, search, replace)
    assert out.strategy == "intraline"
    assert out.content == SRC + "        self.count += 1\n"


def test_fuzzy_accepts_punctuation_slip_but_never_a_different_name() -> None:
    search = "def load(path):\n    with open(path) as handle;\n        data = handle.read()\n"
    out = apply_search_replace(SRC, search, "def load(path):\n    with open(path) as handle;\n        data = 1\n")
    assert out.strategy == "fuzzy" and "        data = 1\n" in out.content and "handle:\n" in out.content
    wrong_name = search.replace("handle;", "fh:")
    refused = apply_search_replace(SRC, wrong_name, "x\n")
    assert not refused.ok and "not found" in refused.message


def test_not_found_shows_closest_lines_with_numbers() -> None:
    out = apply_search_replace(SRC, "    with open(filename) as handle:\n        data = handle.read()\n", "pass\n")
    assert not out.ok
    assert "search text not found" in out.message
    assert "5 |     with open(path) as handle:" in out.message
    assert "file line 5" in out.message


def test_ambiguous_search_is_refused_with_every_line() -> None:
    text = "x = 1\ny = 2\nx = 1\nz = 3\nx = 1\n"
    out = apply_search_replace(text, "x = 1\n", "x = 9\n")
    assert not out.ok and out.content == ""
    assert "found 3 times, at lines 1, 3, 5" in out.message and "unique" in out.message


def test_ambiguity_under_a_loose_strategy_is_refused_too() -> None:
    text = "def a():\n    return 1\n\ndef b():\n        return 1\n"
    out = apply_search_replace(text, "  return 1\n", "  return 2\n")
    assert not out.ok and "2 times" in out.message


def test_partial_line_fragment_and_its_ambiguity() -> None:
    out = apply_search_replace(SRC, "raise KeyError(key)", "raise LookupError(key)")
    assert out.ok and out.content == SRC.replace("KeyError", "LookupError")
    assert not apply_search_replace(SRC, "key", "k").ok


def test_crlf_file_stays_crlf() -> None:
    crlf = SRC.replace("\n", "\r\n")
    out = apply_search_replace(crlf, "def load(path):\n    with open(path) as handle:\n",
                               "def load(path, mode='r'):\n    with open(path, mode) as handle:\n        pass\n")
    assert out.ok
    assert "\n" not in out.content.replace("\r\n", "")
    assert "def load(path, mode='r'):\r\n    with open(path, mode) as handle:\r\n        pass\r\n" in out.content


def test_missing_final_newline_is_preserved() -> None:
    text = "a = 1\nb = 2"
    out = apply_search_replace(text, "b = 2\n", "b = 3\nc = 4\n")
    assert out.content == "a = 1\nb = 3\nc = 4"
    assert apply_search_replace("a = 1\n", "a = 1", "a = 2").content == "a = 2\n"
    assert apply_search_replace(text, "a = 1\nb = 2\n", "").content == ""
    assert apply_search_replace(text, "b = 2", "").content == "a = 1"


def test_empty_search_refused_on_non_empty_file_but_fills_an_empty_one() -> None:
    out = apply_search_replace(SRC, "", "print('hi')\n")
    assert not out.ok and "overwrite" in out.message
    assert apply_search_replace("", "", "x = 1\n").content == "x = 1\n"


def test_deleting_lines() -> None:
    out = apply_search_replace(SRC, "import os\n\n\n", "")
    assert out.ok and out.content == SRC[len("import os\n\n\n"):]


def test_replace_symbol_reindents_a_method() -> None:
    new = "def get(self, key):\n    return self.items[key]\n"
    out = apply_symbol_edit("store.py", SRC, "Store.get", new, "replace_symbol")
    assert out.ok, out.message
    assert "    def get(self, key):\n        return self.items[key]\n\n    def put" in out.content
    assert "raise KeyError" not in out.content


def test_insert_after_symbol_adds_a_top_level_function() -> None:
    out = apply_symbol_edit("store.py", SRC, "load", "def save(path, data):\n    pass\n", "insert_after_symbol")
    assert out.ok, out.message
    assert "    return data\n\n\ndef save(path, data):\n    pass\n\n\nclass Store" in out.content


def test_missing_symbol_lists_candidates() -> None:
    out = apply_symbol_edit("store.py", SRC, "Store.gett", "def x():\n    pass\n", "replace_symbol")
    assert not out.ok and "Store.get" in out.message


def test_replace_symbol_keeps_decorators_and_comments_the_new_code_does_not_bring() -> None:
    src = "import functools\n\n\n# cached lookup\n@functools.cache\ndef f(x):\n    return x\n\n\ndef g():\n    pass\n"
    out = apply_symbol_edit("m.py", src, "f", "def f(x):\n    return x * 2\n", "replace_symbol")
    assert out.content == src.replace("return x\n", "return x * 2\n")
    out = apply_symbol_edit("m.py", src, "f", "@functools.lru_cache\ndef f(x):\n    return x\n", "replace_symbol")
    assert out.content == src.replace("# cached lookup\n@functools.cache\n", "@functools.lru_cache\n")


def test_elision_takes_the_tightest_span_when_the_first_part_repeats() -> None:
    text = ("class A:\n    def name(self):\n        return 'a'\n\n\nclass B:\n    def name(self):\n        return 'b'\n"
            "\n    def size(self):\n        return 2\n")
    search = "    def name(self):\n...\n    def size(self):\n        return 2\n"
    replace = "    def name(self):\n...\n    def size(self):\n        return 3\n"
    out = apply_search_replace(text, search, replace)
    assert out.strategy == "elision" and out.line == 7
    assert out.content == text.replace("return 2", "return 3")


def test_elision_with_two_separate_places_is_refused() -> None:
    text = "def f():\n    x = 1\n    return x\n\n\ndef f():\n    y = 1\n    return x\n"
    out = apply_search_replace(text, "def f():\n...\n    return x\n", "def f():\n...\n    return x + 1\n")
    assert not out.ok and "2 times" in out.message


def test_trailing_whitespace_the_model_means_is_kept_and_noise_is_dropped() -> None:
    text = "def f():\n    x = 1   \n    return x\n"
    cleaned = apply_search_replace(text, "    x = 1   \n    return x\n", "    x = 1\n    return x\n")
    assert cleaned.content == "def f():\n    x = 1\n    return x\n"
    shifted = apply_search_replace(text, "x = 1   \nreturn x\n", "x = 1\nreturn x\n")
    assert shifted.strategy == "indent" and shifted.content == "def f():\n    x = 1\n    return x\n"
    noisy = apply_search_replace(text, "    x = 1\n    return x  \n", "    x = 1\n    return x + 1  \n")
    assert noisy.strategy == "whitespace" and noisy.content == "def f():\n    x = 1   \n    return x + 1\n"


def test_lines_written_with_their_newlines_escaped_twice_are_read_as_the_lines_they_mean() -> None:
    """Qwen2.5-Coder-1.5B's calc-add answer: `"search": "def add(a, b):\\\\n    return a - b"` in its JSON, a
    backslash and an n where a line ends. Found nowhere as written, it is read as two lines, its replacement too."""
    calc = "def add(a, b):\n    return a - b\n"
    out = apply_search_replace(calc, "def add(a, b):\\n    return a - b", "def add(a, b):\\n    return a + b")
    assert out.ok and out.content == "def add(a, b):\n    return a + b\n" and out.strategy == "unescaped_exact"


def test_a_backslash_n_the_file_holds_is_matched_as_written() -> None:
    """The escape is the file's own (a string literal): the text is found as written, and the replacement keeps its
    backslashes; a text found neither way is refused with the usual words."""
    code = 'SEP = "a\\nb"\nEND = 1\n'
    out = apply_search_replace(code, 'SEP = "a\\nb"', 'SEP = "a\\nc"')
    assert out.ok and out.content == 'SEP = "a\\nc"\nEND = 1\n' and out.strategy == "exact"
    missing = apply_search_replace(code, "def gone():\\n    pass", "x")
    assert not missing.ok and missing.message.startswith("search text not found.")


PAGING = ('def page_count(total, size):\n    return (total + size - 1) // size\n\n\n'
          'def page_slice(items, page, size):\n    start = page * size\n    return items[start:start + size]\n')


def test_a_test_line_sent_as_search_text_is_answered_with_the_symbol_edit_that_needs_no_copy() -> None:
    """Qwen2.5-Coder-1.5B's pager-page-slice plan: the right file, and as search text the failing test's assertion.
    The refusal names the function it calls and the replace_symbol edit that changes it."""
    out = apply_search_replace(PAGING, "page_slice(list(range(10)), 4, 3) == [9]", "page_slice(x) == [9]")
    assert not out.ok and out.message.startswith("search text not found.")
    assert out.message.endswith('No line of your search text is in this file (copied from a test?). To change '
                                'page_slice, send {"action": "replace_symbol", "symbol": "page_slice", "content": '
                                '"<the whole new definition>"}: nothing has to be copied.')


def test_no_symbol_hint_when_the_search_is_the_file_s_own_lines_or_calls_nothing_it_defines() -> None:
    near = apply_search_replace(PAGING, "def page_slice(items, page, size):\n    start = page * size + 0", "x")
    elsewhere = apply_search_replace(PAGING, "total = sum(values)", "x")
    assert not near.ok and not elsewhere.ok
    assert "replace_symbol" not in near.message and "replace_symbol" not in elsewhere.message
