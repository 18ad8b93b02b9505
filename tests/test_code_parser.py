from __future__ import annotations

import textwrap

from code_assistant.parse.chunker import excerpt, skeleton
from code_assistant.parse.code_parser import Import, find_symbols, parse_source, syntax_problem

PY = textwrap.dedent('''\
    import os
    from ..pkg import (a,
                       b as c)
    from . import x


    # adds numbers
    @decorate
    def add(a: int,
            b: int) -> int:
        return a + b


    class Calc(Base):
        """A calculator."""
        scale: int = 2

        def add(self, a, b):
            return helper(a).value + b

        def mul(self, a, b):
            return a * b * self.scale
    ''')

TS = textwrap.dedent('''\
    import {a, b as c} from "./util";
    import D from "../d.js";
    export { y } from "./y";
    /** Adds. */
    export const add = (a: number, b: number): number => {
      return a + b;
    };
    export class K extends Base {
      m(x: number): number {
        return helper(x);
      }
    }
    interface Shape { area(): number }
    type Id = string;
    function f() { const r = require("./r"); return import("./dyn"); }
    ''')

GO = textwrap.dedent('''\
    package calc

    import (
    \t"fmt"
    \tm "example.com/demo/pkg"
    )

    // Calc adds.
    type Calc struct {
    \tbase int
    }

    func (c *Calc) Add(a int) int {
    \treturn c.base + a
    }

    func Hello() {
    \tfmt.Println(m.X)
    }
    ''')

RS = textwrap.dedent('''\
    use crate::a::{b, c::d as e};
    use std::io::*;
    mod util;

    /// A struct.
    #[derive(Debug)]
    pub struct S {
        a: i32,
    }

    impl S {
        pub fn new() -> Self {
            S { a: 1 }
        }
    }

    trait Tr {
        fn m(&self);
    }
    ''')

JAVA = textwrap.dedent('''\
    package com.acme;

    import static com.acme.util.Strings.join;
    import com.acme.model.*;
    import java.util.List;

    /** A calculator. */
    @Service
    public class Calc extends Base {
        private int x;

        public Calc() {}

        public int add(int a, int b) {
            return a + b;
        }
    }
    ''')


def by_qualname(path: str, source: str) -> dict[str, tuple[str, int, int, str | None]]:
    parsed = parse_source(path, source)
    assert parsed.parser == "tree-sitter"
    return {s.qualname: (s.kind, s.start_line, s.end_line, s.parent) for s in parsed.symbols}


def test_python_symbols_with_decorators_comments_and_signatures() -> None:
    parsed = parse_source("pkg/calc.py", PY)
    syms = {s.qualname: s for s in parsed.symbols}
    assert set(syms) == {"add", "Calc", "Calc.add", "Calc.mul"}
    assert (syms["add"].kind, syms["add"].start_line, syms["add"].end_line) == ("function", 7, 11)
    assert syms["add"].signature == "def add(a: int, b: int) -> int:"
    assert (syms["Calc"].kind, syms["Calc"].start_line, syms["Calc"].end_line) == ("class", 14, 22)
    assert syms["Calc"].signature == "class Calc(Base):"
    assert (syms["Calc.mul"].kind, syms["Calc.mul"].parent, syms["Calc.mul"].start_line) == ("method", "Calc", 21)
    assert parsed.error is None


def test_python_imports_and_references() -> None:
    parsed = parse_source("pkg/calc.py", PY)
    assert parsed.imports == [Import("os", (), 0, 1), Import("pkg", ("a", "b"), 2, 2), Import("", ("x",), 1, 4)]
    assert {"helper", "value", "Base", "decorate", "scale"} <= parsed.references
    assert "self" not in parsed.references


def test_typescript_symbols_and_imports() -> None:
    syms = by_qualname("web/app.ts", TS)
    assert syms["add"] == ("function", 4, 7, None)
    assert syms["K"][0] == "class" and syms["K.m"] == ("method", 9, 11, "K")
    assert syms["Shape"][0] == "interface" and syms["Id"][0] == "type" and syms["f"][0] == "function"
    modules = [(i.module, i.names) for i in parse_source("web/app.ts", TS).imports]
    assert modules == [("./util", ("a", "c")), ("../d.js", ("D",)), ("./y", ("y",)), ("./r", ()), ("./dyn", ())]


def test_javascript_and_tsx() -> None:
    js = "const x = require('./x');\nclass A { b() { return 1; } }\nexport function c() {}\n"
    assert by_qualname("a.js", js) == {"A": ("class", 2, 2, None), "A.b": ("method", 2, 2, "A"),
                                       "c": ("function", 3, 3, None)}
    tsx = "export function App(): JSX.Element {\n  return <div>{name}</div>;\n}\n"
    assert by_qualname("App.tsx", tsx) == {"App": ("function", 1, 3, None)}


def test_go_symbols_receiver_qualnames_and_imports() -> None:
    parsed = parse_source("calc/calc.go", GO)
    syms = {s.qualname: (s.kind, s.start_line, s.end_line, s.parent) for s in parsed.symbols}
    assert syms == {"Calc": ("struct", 8, 11, None), "Calc.Add": ("method", 13, 15, "Calc"),
                    "Hello": ("function", 17, 19, None)}
    assert [(i.module, i.line) for i in parsed.imports] == [("fmt", 4), ("example.com/demo/pkg", 5)]
    assert {"Println", "X", "base"} <= parsed.references


def test_rust_symbols_impl_methods_and_uses() -> None:
    parsed = parse_source("src/lib.rs", RS)
    syms = {s.qualname: (s.kind, s.start_line, s.end_line, s.parent) for s in parsed.symbols}
    assert syms["S"] == ("struct", 5, 9, None)  # doc comment and attribute included
    assert syms["S.new"] == ("method", 12, 14, "S")
    assert syms["impl S"][0] == "impl"
    assert syms["Tr.m"] == ("method", 18, 18, "Tr")
    assert [(i.module, i.names) for i in parsed.imports] == [
        ("crate::a", ("b",)), ("crate::a::c", ("d",)), ("std::io", ("*",)), ("self::util", ())]


def test_java_symbols_and_imports() -> None:
    parsed = parse_source("src/main/java/com/acme/Calc.java", JAVA)
    syms = {s.qualname: (s.kind, s.start_line, s.end_line) for s in parsed.symbols}
    assert syms == {"Calc": ("class", 7, 17), "Calc.Calc": ("method", 12, 12), "Calc.add": ("method", 14, 16)}
    assert [(i.module, i.names) for i in parsed.imports] == [
        ("com.acme.util.Strings", ("join",)), ("com.acme.model", ("*",)), ("java.util.List", ())]


def test_syntax_problem_valid_and_broken() -> None:
    assert syntax_problem("a.py", PY) is None
    assert syntax_problem("a.ts", TS) is None
    assert syntax_problem("a.go", GO) is None
    assert syntax_problem("a.rb", "def x(\n") is None  # no checker for Ruby
    problem = syntax_problem("a.py", "x = 1\n\ndef f(:\n    pass\n")
    assert problem is not None and problem.line == 3 and problem.message
    problem = syntax_problem("a.js", "function f() {\n  return 1;\n}\nlet x = (;\n")
    assert problem is not None and problem.line == 4
    problem = syntax_problem("a.go", "package main\n\nfunc f() int {\n\tx := \n\treturn 1\n}\n")
    assert problem is not None and problem.line in (4, 5)
    problem = syntax_problem("A.java", "class A {\n  void m() {\n    int x = 1\n  }\n}\n")
    assert problem is not None and problem.line == 3 and "missing" in problem.message


def test_broken_python_still_yields_definitions() -> None:
    source = "import os\n\ndef ok():\n    return 1\n\ndef broken(:\n    pass\n\nclass Later:\n    def m(self):\n        pass\n"
    parsed = parse_source("b.py", source)
    assert parsed.error is not None and parsed.error.line == 6
    names = {s.qualname for s in parsed.symbols}
    assert {"ok", "Later", "Later.m"} <= names
    assert any(i.module == "os" for i in parsed.imports)


def test_regex_fallback_for_ruby() -> None:
    source = "require 'json'\n\nclass Greeter\n  def hello(name)\n    puts name\n  end\n\n  def self.make\n  end\nend\n"
    parsed = parse_source("lib/greeter.rb", source)
    assert parsed.parser == "regex"
    syms = {s.qualname: (s.kind, s.start_line, s.end_line) for s in parsed.symbols}
    assert syms == {"Greeter": ("class", 3, 10), "Greeter.hello": ("method", 4, 6), "Greeter.make": ("method", 8, 9)}
    assert parsed.imports[0].module == "json"


def test_regex_fallback_for_c_and_unknown_language() -> None:
    source = "#include \"calc.h\"\n\nint add(int a, int b)\n{\n    return a + b;\n}\n"
    parsed = parse_source("calc.c", source)
    assert [(s.qualname, s.start_line, s.end_line) for s in parsed.symbols] == [("add", 3, 6)]
    assert parse_source("notes.xyz", "whatever").parser == "none"


def test_find_symbols_exact_and_bare_name() -> None:
    parsed = parse_source("pkg/calc.py", PY)
    assert [s.qualname for s in find_symbols(parsed, "Calc.add")] == ["Calc.add"]
    assert [s.qualname for s in find_symbols(parsed, "mul")] == ["Calc.mul"]
    assert find_symbols(parsed, "nothing") == []
    assert [s.qualname for s in find_symbols(parsed, "add")] == ["add"]  # exact top-level match wins


def test_skeleton_elides_bodies_and_keeps_requested() -> None:
    text = skeleton("pkg/calc.py", PY)
    assert "import os" in text and "b as c)" in text
    assert "def add(a: int," in text and "return a + b\n" not in text
    assert "...  # lines 11-11" in text
    assert "    def mul(self, a, b):" in text and "return a * b" not in text
    kept = skeleton("pkg/calc.py", PY, keep={"Calc.mul"})
    assert "return a * b * self.scale" in kept and "return helper(a)" not in kept


def test_an_excerpt_shows_only_the_kept_definitions_whole_under_their_class_header() -> None:
    text = excerpt("pkg/calc.py", PY, keep={"Calc.mul"})
    assert text == "⋮\nclass Calc(Base):\n⋮\n    def mul(self, a, b):\n        return a * b * self.scale\n"
    both = excerpt("pkg/calc.py", PY, keep={"add", "Calc.mul"})
    assert "@decorate\ndef add(a: int,\n        b: int) -> int:\n    return a + b\n" in both
    assert "import os" not in both and "return helper(a)" not in both
    assert excerpt("pkg/calc.py", PY, keep={"nothing"}) is None and excerpt("pkg/calc.py", PY) is None


def test_skeleton_go_keeps_braces_and_import_block() -> None:
    text = skeleton("calc/calc.go", GO)
    assert "import (" in text and '\t"fmt"' in text and "\n)\n" in text
    assert "func (c *Calc) Add(a int) int {\n\t...  // lines 14-14\n}" in text
    assert "\tbase int" in text  # struct fields are kept
