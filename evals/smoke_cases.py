"""The shipped eval set, written out as evals/smoke.jsonl (`python evals/smoke_cases.py`).

Each case is a real bug of a real released version of a small public project (its fix is named in `note`); the
task and the hidden tests (FAIL_TO_PASS, and tests that must keep passing) are ours, written for this set — none is
copied from the projects' own fixes. Python and Node cases are the packages as published on PyPI and npm, downloaded
at eval time; Go and Rust cases are git repositories at the commit before the fix (they need the network and the
toolchain, and no dependency: nothing is fetched but the repository itself).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PYTEST = "python -m pytest -q -p no:cacheprovider"


def new_files_patch(files: dict[str, str]) -> str:
    """A unified diff that creates each file (what SWE-bench calls a test_patch)."""
    parts = []
    for path, text in files.items():
        lines = text.splitlines()
        body = "".join(f"+{line}\n" for line in lines)
        parts.append(f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
                     f"@@ -0,0 +1,{len(lines)} @@\n{body}")
    return "".join(parts)


# ----- Python, from PyPI ---------------------------------------------------------------------------------------------
PARSE_CASE = '''\
import parse


def test_a_compiled_pattern_honours_case_sensitive():
    pattern = parse.compile("Name: {}", case_sensitive=True)
    assert pattern.parse("name: Ada") is None
    assert pattern.parse("Name: Ada")[0] == "Ada"


def test_a_compiled_pattern_ignores_case_by_default():
    assert parse.compile("Name: {}").parse("NAME: Ada")[0] == "Ada"
'''
PARSE_BASE = '''\
import parse


def test_each_parse_reads_the_base_of_its_own_number():
    pattern = parse.compile("{:d} apples")
    assert pattern.parse("0x1F apples")[0] == 31
    assert pattern.parse("12 apples")[0] == 12
    assert pattern.parse("0b101 apples")[0] == 5
    assert pattern.parse("7 apples")[0] == 7


def test_prefixed_numbers_parse_in_their_base():
    assert parse.parse("{:d}", "0o17")[0] == 15
    assert parse.parse("{:d}", "-0x10")[0] == -16
'''
TOML_FLOATS = '''\
import toml


def test_a_float_reads_back_as_the_same_float():
    for value in (0.1 + 0.2, 1 / 3, 2 ** 0.5, 123456.78901234567, 6.02214076e23):
        assert toml.loads(toml.dumps({"v": value}))["v"] == value


def test_short_floats_are_written_as_they_are():
    assert toml.dumps({"v": 0.5}) == "v = 0.5\\n"
'''

# ----- Node, from npm (node's own test runner: no dependency to install) -------------------------------------------
MS_TESTS = '''\
const test = require('node:test');
const assert = require('node:assert');
const ms = require('..');

test('non-finite numbers are refused like any invalid value', () => {
  assert.throws(() => ms(Infinity), /valid number/);
  assert.throws(() => ms(-Infinity), /valid number/);
});

test('a dash inside a number is no duration', () => {
  assert.strictEqual(ms('1-2h'), undefined);
  assert.strictEqual(ms('3-1 days'), undefined);
});

test('durations still parse and format', () => {
  assert.strictEqual(ms('1.5h'), 5400000);
  assert.strictEqual(ms('-3 days'), -259200000);
  assert.strictEqual(ms(60000), '1m');
  assert.strictEqual(ms(2 * 3600000, { long: true }), '2 hours');
});
'''
STRIP_TESTS = r"""const test = require('node:test');
const assert = require('node:assert');
const stripJsonComments = require('..');

test('an escaped quote after an escaped backslash stays inside its string', () => {
  const json = '{"a": "x\\\\\\"// kept"} // gone';
  assert.strictEqual(JSON.parse(stripJsonComments(json)).a, 'x\\"// kept');
});

test('a string that ends in an escaped backslash ends there', () => {
  const json = '{"a": "x\\\\", "b": 1} // gone';
  assert.deepStrictEqual(JSON.parse(stripJsonComments(json)), { a: 'x\\', b: 1 });
});

test('comments outside strings are still stripped', () => {
  assert.strictEqual(JSON.parse(stripJsonComments('{"a": 1 /* one */, "b": 2 // two\n}')).b, 2);
});
"""
DOTENV_TESTS = r"""const test = require('node:test');
const assert = require('node:assert');
const dotenv = require('..');

const parse = (text) => dotenv.parse(Buffer.from(text));

test('a quote on one side only is part of the value', () => {
  assert.deepStrictEqual(parse("PASSWORD='abc\nTAIL=x'\n"), { PASSWORD: "'abc", TAIL: "x'" });
});

test('spaces inside quotes are kept', () => {
  assert.strictEqual(parse('GREETING=" hi "\n').GREETING, ' hi ');
});

test('matching quotes are still removed', () => {
  assert.deepStrictEqual(parse("A='one'\nB=\"two\"\nC=three\n"), { A: 'one', B: 'two', C: 'three' });
});
"""

# ----- Go, by git URL and commit (no dependency; go test -v lists the tests that pass) -----------------------------
HUMANIZE_ZEROS = """\
package humanize

import "testing"

func TestWholeNumbersKeepTheirZeros(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{FtoaWithDigits(20.0, 0), "20"},
		{FtoaWithDigits(300.0, 2), "300"},
		{Ftoa(1000), "1000"},
		{SIWithDigits(200, 0, "U"), "200 U"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}

func TestZerosAfterThePointAreStillDropped(t *testing.T) {
	if got := FtoaWithDigits(2.50, 2); got != "2.5" {
		t.Errorf("FtoaWithDigits(2.50, 2) = %q, want 2.5", got)
	}
}
"""
HUMANIZE_BIGCOMMA = """\
package humanize

import (
	"math/big"
	"testing"
)

func TestBigCommaLeavesItsArgumentAsItWas(t *testing.T) {
	for _, text := range []string{"123456789012345678901234567890", "-9876543210"} {
		v, _ := new(big.Int).SetString(text, 10)
		first := BigComma(v)
		if v.String() != text {
			t.Fatalf("BigComma changed its argument from %s to %s", text, v.String())
		}
		if second := BigComma(v); second != first {
			t.Fatalf("BigComma gave %s, then %s, for the same value", first, second)
		}
	}
}

func TestBigCommaGroupsThousands(t *testing.T) {
	v, _ := new(big.Int).SetString("-1234567", 10)
	if got := BigComma(v); got != "-1,234,567" {
		t.Errorf("BigComma(-1234567) = %q", got)
	}
}
"""
SHELLWORDS = """\
package shellwords

import (
	"reflect"
	"testing"
)

func parsedWithEnv(t *testing.T, line string) []string {
	p := NewParser()
	p.ParseEnv = true
	p.Getenv = func(string) string { return "" }
	args, err := p.Parse(line)
	if err != nil {
		t.Fatalf("Parse(%q): %v", line, err)
	}
	return args
}

func TestSingleQuotesKeepOneWordWithParseEnv(t *testing.T) {
	got := parsedWithEnv(t, "cp 'my file.txt' backup")
	if want := []string{"cp", "my file.txt", "backup"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestDoubleQuotesKeepOneWordWithParseEnv(t *testing.T) {
	got := parsedWithEnv(t, `cp "my file.txt" backup`)
	if want := []string{"cp", "my file.txt", "backup"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
"""

# ----- Rust, by git URL and commit (crates with no dependency: cargo test --offline) --------------------------------
JARO_ONE = """\
#[test]
fn equal_single_characters_are_identical() {
    assert_eq!(strsim::jaro("x", "x"), 1.0);
    assert_eq!(strsim::jaro_winkler("x", "x"), 1.0);
}

#[test]
fn different_single_characters_share_nothing() {
    assert_eq!(strsim::jaro("x", "y"), 0.0);
    assert_eq!(strsim::jaro_winkler("x", "y"), 0.0);
}
"""
JARO_TRANSPOSITIONS = """\
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 0.001
}

#[test]
fn transpositions_are_counted_among_the_matches_in_order() {
    // 3 matches (b, space, c) within the window, two of them out of order: one transposition
    assert!(close(strsim::jaro("ab cd", "dc ba x"), 0.5651), "{}", strsim::jaro("ab cd", "dc ba x"));
    assert!(close(strsim::jaro_winkler("ab cd", "dc ba x"), 0.5651));
}

#[test]
fn strings_without_transpositions_score_as_before() {
    assert!(close(strsim::jaro("kitten", "knitting"), 0.8194));
}
"""
SHLEX_QUOTES = r"""#[test]
fn backslashes_inside_single_quotes_are_literal() {
    assert_eq!(shlex::split(r"printf 'a\\b'"), Some(vec!["printf".to_string(), r"a\\b".to_string()]));
}

#[test]
fn a_backslash_cannot_escape_a_single_quote() {
    assert_eq!(shlex::split(r"echo 'it\'s"), Some(vec!["echo".to_string(), r"it\s".to_string()]));
}

#[test]
fn double_quotes_still_escape() {
    assert_eq!(shlex::split(r#"echo "a\"b""#), Some(vec!["echo".to_string(), r#"a"b"#.to_string()]));
}
"""


def cases() -> list[dict[str, object]]:
    go = "go test -v ./..."
    cargo = "cargo test --offline"
    return [
        {"id": "py-parse-compile-case-sensitive", "language": "python", "repo": {"pypi": "parse==1.12.0"},
         "task": "parse.compile() takes case_sensitive=True but ignores it: "
                 "parse.compile('Name: {}', case_sensitive=True).parse('name: Ada') matches, while "
                 "parse.parse('Name: {}', 'name: Ada', case_sensitive=True) does not. Make compile() honour "
                 "case_sensitive as parse() does.",
         "test_command": PYTEST, "test_patch": new_files_patch({"test_eval_case_sensitive.py": PARSE_CASE}),
         "FAIL_TO_PASS": ["test_eval_case_sensitive.py::test_a_compiled_pattern_honours_case_sensitive"],
         "PASS_TO_PASS": ["test_eval_case_sensitive.py::test_a_compiled_pattern_ignores_case_by_default",
                          "test_parse.py::TestParse::test_no_match", "test_parse.py::TestParse::test_named"],
         "requires": ["network"], "note": "fixed in parse 1.12.1"},
        {"id": "py-parse-int-base", "language": "python", "repo": {"pypi": "parse==1.17.0"},
         "task": "A compiled pattern with a {:d} field remembers the base of the first number it reads: after "
                 "p = parse.compile('{:d} apples') has parsed '0x1F apples', p.parse('12 apples') gives 18 instead "
                 "of 12. Each parse must take the base from its own number (0x, 0o, 0b prefixes, else 10).",
         "test_command": PYTEST, "test_patch": new_files_patch({"test_eval_int_base.py": PARSE_BASE}),
         "FAIL_TO_PASS": ["test_eval_int_base.py::test_each_parse_reads_the_base_of_its_own_number"],
         "PASS_TO_PASS": ["test_eval_int_base.py::test_prefixed_numbers_parse_in_their_base",
                          "test_parse.py::TestParse::test_numbers", "test_parse.py::TestParse::test_hexadecimal"],
         "requires": ["network"], "note": "introduced in parse 1.16.0, fixed in 1.18.0"},
        {"id": "py-toml-float-round-trip", "language": "python", "repo": {"pypi": "toml==0.10.0"},
         "task": "toml.dumps() loses float precision: dumping {'x': 0.1 + 0.2} writes 'x = 0.3', so loading it back "
                 "gives another number. A float written by dumps() must load back as exactly the same float.",
         "test_command": f"{PYTEST} tests -k 'not valid_tests and not test_paths and not test_warnings'",
         "test_patch": new_files_patch({"tests/test_eval_floats.py": TOML_FLOATS}),
         "FAIL_TO_PASS": ["tests/test_eval_floats.py::test_a_float_reads_back_as_the_same_float"],
         "PASS_TO_PASS": ["tests/test_eval_floats.py::test_short_floats_are_written_as_they_are",
                          "tests/test_api.py::test_dump", "tests/test_api.py::test_commutativity"],
         "requires": ["network"], "note": "fixed in toml 0.10.1"},
        {"id": "node-ms-invalid-numbers", "language": "javascript", "repo": {"npm": "ms@2.1.1"},
         "task": "ms(Infinity) returns the string 'Infinityd', and ms('1-2h') is read as one hour. A number that is "
                 "not finite must be refused with the same error as any other invalid value, and a string with a "
                 "dash inside its number (like '1-2h') is no duration: ms() returns undefined for it, as for any "
                 "string it cannot read.",
         "test_command": "node --test", "test_patch": new_files_patch({"test/eval.test.js": MS_TESTS}),
         "FAIL_TO_PASS": ["non-finite numbers are refused like any invalid value", "a dash inside a number is no duration"],
         "PASS_TO_PASS": ["durations still parse and format"],
         "requires": ["network", "node"], "note": "fixed in ms 2.1.2"},
        {"id": "node-strip-json-comments-escapes", "language": "javascript",
         "repo": {"npm": "strip-json-comments@3.0.0"},
         "task": "stripJsonComments() takes an escaped quote that follows an escaped backslash for the end of the "
                 "string: in {\"a\": \"x\\\\\\\"// kept\"} the '// kept' is inside the string, yet it is stripped as "
                 "a comment. A quote is escaped when an odd number of backslashes stands before it.",
         "test_command": "node --test", "test_patch": new_files_patch({"test/eval.test.js": STRIP_TESTS}),
         "FAIL_TO_PASS": ["an escaped quote after an escaped backslash stays inside its string"],
         "PASS_TO_PASS": ["a string that ends in an escaped backslash ends there",
                          "comments outside strings are still stripped"],
         "requires": ["network", "node"], "note": "fixed in strip-json-comments 3.0.1"},
        {"id": "node-dotenv-unbalanced-quotes", "language": "javascript", "repo": {"npm": "dotenv@6.2.0"},
         "task": "dotenv.parse() takes a quote off a value that has it on one side only (PASSWORD='abc becomes abc, "
                 "TAIL=x' becomes x) and trims the spaces inside a quoted value (GREETING=\" hi \" becomes hi). Only "
                 "a value wrapped in the same quote on both sides loses its quotes, and what is inside the quotes is "
                 "kept as written.",
         "test_command": "node --test", "test_patch": new_files_patch({"test/eval.test.js": DOTENV_TESTS}),
         "FAIL_TO_PASS": ["a quote on one side only is part of the value", "spaces inside quotes are kept"],
         "PASS_TO_PASS": ["matching quotes are still removed"],
         "requires": ["network", "node"], "note": "fixed in dotenv 7.0.0 (#376)"},
        {"id": "go-humanize-whole-number-zeros", "language": "go",
         "repo": {"git": "https://github.com/dustin/go-humanize", "commit": "269a86360bcf4032f437f78f7b7844e0aa4de882"},
         "task": "humanize.FtoaWithDigits(20.0, 0) returns \"2\" instead of \"20\", and SIWithDigits(200, 0, \"U\") "
                 "gives \"2 U\": trailing zeros are stripped from numbers that have no decimal point. Only zeros after "
                 "a decimal point may be dropped.",
         "test_command": go, "test_patch": new_files_patch({"eval_zeros_test.go": HUMANIZE_ZEROS}),
         "FAIL_TO_PASS": ["github.com/dustin/go-humanize.TestWholeNumbersKeepTheirZeros"],
         "PASS_TO_PASS": ["github.com/dustin/go-humanize.TestZerosAfterThePointAreStillDropped",
                          "github.com/dustin/go-humanize.TestFtoa", "github.com/dustin/go-humanize.TestSI"],
         "requires": ["network", "go"], "note": "dustin/go-humanize issue #106, fixed by 9ec74ab"},
        {"id": "go-humanize-bigcomma-mutates", "language": "go",
         "repo": {"git": "https://github.com/dustin/go-humanize", "commit": "47eb3ae4df4420a7daf4d673dfb5e2149657570c"},
         "task": "humanize.BigComma changes the big.Int it is given: after BigComma(v), v may hold another value, so "
                 "calling it twice on the same value can give two different strings. BigComma must leave its "
                 "argument as it was.",
         "test_command": go, "test_patch": new_files_patch({"eval_bigcomma_test.go": HUMANIZE_BIGCOMMA}),
         "FAIL_TO_PASS": ["github.com/dustin/go-humanize.TestBigCommaLeavesItsArgumentAsItWas"],
         "PASS_TO_PASS": ["github.com/dustin/go-humanize.TestBigCommaGroupsThousands",
                          "github.com/dustin/go-humanize.TestBigCommas"],
         "requires": ["network", "go"], "note": "dustin/go-humanize issue #130, fixed by 402bd47"},
        {"id": "go-shellwords-single-quotes", "language": "go",
         "repo": {"git": "https://github.com/mattn/go-shellwords",
                  "commit": "501b5b2a57d704071ca7e87617237f0e3784e53c"},
         "task": "With ParseEnv on, a single-quoted argument is split at its spaces: parsing cp 'my file.txt' backup "
                 "gives [cp my file.txt backup] instead of [cp, my file.txt, backup] (with ParseEnv off, or with "
                 "double quotes, it is right). What is inside single quotes must stay one word.",
         "test_command": go, "test_patch": new_files_patch({"eval_quotes_test.go": SHELLWORDS}),
         "FAIL_TO_PASS": ["github.com/mattn/go-shellwords.TestSingleQuotesKeepOneWordWithParseEnv"],
         "PASS_TO_PASS": ["github.com/mattn/go-shellwords.TestDoubleQuotesKeepOneWordWithParseEnv",
                          "github.com/mattn/go-shellwords.TestSimple"],
         "requires": ["network", "go"], "note": "fixed by mattn/go-shellwords 6bc4808 (tested upstream from 9927b78)"},
        {"id": "rust-strsim-jaro-one-char", "language": "rust",
         "repo": {"git": "https://github.com/rapidfuzz/strsim-rs", "commit": "c4cdd9c35dfaf7fa4e5e023d22854180b114dd9c"},
         "task": "strsim::jaro(\"a\", \"a\") returns 0.0: two equal strings of one character are scored as having "
                 "nothing in common, and jaro_winkler does the same. Equal strings score 1.0 whatever their length; "
                 "two different single characters still score 0.0.",
         "test_command": cargo, "test_patch": new_files_patch({"tests/eval_one_char.rs": JARO_ONE}),
         "FAIL_TO_PASS": ["equal_single_characters_are_identical"],
         "PASS_TO_PASS": ["different_single_characters_share_nothing", "tests::jaro_same", "tests::jaro_diff_short"],
         "requires": ["network", "cargo"], "note": "fixed by strsim-rs 605c81c (0.10.0)"},
        {"id": "rust-strsim-jaro-transpositions", "language": "rust",
         "repo": {"git": "https://github.com/rapidfuzz/strsim-rs", "commit": "cd2e7b3bddceb17bcac0fe319f6fd325107be7ce"},
         "task": "strsim::jaro and jaro_winkler miscount transpositions for some inputs: jaro(\"ab cd\", \"dc ba x\") "
                 "returns 0.4540, but its three matching characters (b, the space, c) with one transposition give "
                 "(3/5 + 3/7 + 2/3) / 3 = 0.5651. Transpositions are the matched characters of the two strings, "
                 "each taken in its own string's order, that differ, halved.",
         "test_command": cargo, "test_patch": new_files_patch({"tests/eval_transpositions.rs": JARO_TRANSPOSITIONS}),
         "FAIL_TO_PASS": ["transpositions_are_counted_among_the_matches_in_order"],
         "PASS_TO_PASS": ["strings_without_transpositions_score_as_before", "tests::jaro_names",
                          "tests::jaro_winkler_names"],
         "requires": ["network", "cargo"], "note": "strsim-rs issue #49, fixed by 5b512dc (0.11.0)"},
        {"id": "rust-shlex-single-quotes", "language": "rust",
         "repo": {"git": "https://github.com/comex/rust-shlex", "commit": "263e9c45b3085f8a3093b2df4247c45e8341a8b2"},
         "task": "shlex::split treats a backslash inside single quotes as an escape: split(\"printf 'a\\\\\\\\b'\") "
                 "gives a\\b where a POSIX shell gives a\\\\b. Between single quotes nothing is special: a backslash "
                 "is a backslash, and the next single quote ends the quoted part.",
         "test_command": cargo, "test_patch": new_files_patch({"tests/eval_quotes.rs": SHLEX_QUOTES}),
         "FAIL_TO_PASS": ["backslashes_inside_single_quotes_are_literal", "a_backslash_cannot_escape_a_single_quote"],
         "PASS_TO_PASS": ["double_quotes_still_escape", "test_split"],
         "requires": ["network", "cargo"], "note": "comex/rust-shlex issue #6, fixed by 6db4704 (1.0.0)"},
    ]


def main() -> None:
    out = HERE / "smoke.jsonl"
    out.write_text("".join(json.dumps(case) + "\n" for case in cases()), encoding="utf-8")
    sys.stdout.write(f"{out}: {len(cases())} cases\n")


if __name__ == "__main__":
    main()
