"""Pure checks on a proposed change: how big it is, whether it weakens the tests instead of fixing the code, and
whether it writes an environment file."""
from __future__ import annotations

import ast
import difflib
import json
import logging
import re
from collections import Counter

from code_assistant.languages import is_test_file

logger = logging.getLogger(__name__)

# Assertion calls across pytest/unittest, jest/node, go, rust, java.
_ASSERT_RE = re.compile(
    r"\bassert\b(?!\s*(True|1)\s*$)|\bself\.assert\w+\s*\(|\bself\.fail\s*\(|\bexpect\s*\(|\bassert\.\w+\s*\(|"
    r"\bt\.(Error|Errorf|Fatal|Fatalf|Fail|FailNow)\s*\(|\b(require|assert)\.\w+\s*\(t\b|\bassert(_eq|_ne)?!\s*\(|"
    r"\bpytest\.raises\s*\(|\bassert(Equals?|That|True|False|Null|NotNull|Throws)\s*\(", re.MULTILINE)
# Assertions that pin a value, and the ones that only check truthiness: swapping the first for the second loosens.
_STRONG_RE = re.compile(r"\bassert(Equal|Equals|Is|IsNone|In|Raises|AlmostEqual|CountEqual|DictEqual|ListEqual|"
                        r"Regex|StrictEqual|DeepStrictEqual|DeepEqual|Throws)\b|\.(toBe|toEqual|toStrictEqual|"
                        r"toThrow|toHaveBeenCalledWith|toMatchObject|toHaveLength)\(|\bassert\.(equal|strictEqual|"
                        r"deepEqual|deepStrictEqual|throws)\(|\b(assert|require)\.(Equal|EqualValues|Error|ErrorIs)\(|"
                        r"\bassert\b[^\n]*(==|\bis\b|\bin\b)|\bassert_eq!")
_WEAK_RE = re.compile(r"\bassert(True|False|IsNotNone|IsNotNull|NotNull)\b|\.(toBeTruthy|toBeFalsy|toBeDefined|"
                      r"toBeUndefined|not\.toBeNull)\(|\bassert\.ok\(|\bassert\(\s*\w+\s*\)|\b(assert|require)\."
                      r"(True|False|NotNil)\(")
_TRIVIAL_RE = re.compile(r"^\s*(assert\s+(True|1|not\s+False)\b|self\.assertTrue\(\s*(True|1)\s*\)|"
                         r"expect\(\s*(true|1)\s*\)\.(toBe\(\s*(true|1)\s*\)|toBeTruthy\(\))|assert\.ok\(\s*true\s*\)|"
                         r"assert!\(\s*true\s*\))", re.MULTILINE)
_SKIP_RE = re.compile(r"@pytest\.mark\.(skip|skipif|xfail)\b|\bpytest\.(skip|xfail)\s*\(|@unittest\.(skip\w*|"
                      r"expectedFailure)\b|\bself\.skipTest\s*\(|\b(it|test|describe)\.(skip|todo)\s*\(|"
                      r"\bx(it|test|describe)\s*\(|\bt\.Skip(f|Now)?\s*\(|#\[ignore\]|@(Disabled|Ignore)\b|"
                      r"\bunittest\.SkipTest\b|(?m:^//\s*(go:build|\+build)\b)")
_TEST_NAME_RE = re.compile(r"^\s*(?:async\s+)?def\s+(test\w*)|^func\s+(Test\w+)\s*\(|"
                           r"\b(?:it|test)\s*\(\s*(['\"`])(.+?)\3", re.MULTILINE)
_COMMENT_LINE_RE = re.compile(r"^\s*(#(?!\[)|//(?!go:|\s*\+build)).*$", re.MULTILINE)  # Go's build tags are not
_VALUE_RE = re.compile(r"\bassert(Equal|Equals|ListEqual|DictEqual|TupleEqual|SetEqual|CountEqual|AlmostEqual|"
                       r"MultiLineEqual|Is|IsNone|In)\s*\(|\bassert\b[^\n]*(==|\bis\b|\bin\b)|\.(toEqual|toBe|"
                       r"toStrictEqual)\(|\bassert\.(equal|strictEqual|deepEqual|deepStrictEqual)\(|\bassert_eq!|"
                       r"\b(assert|require)\.(Equal|EqualValues)\(")
_RAISES_RE = re.compile(r"\bassertRaises(Regex)?\b|\bpytest\.raises\s*\(|\.toThrow\w*\(|\bassert\.(throws|rejects)\("
                        r"|#\[should_panic\b|\bassertThrows\s*\(|\b(assert|require)\.(Panics|Error|ErrorIs)\(")
_FLIPS = (("==", "!="), ("!=", "=="), ("assertEqual", "assertNotEqual"), ("assertIn", "assertNotIn"),
          ("assertIs", "assertIsNot"), (".toBe(", ".not.toBe("), (".toEqual(", ".not.toEqual("),
          ("assert.equal(", "assert.notEqual("), ("assert.strictEqual(", "assert.notStrictEqual("),
          (" is ", " is not "), (" in ", " not in "), ("assertTrue", "assertFalse"), ("assertFalse", "assertTrue"))


def changed_line_count(old: str, new: str) -> int:
    """Added plus removed lines, as a unified diff would count them."""
    matcher = difflib.SequenceMatcher(None, old.splitlines(), new.splitlines(), autojunk=False)
    return sum((i2 - i1) + (j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")


def _code(text: str) -> str:
    return _COMMENT_LINE_RE.sub("", text)


def _count(pattern: re.Pattern[str], text: str) -> int:
    return len(pattern.findall(_code(text)))


def _test_names(text: str) -> list[str]:
    return [m.group(1) or m.group(2) or m.group(4) for m in _TEST_NAME_RE.finditer(_code(text))]


def _flipped(old: str, new: str) -> list[str]:
    """Assertion/comparison lines the edit turned into their negation."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    removed = {line.strip() for line in old_lines} - {line.strip() for line in new_lines}
    added = {line.strip() for line in new_lines} - {line.strip() for line in old_lines}
    flips = []
    for line in sorted(removed):
        if line.startswith(("#", "//")):
            continue
        for a, b in _FLIPS:
            if a in line and line.replace(a, b, 1) in added:
                flips.append(line)
                break
    return flips


def _trivial_python_tests(text: str) -> set[str]:
    """Names of Python test functions whose body is only pass / ... / return / assert True (plus a docstring)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    trivial = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            body = [s for s in node.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
            if all(isinstance(s, (ast.Pass, ast.Return)) and getattr(s, "value", None) is None
                   or isinstance(s, ast.Assert) and isinstance(s.test, ast.Constant) and s.test.value
                   for s in body):
                trivial.add(node.name)
    return trivial


def check_test_weakening(path: str, old: str | None, new: str | None) -> str | None:
    """A reason written for the model when an edit of a test file removes or loosens checks; None when it is fine."""
    if not is_test_file(path) or old is None:
        return None
    if new is None:
        return (f"the edit deletes the test file {path}. Tests may not be deleted to make the suite pass; fix the "
                "code under test instead.")
    reasons: list[str] = []
    old_names, new_names = _test_names(old), _test_names(new)
    if len(new_names) < len(old_names):
        gone = [n for n in old_names if n not in new_names] or old_names[len(new_names):]
        reasons.append(f"removes test(s) {', '.join(gone[:5])}")
    old_asserts, new_asserts = _count(_ASSERT_RE, old), _count(_ASSERT_RE, new)
    if new_asserts < old_asserts:
        reasons.append(f"removes assertions ({old_asserts} before, {new_asserts} after)")
    if _count(_STRONG_RE, new) < _count(_STRONG_RE, old) and _count(_WEAK_RE, new) > _count(_WEAK_RE, old):
        reasons.append("replaces exact assertions (equality/identity/raises) with truthiness checks")
    if _count(_TRIVIAL_RE, new) > _count(_TRIVIAL_RE, old):
        reasons.append("adds an assertion that is always true")
    if _count(_SKIP_RE, new) > _count(_SKIP_RE, old):
        reasons.append("marks tests as skipped / expected to fail")
    if _count(_VALUE_RE, new) < _count(_VALUE_RE, old) and _count(_RAISES_RE, new) > _count(_RAISES_RE, old):
        reasons.append("turns an expected value into an expected exception (the test then passes on the error the "
                       "bug raises)")
    flips = _flipped(old, new)
    if flips:
        reasons.append(f"negates a check ({flips[0]!r})")
    emptied = _trivial_python_tests(new) - _trivial_python_tests(old)
    emptied &= set(old_names)
    if emptied:
        reasons.append(f"rewrites {', '.join(sorted(emptied))} to a body that always passes")
    if not reasons:
        return None
    logger.info("test weakening in %s: %s", path, "; ".join(reasons))
    return (f"the edit to {path} weakens the tests: {'; '.join(reasons)}. Change the code under test so the "
            "existing tests pass; edit a test only to add checks, or when it is provably wrong (say why).")


# How a change can weaken the tests without touching one: a pytest hook that drops tests or rewrites their outcome,
# a runner option that deselects or ignores them, the command or configuration that runs them.
_HOOK_RE = re.compile(r"\bdef\s+(pytest_(?:collection_modifyitems|ignore_collect|collect_file|pycollect_makeitem|"
                      r"runtest_\w+|pyfunc_call|report_teststatus|sessionfinish|deselected))\b|"
                      r"\b(collect_ignore(?:_glob)?)\s*(?:=|\+=|\.append|\.extend)|\.(exitstatus)\s*=(?!=)|"
                      r"\b(pytest_plugins)\s*(?:=|\+=)")
_PYTEST_CONFIGS = ("pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", ".pytest.ini")
_SELECTION_RE = re.compile(r"(?<![\w-])(--deselect|--ignore(?:-glob)?|--lf|--last-failed|--co|--collect-only|-k|-m|-p)"
                           r"(?![\w-])|\b(testpaths|python_files|python_classes|python_functions|norecursedirs)\b")
_RUNNER_CONFIG_RE = re.compile(r"^(jest|vitest|vite|mocha|ava|karma|playwright|cypress)\.config\.[cm]?[jt]s$|"
                               r"^\.mocharc(\.\w+)?$|^\.nycrc(\.\w+)?$")


def check_test_setup(path: str, old: str | None, new: str | None) -> str | None:
    """A reason written for the model when a change weakens the tests without editing one — a hook that drops tests
    or rewrites their outcome, an option that deselects them, the test script or the runner's configuration
    changed; None when it is fine. A new file is judged as if it were empty before."""
    name = path.replace("\\", "/").split("/")[-1]
    before, after = old or "", new or ""
    what: str | None = None
    if name.endswith(".py"):
        added = _added(_HOOK_RE, before, after)
        what = f"adds {added} (a pytest hook or setting that changes which tests run or what they report)" \
            if added else None
    elif name in _PYTEST_CONFIGS:
        added = [line.strip() for line in _new_lines(_test_sections(before), _test_sections(after))
                 if _SELECTION_RE.search(line)]
        what = f"changes which tests pytest collects or runs ({added[0]!r})" if added else None
    elif name == "package.json":
        what = _package_test_change(before, after)
    elif _RUNNER_CONFIG_RE.match(name):
        what = f"changes the test runner's configuration ({name})" if before != after else None
    if what is None:
        return None
    logger.info("test setup changed in %s: %s", path, what)
    return (f"the edit to {path} {what}. Make the code under test pass the tests as they are run now; how the "
            "tests are collected and run is not part of the fix.")


def _test_sections(text: str) -> str:
    """The lines of an ini/toml file's sections that configure the tests ([pytest], [tool:pytest],
    [tool.pytest.ini_options], tox's [testenv…]): another tool's `-m` or `-k` is not pytest's."""
    kept, on = [], False
    for line in text.splitlines():
        header = re.match(r"\s*\[\s*([^\]]+?)\s*\]\s*$", line)
        if header:
            on = "pytest" in header.group(1) or header.group(1).startswith("testenv")
        elif on:
            kept.append(line)
    return "\n".join(kept)


def _new_lines(old: str, new: str) -> list[str]:
    """The lines of `new` that `old` does not hold (as often), in order."""
    left = Counter(line.strip() for line in old.splitlines())
    added = []
    for line in new.splitlines():
        if left[line.strip()]:
            left[line.strip()] -= 1
        else:
            added.append(line)
    return added


def _added(pattern: re.Pattern[str], old: str, new: str) -> str | None:
    """The first name the pattern finds more often in `new` than in `old` (comments left out)."""
    def names(text: str) -> list[str]:
        return [next(g for g in m.groups() if g) for m in pattern.finditer(_code(text))]
    more = Counter(names(new)) - Counter(names(old))
    return next((name for name in names(new) if more[name]), None)


def _package_test_change(old: str, new: str) -> str | None:
    """package.json: its test script, or its jest/mocha/ava settings, changed."""
    try:
        before, after = json.loads(old) if old.strip() else {}, json.loads(new) if new.strip() else {}
    except ValueError:
        return None  # not JSON: the test run will say so
    if not isinstance(before, dict) or not isinstance(after, dict):
        return None
    scripts = [k for k in {*_scripts(before), *_scripts(after)} if k == "test" or k.startswith(("test:", "pretest",
                                                                                                   "posttest"))]
    for key in sorted(scripts):
        if _scripts(before).get(key) != _scripts(after).get(key):
            return f"changes the {key!r} script ({_scripts(before).get(key)!r} to {_scripts(after).get(key)!r})"
    for key in ("jest", "mocha", "ava", "vitest", "c8", "nyc"):
        if before.get(key) != after.get(key):
            return f"changes its {key!r} settings"
    return None


def _scripts(package: dict) -> dict:
    scripts = package.get("scripts")
    return scripts if isinstance(scripts, dict) else {}


# ----- environment files --------------------------------------------------------------------------------------------
def check_env_edit(path: str) -> str | None:
    """A reason written for the model when a change creates, edits or deletes a `.env*` file (`.env`, `.env.local`,
    `.envrc`: settings this assistant and other tools read, among them which server gets an API key); None for any
    other file. Refused unless the user allows it (--allow-env-edits)."""
    if not path.replace("\\", "/").split("/")[-1].lower().startswith(".env"):
        return None
    return (f"{path} is an environment file: it holds settings (which server gets an API key, what a tool runs with), "
            "so the change may not create, edit or delete it. Leave it as it is; if the task needs a setting there, "
            "say in your description which one, for the user to set.")
