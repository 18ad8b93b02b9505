"""What a parse yields: definitions, imports, syntax problems and the parsed file, shared by both parsers."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

# definition kinds whose nested functions are methods
CLASSLIKE = {"class", "struct", "interface", "enum", "trait", "impl"}


@dataclass(frozen=True)
class Symbol:
    name: str
    qualname: str  # "Calc.add"; Go methods use the receiver type, Rust impl methods the impl's type
    kind: str  # class | function | method | interface | struct | enum | trait | type | module | impl (Rust)
    start_line: int  # 1-based, inclusive; includes decorators and directly attached comments
    end_line: int  # 1-based, inclusive
    signature: str  # the header up to the body, on one line
    parent: str | None  # qualname of the enclosing definition


@dataclass(frozen=True)
class Import:
    module: str  # as written, without leading dots for Python relative imports; Rust `mod x;` is "self::x"
    names: tuple[str, ...]  # imported names; ("*",) for wildcards; () when none
    level: int = 0  # Python relative-import dots
    line: int = 0


@dataclass(frozen=True)
class SyntaxProblem:
    line: int
    message: str


@dataclass
class ParsedFile:
    path: str
    language: str | None
    symbols: list[Symbol]
    imports: list[Import]
    references: set[str]
    parser: str  # "tree-sitter" | "regex" | "none"
    error: SyntaxProblem | None = None
    # (qualname, start_line) -> (first, last) line of the elidable body, for skeletons; absent when nothing to elide
    bodies: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict, repr=False)


def one_line(text: str) -> str:
    """A definition header folded onto one line (the form of `Symbol.signature`)."""
    text = re.sub(r"\s*\n\s*", " ", text.strip())
    return re.sub(r"\(\s+", "(", re.sub(r",?\s+\)", ")", text))[:300]


def _typed_form(dotted: str) -> str:
    """A qualified name as a user types it: JavaScript's `.prototype` and a leading `module.` left out."""
    return dotted.replace(".prototype.", ".").removesuffix(".prototype").removeprefix("module.")


def named_by(qualname: str, typed: str) -> bool:
    """Whether `typed` (`route`, `Router.route`, `Router.prototype.route`, `res.redirect`, `Calc.add`) names the
    definition `qualname`: the whole of it or a tail after a dot, with or without `.prototype` and `module.`."""
    if typed in (qualname, qualname.rsplit(".", 1)[-1]) or qualname.endswith("." + typed):
        return True
    plain, wanted = _typed_form(qualname), _typed_form(typed)
    return wanted == plain or plain.endswith("." + wanted)
