"""Definitions, imports, references and syntax checks for source files.

Tree-sitter does the work for python, javascript, typescript, tsx, go, rust and java (one Query per language, run
once per file); every other language, and a file tree-sitter cannot make sense of, goes through line regexes
(`regex_parser.py`). The dataclasses live in `code_model.py` and are re-exported here; chunking (which uses this
parser) lives in `chunker.py`.
"""
from __future__ import annotations

import ast
import importlib
import logging
import re
import threading
from dataclasses import dataclass
from functools import cache

from tree_sitter import Language, Node, Parser, Query, QueryCursor

from code_assistant.languages import language_for
from code_assistant.parse.code_model import CLASSLIKE, Import, ParsedFile, Symbol, SyntaxProblem, named_by, one_line
from code_assistant.parse.js_forms import js_form
from code_assistant.parse.regex_parser import regex_imports, regex_references, regex_symbols

logger = logging.getLogger(__name__)
__all__ = ["Import", "ParsedFile", "Symbol", "SyntaxProblem", "find_symbols", "parse_source", "syntax_problem"]


@dataclass(frozen=True)
class _Spec:
    module: str
    function: str
    defs: dict[str, str]  # node type -> kind
    query: str  # captures: @def, @imp, @call (JS require/import()), @mod (Rust `mod x;`), @ref


_COMMENTS = {"comment", "line_comment", "block_comment"}
_JS_LANGUAGES = {"javascript", "typescript", "tsx"}
_JS_DEFS = {
    "function_declaration": "function", "generator_function_declaration": "function", "class_declaration": "class",
    "method_definition": "method", "variable_declarator": "function", "field_definition": "method",
    # named by js_forms: member assignments, object literal members, defineProperty(obj, 'name', …) calls
    "assignment_expression": "function", "pair": "method", "call_expression": "property",
}
_JS_FORMS = {"assignment_expression", "pair", "call_expression"}
_FUNCTION_VALUES = "[(arrow_function) (function_expression) (generator_function) (class)]"
_JS_QUERY = f"""
[(function_declaration) (generator_function_declaration) (class_declaration) (method_definition)] @def
(variable_declarator value: [(arrow_function) (function_expression) (generator_function) (class)
                             (assignment_expression)]) @def
(assignment_expression right: [{_FUNCTION_VALUES[1:-1]} (assignment_expression)]) @def
(pair value: {_FUNCTION_VALUES}) @def
(call_expression function: [(identifier) (member_expression)] @_define
 arguments: (arguments . (_) . (string) . [(object) (function_expression) (arrow_function)])
 (#match? @_define "(^|[.])define[A-Z][A-Za-z]*$")) @def
[(import_statement) (export_statement source: (_))] @imp
(call_expression function: [(identifier) (import)] arguments: (arguments . (string))) @call
"""
_TS_DEFS = {**_JS_DEFS, "abstract_class_declaration": "class", "interface_declaration": "interface",
            "type_alias_declaration": "type", "enum_declaration": "enum", "function_signature": "function",
            "abstract_method_signature": "method", "public_field_definition": "method", "method_signature": "method",
            "property_signature": "property", "internal_module": "module", "module": "module"}
_TS_QUERY = _JS_QUERY.replace("(method_definition)]", "(method_definition) (abstract_class_declaration) "
                              "(interface_declaration) (type_alias_declaration) (enum_declaration) "
                              "(function_signature) (abstract_method_signature) (method_signature) "
                              "(property_signature) (internal_module) (module body: (_))]") + """
(public_field_definition value: [(arrow_function) (function_expression)]) @def
[(identifier) (property_identifier) (type_identifier) (shorthand_property_identifier)] @ref
"""
_SPECS: dict[str, _Spec] = {
    "python": _Spec(module="tree_sitter_python", function="language", defs={
        "function_definition": "function", "class_definition": "class", "assignment": "function"}, query="""
[(function_definition) (class_definition)] @def
(assignment left: (identifier) right: (lambda)) @def
[(import_statement) (import_from_statement)] @imp
(identifier) @ref
"""),
    "javascript": _Spec(module="tree_sitter_javascript", function="language", defs=_JS_DEFS, query=_JS_QUERY + """
(field_definition value: [(arrow_function) (function_expression) (generator_function)]) @def
[(identifier) (property_identifier) (shorthand_property_identifier)] @ref
"""),
    "typescript": _Spec(module="tree_sitter_typescript", function="language_typescript", defs=_TS_DEFS,
                        query=_TS_QUERY),
    "tsx": _Spec(module="tree_sitter_typescript", function="language_tsx", defs=_TS_DEFS, query=_TS_QUERY),
    "go": _Spec(module="tree_sitter_go", function="language", defs={
        "function_declaration": "function", "method_declaration": "method", "type_spec": "type",
        "type_alias": "type", "method_elem": "method", "var_spec": "function"}, query="""
[(function_declaration) (method_declaration) (type_spec) (type_alias) (method_elem)] @def
(var_spec value: (expression_list . (func_literal) .)) @def
(import_spec) @imp
[(identifier) (field_identifier) (type_identifier)] @ref
"""),
    "rust": _Spec(module="tree_sitter_rust", function="language", defs={
        "function_item": "function", "function_signature_item": "function", "struct_item": "struct",
        "enum_item": "enum", "union_item": "struct", "trait_item": "trait", "type_item": "type",
        "impl_item": "impl", "mod_item": "module", "macro_definition": "macro"}, query="""
[(function_item) (function_signature_item) (struct_item) (enum_item) (union_item) (trait_item) (type_item)
 (impl_item) (mod_item body: (_)) (macro_definition)] @def
(use_declaration) @imp
(mod_item !body) @mod
[(identifier) (field_identifier) (type_identifier)] @ref
"""),
    "java": _Spec(module="tree_sitter_java", function="language", defs={
        "class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
        "record_declaration": "class", "annotation_type_declaration": "interface", "method_declaration": "method",
        "constructor_declaration": "method", "compact_constructor_declaration": "method"}, query="""
[(class_declaration) (interface_declaration) (enum_declaration) (record_declaration) (annotation_type_declaration)
 (method_declaration) (constructor_declaration) (compact_constructor_declaration)] @def
(import_declaration) @imp
[(identifier) (type_identifier)] @ref
"""),
}
_IGNORED_REFS = {"self", "cls", "this", "super", "_"}
_local = threading.local()


@cache
def _grammar(language: str) -> tuple[Language, Query] | None:
    spec = _SPECS.get(language)
    if spec is None:
        return None
    try:
        lang = Language(getattr(importlib.import_module(spec.module), spec.function)())
        return lang, Query(lang, spec.query)
    except Exception as exc:  # a missing or incompatible grammar degrades to the regex parser
        logger.warning("tree-sitter grammar for %s unavailable: %s", language, exc)
        return None


def _parse_tree(language: str, source: bytes) -> tuple[Node, Query] | None:
    """Parse with a per-thread Parser (Parser objects are not thread-safe); Language and Query are shared."""
    grammar = _grammar(language)
    if grammar is None:
        return None
    parsers: dict[str, Parser] = _local.__dict__.setdefault("parsers", {})
    parser = parsers.get(language)
    if parser is None:
        parser = parsers[language] = Parser(grammar[0])
    return parser.parse(source).root_node, grammar[1]


def _text(node: Node | None) -> str:
    return node.text.decode("utf-8", "replace") if node is not None and node.text is not None else ""


def _type_name(node: Node | None) -> str:
    """The bare type name in a Go receiver or Rust impl type: `*Calc[T]` -> Calc, `Vec<T>` -> Vec."""
    while node is not None and node.type not in ("type_identifier", "identifier"):
        inner = node.child_by_field_name("type") or next(
            (c for c in node.named_children if c.type not in ("type_arguments", "mutable_specifier")), None)
        if inner is None and node.type == "parameter_list":
            inner = node.named_children[0] if node.named_children else None
        node = inner
    return _text(node)


def _outer(node: Node, language: str) -> Node:
    """The node whose lines a definition covers: decorators, `export`, `const x =`, a one-spec Go `type`."""
    parent = node.parent
    if parent is None:
        return node
    if parent.type == "decorated_definition" or (
            node.type in ("type_spec", "type_alias") and parent.type == "type_declaration"
            and parent.named_child_count == 1) or (
            node.type == "var_spec" and parent.type == "var_declaration" and parent.named_child_count == 1):
        return parent
    if node.type == "assignment" and parent.type == "expression_statement":  # Python's `f = lambda x: …`
        return parent
    if node.type == "variable_declarator" and parent.type in ("lexical_declaration", "variable_declaration"):
        node, parent = parent, parent.parent
    if parent is not None and parent.type == "ambient_declaration":  # TypeScript's `declare function f(): T`
        node, parent = parent, parent.parent
    if parent is not None and parent.type == "export_statement":
        return parent
    return node


def _attached_start(node: Node, language: str) -> int:
    """First row of the comments / Rust attributes directly above the node (no blank line in between)."""
    row = node.start_point.row
    prev = node.prev_named_sibling
    while prev is not None and (prev.type in _COMMENTS or prev.type == "attribute_item"):
        end_row = prev.end_point.row - (1 if prev.end_point.column == 0 else 0)
        if not row - 1 <= end_row < row:
            break
        row = prev.start_point.row
        prev = prev.prev_named_sibling
    return row


def _body(node: Node) -> Node | None:
    if node.type in ("variable_declarator", "assignment") or node.type.endswith("field_definition"):
        value = node.child_by_field_name("value") or node.child_by_field_name("right")
        return value.child_by_field_name("body") if value is not None else None
    if node.type == "var_spec":
        values = node.child_by_field_name("value")
        literal = values.named_children[0] if values is not None and values.named_children else None
        return literal.child_by_field_name("body") if literal is not None else None
    if node.type == "type_spec":
        typ = node.child_by_field_name("type")
        if typ is None or typ.type not in ("struct_type", "interface_type"):
            return None
        return next((c for c in typ.children if c.type in ("field_declaration_list", "{")), None)
    return node.child_by_field_name("body")


@dataclass(frozen=True)
class _Definition:
    """A definition node as the symbol walk reads it."""

    name: str
    kind: str
    outer: Node  # the node whose lines the definition covers (_outer)
    body: Node | None
    owner: str  # what qualifies the name instead of the enclosing definition: a Go method's receiver type, a JS
    # member assignment's object (`res`, `Router.prototype`); else ""
    name_node: Node | None = None
    aliases: tuple[str, ...] = ()  # more qualified names of the same definition (js_forms.JsForm.aliases)


def _definition(node: Node, spec: _Spec, language: str) -> _Definition | None:
    """The name, kind, outer node, body node and owner of a definition node."""
    if language in _JS_LANGUAGES and (node.type in _JS_FORMS or node.type == "variable_declarator" or (
            node.type == "method_definition" and node.parent is not None and node.parent.type == "object")):
        value = node.child_by_field_name("value")
        if node.type != "variable_declarator" or (value is not None and value.type == "assignment_expression"):
            form = js_form(node)
            if form is None:
                return None
            return _Definition(name=form.name, kind=form.kind, outer=form.outer, body=form.body, owner=form.owner,
                               name_node=form.name_node, aliases=form.aliases)
    kind = spec.defs[node.type]
    owner = ""
    name_node = node.child_by_field_name("name") or node.child_by_field_name("property")  # JS class fields
    if node.type == "assignment":  # Python `f = lambda …`
        name_node = node.child_by_field_name("left")
    if node.type == "impl_item":
        name, name_node = _type_name(node.child_by_field_name("type")), None
    elif node.type == "module":  # TypeScript `declare module "x" { … }`
        name = _text(name_node).strip("'\"`")
    else:
        name = _text(name_node)
    if node.type == "variable_declarator" and (value := node.child_by_field_name("value")) is not None and (
            value.type == "class"):  # `const Store = class { … }`
        kind = "class"
    elif node.type == "type_spec":
        typ = node.child_by_field_name("type")
        kind = {"struct_type": "struct", "interface_type": "interface"}.get(typ.type if typ else "", "type")
    elif node.type == "method_declaration" and language == "go":
        owner = _type_name(node.child_by_field_name("receiver"))
    elif node.type == "var_spec" and len(node.children_by_field_name("name")) != 1:
        return None
    if not name:
        return None
    return _Definition(name=name, kind=kind, outer=_outer(node, language), body=_body(node), owner=owner,
                       name_node=name_node)


def _ts_symbols(nodes: list[Node], spec: _Spec, language: str, src: bytes,
                bodies: dict[tuple[str, int], tuple[int, int]]) -> tuple[list[Symbol], set[int]]:
    symbols: list[Symbol] = []
    name_starts: set[int] = set()
    stack: list[tuple[int, str, str]] = []  # (end byte, qualname, kind) of open definitions
    for node in sorted(nodes, key=lambda n: (n.start_byte, -n.end_byte)):
        found = _definition(node, spec, language)
        if found is None:
            continue
        name, outer, body, kind = found.name, found.outer, found.body, found.kind
        while stack and stack[-1][0] <= node.start_byte:
            stack.pop()
        enclosing = stack[-1][1] if stack else ""
        owner = found.owner
        if owner == "this" or owner.startswith("this."):  # `this.x = function` in a constructor: the constructor's
            owner = f"{enclosing}{owner[4:]}" if enclosing else owner[5:]
        parent = owner or enclosing or None
        parent_kind = "" if owner else (stack[-1][2] if stack else "")
        if kind == "function" and parent_kind in CLASSLIKE:
            kind = "method"
        qualname = f"{parent}.{name}" if parent else name
        stack.append((node.end_byte, qualname, kind))
        if found.name_node is not None:
            name_starts.add(found.name_node.start_byte)
        if kind == "impl":  # methods are "Type.method"; the block itself is "impl Type" / "impl Trait for Type"
            trait = _type_name(node.child_by_field_name("trait"))
            qualname, parent = (f"impl {trait} for {name}" if trait else f"impl {name}"), None
        start_line = _attached_start(outer, language) + 1
        head_start = outer.start_byte if outer.type != "decorated_definition" else node.start_byte
        if body is not None:
            colon = next((c for c in node.children if c.type == ":"), None) if language == "python" else None
            head_end = colon.end_byte if colon is not None else body.start_byte
            signature = one_line(src[head_start:head_end].decode("utf-8", "replace"))
            if colon is not None:  # 1-based lines strictly after the header / inside the braces
                first, last = colon.end_point.row + 2, body.end_point.row + 1
            elif src[body.start_byte:body.start_byte + 1] == b"{":
                first, last = body.start_point.row + 2, body.end_point.row
            else:
                first, last = 1, 0
            if first <= last:
                bodies[(qualname, start_line)] = (first, last)
        else:
            signature = one_line(src[head_start:outer.end_byte].decode("utf-8", "replace").split("\n")[0])
        for also in (qualname, *found.aliases):
            if also != qualname and (qualname, start_line) in bodies:
                bodies[(also, start_line)] = bodies[(qualname, start_line)]
            symbols.append(Symbol(name=also.rpartition(".")[2], qualname=also, kind=kind, start_line=start_line,
                                  end_line=outer.end_point.row + 1, signature=signature.rstrip(";").rstrip(),
                                  parent=also.rpartition(".")[0] if also != qualname else parent))
    return symbols, name_starts


def _ts_imports(language: str, nodes: list[Node], calls: list[Node], mods: list[Node]) -> list[Import]:
    imports: list[Import] = []
    for node in nodes:
        line = node.start_point.row + 1
        if language == "python":
            imports.extend(_python_import(node, line))
        elif language in ("javascript", "typescript", "tsx"):
            source = _text(node.child_by_field_name("source")).strip("'\"`")
            names = [_text(c.child_by_field_name("alias") or c.child_by_field_name("name")) or _text(c)
                     for c in _descendants(node, ("identifier", "import_specifier", "export_specifier",
                                                  "namespace_import"), stop=("string",))
                     if c.type != "identifier" or c.parent.type == "import_clause"]
            imports.append(Import(module=source, names=tuple(n for n in names if n), line=line))
        elif language == "go":
            alias = node.child_by_field_name("name")
            imports.append(Import(module=_text(node.child_by_field_name("path")).strip('"`'),
                                  names=(_text(alias),) if alias is not None else (), line=line))
        elif language == "java":
            target = next((c for c in node.named_children if c.type in ("scoped_identifier", "identifier")), None)
            dotted = _text(target)
            if any(c.type == "asterisk" for c in node.children):
                imports.append(Import(module=dotted, names=("*",), line=line))
            elif any(c.type == "static" for c in node.children) and "." in dotted:
                owner, _, member = dotted.rpartition(".")
                imports.append(Import(module=owner, names=(member,), line=line))
            else:
                imports.append(Import(module=dotted, names=(), line=line))
        elif language == "rust":
            imports.extend(_rust_use(node.child_by_field_name("argument"), "", line))
    for node in calls:
        function = node.child_by_field_name("function")
        if function is not None and (function.type == "import" or _text(function) == "require"):
            args = node.child_by_field_name("arguments")
            if args is not None and args.named_child_count:
                imports.append(Import(module=_text(args.named_children[0]).strip("'\"`"), names=(),
                                      line=node.start_point.row + 1))
    for node in mods:
        imports.append(Import(module=f"self::{_text(node.child_by_field_name('name'))}", names=(),
                              line=node.start_point.row + 1))
    return sorted(imports, key=lambda i: i.line)


def _descendants(node: Node, types: tuple[str, ...], stop: tuple[str, ...]) -> list[Node]:
    found, todo = [], list(reversed(node.children))
    while todo:
        child = todo.pop()
        if child.type in stop:
            continue
        if child.type in types:
            found.append(child)
            if child.type != "identifier":
                continue
        todo.extend(reversed(child.children))
    return found


def _python_import(node: Node, line: int) -> list[Import]:
    def dotted(n: Node) -> str:
        return _text(n.child_by_field_name("name") if n.type == "aliased_import" else n)

    if node.type == "import_statement":
        return [Import(module=dotted(n), names=(), line=line) for n in node.children_by_field_name("name")]
    module = node.child_by_field_name("module_name")
    level, text = 0, _text(module)
    if module is not None and module.type == "relative_import":
        prefix = next((c for c in module.children if c.type == "import_prefix"), None)
        level = len(_text(prefix))
        text = text[level:]
    names = tuple(dotted(n) for n in node.children_by_field_name("name"))
    if any(c.type == "wildcard_import" for c in node.children):
        names = ("*",)
    return [Import(module=text, names=names, level=level, line=line)]


def _rust_use(node: Node | None, prefix: str, line: int) -> list[Import]:
    if node is None:
        return []
    join = (lambda a, b: f"{a}::{b}" if a and b else a or b)
    if node.type == "use_as_clause":
        return _rust_use(node.child_by_field_name("path"), prefix, line)
    if node.type == "use_wildcard":
        inner = next((c for c in node.named_children), None)
        return [Import(module=join(prefix, _text(inner)), names=("*",), line=line)]
    if node.type == "scoped_use_list":
        base = join(prefix, _text(node.child_by_field_name("path")))
        items = node.child_by_field_name("list")
        simple = [c for c in (items.named_children if items else []) if c.type in ("identifier", "self")]
        nested = [c for c in (items.named_children if items else []) if c.type not in ("identifier", "self")]
        out = [Import(module=base, names=tuple(_text(c) for c in simple), line=line)] if simple or not nested else []
        for child in nested:
            out.extend(_rust_use(child, base, line))
        return out
    if node.type == "use_list":
        return [imp for child in node.named_children for imp in _rust_use(child, prefix, line)]
    full = join(prefix, _text(node))
    if "::" in full:
        owner, _, name = full.rpartition("::")
        return [Import(module=owner, names=(name,), line=line)]
    return [Import(module=full, names=(), line=line)]


def parse_source(path: str, source: str, references: bool = True) -> ParsedFile:
    """Definitions, imports and references of one file (references=False leaves them out: the index has no use for
    them and they cost a tenth of a parse); never raises on bad input."""
    language = language_for(path)
    if language == "typescript" and path.endswith(".tsx"):
        language = "tsx"
    src = source.encode("utf-8", "replace")
    parsed = _parse_tree(language, src) if language else None
    if parsed is None:
        symbols, bodies = regex_symbols(language, source)
        refs = regex_references(language, source) if references else set()
        return ParsedFile(path=path, language=language, symbols=symbols, imports=regex_imports(language, source),
                          references=refs, parser="regex" if symbols or language in _REGEX_LANGUAGES else "none",
                          bodies=bodies)
    root, query = parsed
    captures = QueryCursor(query).captures(root)
    bodies: dict[tuple[str, int], tuple[int, int]] = {}
    spec = _SPECS[language]
    symbols, name_starts = _ts_symbols(captures.get("def", []), spec, language, src, bodies)
    imports = _ts_imports(language, captures.get("imp", []), captures.get("call", []), captures.get("mod", []))
    refs: set[str] = set()
    if references:
        raw = {n.text for n in captures.get("ref", []) if n.start_byte not in name_starts}
        refs = {r.decode("utf-8", "replace") for r in raw if r} - _IGNORED_REFS
    result = ParsedFile(path=path, language=language, symbols=symbols, imports=imports, references=refs,
                        parser="tree-sitter", bodies=bodies)
    if root.has_error:
        result.error = syntax_problem(path, source)
        fallback, fallback_bodies = regex_symbols(language, source)
        if len(fallback) > len(symbols):  # the error swallowed definitions tree-sitter would have found
            result.symbols, result.bodies, result.parser = fallback, fallback_bodies, "regex"
            if language == "python":
                result.imports = regex_imports(language, source)
    return result


_REGEX_LANGUAGES = {"c", "cpp", "csharp", "ruby", "php", "kotlin", "swift", "scala", "shell"}


def syntax_problem(path: str, source: str) -> SyntaxProblem | None:
    """The first syntax error, or None when the file parses or its language has no checker."""
    if path.endswith((".json", ".toml")):
        return _data_problem(path, source)
    language = language_for(path)
    if language == "python":
        try:
            compile(source, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
        except SyntaxError as exc:
            return SyntaxProblem(exc.lineno or 1, exc.msg)
        except ValueError as exc:  # null bytes
            return SyntaxProblem(1, str(exc))
        return None
    if language == "typescript" and path.endswith(".tsx"):
        language = "tsx"
    parsed = _parse_tree(language, source.encode("utf-8", "replace")) if language else None
    if parsed is None or not parsed[0].has_error:
        return None
    node: Node | None = parsed[0]
    while node is not None and not (node.is_error or node.is_missing):
        node = next((c for c in node.children if c.has_error or c.is_missing or c.is_error), None)
    if node is None:
        return None
    if node.is_missing:
        return SyntaxProblem(node.start_point.row + 1, f"missing {node.type!r}")
    snippet = _text(node).split("\n")[0][:40]
    return SyntaxProblem(node.start_point.row + 1, f"syntax error near {snippet!r}")


def _data_problem(path: str, source: str) -> SyntaxProblem | None:
    """JSON and TOML files: what their own parsers say."""
    import json
    import tomllib

    try:
        if path.endswith(".json"):
            json.loads(source)
        else:
            tomllib.loads(source)
    except json.JSONDecodeError as exc:
        return SyntaxProblem(exc.lineno, exc.msg)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        return SyntaxProblem(int(line.group(1)) if line else 1, str(exc).split(" (at")[0])
    return None


def find_symbols(parsed: ParsedFile, qualname: str) -> list[Symbol]:
    """Definitions with exactly this qualname; else those it names as a user types it (code_model.named_by: a bare
    name, a tail, `Router.route` for `Router.prototype.route`), if they are one."""
    exact = [s for s in parsed.symbols if s.qualname == qualname]
    if exact:
        return exact
    tail = [s for s in parsed.symbols if named_by(s.qualname, qualname)]
    return tail if len({s.qualname for s in tail}) == 1 else []
