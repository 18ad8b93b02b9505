"""Every form a language's real code defines a function, class or member in: seen by the parser with its kind and
lines, found by the `symbol` tool under the names a user types, and kept as a signature in a file's skeleton.

One row per form: the source (a small file of its own), the qualified name the index gives it, its kind, its first
and last line, and the names a user would give `symbol` for it (`res.redirect`, `Router.route`, `route`).
"""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from code_assistant.parse.chunker import skeleton
from code_assistant.parse.code_parser import parse_source
from code_assistant.retrieve.file_map import file_map
from code_assistant.settings import load_settings
from code_assistant.tools.files import RepoView
from code_assistant.tools.looking import Looking
from code_assistant.workspace import build_indexer
from tests.repos import indexed_tree, python_repo, run_cli


@dataclass(frozen=True)
class Form:
    id: str
    path: str
    source: str
    qualname: str
    kind: str
    lines: tuple[int, int]
    typed: tuple[str, ...]


def form(id: str, path: str, source: str, qualname: str, kind: str, lines: tuple[int, int], *typed: str) -> Form:
    return Form(id, path, textwrap.dedent(source), qualname, kind, lines, typed)


JAVASCRIPT = [
    form("member assignment", "lib/response.js", """\
        var res = module.exports = { __proto__: http.ServerResponse.prototype };
        // Redirect to the given `url`.
        res.redirect = function redirect(url) {
          this.location(url);
        };
        """, "res.redirect", "method", (2, 5), "redirect", "res.redirect"),
    form("prototype assignment", "lib/router.js", """\
        Router.prototype.route = function route(path) {
          return new Route(path);
        };
        """, "Router.prototype.route", "method", (1, 3), "route", "Router.prototype.route", "Router.route"),
    form("exports member", "lib/parse.js", "exports.parse = function (str) {\n  return str.split(';');\n};\n",
         "exports.parse", "method", (1, 3), "parse", "exports.parse", "module.exports.parse"),
    form("module.exports member", "lib/serialize.js", "module.exports.serialize = (name, val) => name + '=' + val;\n",
         "module.exports.serialize", "method", (1, 1), "serialize", "exports.serialize", "module.exports.serialize"),
    form("exports = module.exports = function", "lib/express.js", """\
        exports = module.exports = function createApplication() {
          return app;
        };
        """, "createApplication", "function", (1, 3), "createApplication"),
    form("var self = module.exports = function", "lib/send.js", """\
        var self = module.exports = function sendFile(path) {
          return path;
        };
        """, "sendFile", "function", (1, 3), "sendFile"),
    form("anonymous module.exports function", "lib/anon.js", "module.exports = function (req) {\n  return req;\n};\n",
         "module.exports", "function", (1, 3), "module.exports"),
    form("class field arrow", "lib/view.js", """\
        class View {
          handle = (req) => {
            return req;
          };
        }
        """, "View.handle", "method", (2, 4), "handle", "View.handle"),
    form("static field function", "lib/static.js", "class Cache {\n  static make = function () {};\n}\n",
         "Cache.make", "method", (2, 2), "make", "Cache.make"),
    form("getter", "lib/getter.js", "class Req {\n  get protocol() {\n    return 'http';\n  }\n}\n",
         "Req.protocol", "method", (2, 4), "protocol", "Req.protocol"),
    form("setter", "lib/setter.js", "class Opts {\n  set strict(v) {\n    this.s = v;\n  }\n}\n",
         "Opts.strict", "method", (2, 4), "strict", "Opts.strict"),
    form("object literal function", "lib/methods.js", """\
        var proto = {
          propFn: function () {
            return 1;
          },
        };
        """, "proto.propFn", "method", (2, 4), "propFn", "proto.propFn"),
    form("object literal shorthand", "lib/short.js", "module.exports = {\n  init(app) {\n    return app;\n  },\n};\n",
         "module.exports.init", "method", (2, 4), "init", "exports.init"),
    form("Object.defineProperty getter", "lib/request.js", """\
        Object.defineProperty(req, 'protocol', {
          get: function () {
            return 'http';
          },
        });
        """, "req.protocol", "property", (1, 5), "protocol", "req.protocol"),
    form("a module's own defineGetter", "lib/getter2.js", """\
        defineGetter(req, 'xhr', function xhr() {
          return this.get('X-Requested-With') === 'XMLHttpRequest';
        });
        """, "req.xhr", "property", (1, 3), "xhr", "req.xhr"),
    form("two names in one chain", "lib/alias.js", """\
        req.get =
        req.header = function header(name) {
          return this.headers[name.toLowerCase()];
        };
        """, "req.header", "method", (1, 4), "header", "req.header", "get", "req.get"),
    form("Object.assign onto a prototype", "lib/mixin.js", """\
        Object.assign(Layer.prototype, {
          match: function (path) {
            return path === this.path;
          },
        });
        """, "Layer.prototype.match", "method", (2, 4), "match", "Layer.match", "Layer.prototype.match"),
    form("prototype object", "lib/proto.js", "Route.prototype = {\n  dispatch() {\n    return 1;\n  },\n};\n",
         "Route.prototype.dispatch", "method", (2, 4), "dispatch", "Route.dispatch"),
    form("this member in a constructor", "lib/ctor.js", """\
        function Server() {
          this.listen = function (port) {
            return port;
          };
        }
        """, "Server.listen", "method", (2, 4), "listen", "Server.listen"),
    form("function declaration", "lib/decl.js", "function compile(fn) {\n  return fn;\n}\n",
         "compile", "function", (1, 3), "compile"),
    form("const arrow", "lib/arrow.js", "const etag = (body) => {\n  return body.length;\n};\n",
         "etag", "function", (1, 3), "etag"),
    form("class expression in a variable", "lib/classvar.js", "const Store = class {\n  load() {\n    return 1;\n"
         "  }\n};\n", "Store.load", "method", (2, 4), "load", "Store.load"),
    form("class expression on a member", "lib/classexp.js", "exports.Layer = class Layer {\n  run() {}\n};\n",
         "exports.Layer", "class", (1, 3), "Layer", "exports.Layer"),
]

TYPESCRIPT = [
    form("declare function", "src/declare.ts", "declare function ready(cb: () => void): void;\n",
         "ready", "function", (1, 1), "ready"),
    form("namespace", "src/ns.ts", "namespace Http {\n  export const get = (url: string) => url;\n}\n",
         "Http.get", "function", (2, 2), "get", "Http.get"),
    form("declare module", "src/mod.d.ts", 'declare module "cookie" {\n  export function parse(s: string): object;\n}\n',
         "cookie.parse", "function", (2, 2), "parse", "cookie.parse"),
    form("abstract member", "src/abstract.ts", "abstract class Store {\n  abstract load(key: string): string;\n}\n",
         "Store.load", "method", (2, 2), "load", "Store.load"),
    form("method overload signature", "src/over.ts", """\
        class Query {
          where(a: string): this;
          where(a: any) {
            return this;
          }
        }
        """, "Query.where", "method", (2, 2), "where", "Query.where"),
    form("function overload signature", "src/fover.ts", "export function pick(a: string): string;\n"
         "export function pick(a: any) {\n  return a;\n}\n", "pick", "function", (1, 1), "pick"),
    form("interface method", "src/iface.ts", "interface Handler {\n  handle(req: Request): void;\n}\n",
         "Handler.handle", "method", (2, 2), "handle", "Handler.handle"),
    form("interface property", "src/iprop.ts", "interface Options {\n  maxAge: number;\n}\n",
         "Options.maxAge", "property", (2, 2), "maxAge", "Options.maxAge"),
    form("type literal member", "src/tmember.ts", "type Plugin = {\n  install(app: App): void;\n};\n",
         "Plugin.install", "method", (2, 2), "install", "Plugin.install"),
    form("private field arrow", "src/field.ts", "class Btn {\n  private onClick = (e: Event) => {\n    return e;\n"
         "  };\n}\n", "Btn.onClick", "method", (2, 4), "onClick", "Btn.onClick"),
    form("member assignment", "src/assign.ts", "app.use = function use(fn: Function) {\n  return fn;\n};\n",
         "app.use", "method", (1, 3), "use", "app.use"),
]

PYTHON = [
    form("function", "pkg/fn.py", "def area(r):\n    return r * r\n", "area", "function", (1, 2), "area"),
    form("async function", "pkg/fetch.py", "async def fetch(url):\n    return url\n", "fetch", "function", (1, 2),
         "fetch"),
    form("decorated method", "pkg/prop.py", "class Shape:\n    @property\n    def size(self):\n        return 1\n",
         "Shape.size", "method", (2, 4), "size", "Shape.size"),
    form("nested function", "pkg/nest.py", "def outer():\n    def inner():\n        return 1\n    return inner\n",
         "outer.inner", "function", (2, 3), "inner", "outer.inner"),
    form("lambda assignment", "pkg/lam.py", "square = lambda x: x * x\n", "square", "function", (1, 1), "square"),
    form("lambda class attribute", "pkg/lamc.py", "class K:\n    key = lambda self: 1\n", "K.key", "method", (2, 2),
         "key", "K.key"),
]

GO = [
    form("method", "calc/m.go", "package calc\n\nfunc (c *Calc) Add(a int) int {\n\treturn a\n}\n",
         "Calc.Add", "method", (3, 5), "Add", "Calc.Add"),
    form("generic receiver", "calc/g.go", "package calc\n\nfunc (s *Set[T]) Has(v T) bool {\n\treturn true\n}\n",
         "Set.Has", "method", (3, 5), "Has", "Set.Has"),
    form("interface method", "calc/i.go", "package calc\n\ntype Adder interface {\n\tSum(a int) int\n}\n",
         "Adder.Sum", "method", (4, 4), "Sum", "Adder.Sum"),
    form("type alias", "calc/a.go", "package calc\n\ntype Number = int64\n", "Number", "type", (3, 3), "Number"),
    form("grouped type", "calc/t.go", "package calc\n\ntype (\n\tPoint struct{}\n\tID int\n)\n",
         "Point", "struct", (4, 4), "Point"),
    form("function variable", "calc/v.go", "package calc\n\nvar handler = func(w int) {\n\t_ = w\n}\n",
         "handler", "function", (3, 5), "handler"),
]

RUST = [
    form("impl method", "src/a.rs", "impl Parser {\n    pub fn parse(&self) -> u8 {\n        1\n    }\n}\n",
         "Parser.parse", "method", (2, 4), "parse", "Parser.parse", "Parser::parse"),
    form("trait impl method", "src/b.rs", "impl<T> Display for Wrap<T> {\n    fn fmt(&self) {}\n}\n",
         "Wrap.fmt", "method", (2, 2), "fmt", "Wrap::fmt"),
    form("trait default method", "src/c.rs", "trait Visit {\n    fn visit(&self) {}\n}\n",
         "Visit.visit", "method", (2, 2), "visit", "Visit::visit"),
    form("macro_rules", "src/d.rs", "macro_rules! ensure {\n    () => {};\n}\n", "ensure", "macro", (1, 3), "ensure"),
]

JAVA = [
    form("nested class method", "src/O.java", "class Outer {\n  class Inner {\n    void run() {}\n  }\n}\n",
         "Outer.Inner.run", "method", (3, 3), "run", "Inner.run", "Outer.Inner.run"),
    form("interface default method", "src/I.java", "interface Shape {\n  default int area() { return 0; }\n}\n",
         "Shape.area", "method", (2, 2), "area", "Shape.area"),
    form("record compact constructor", "src/R.java", "record Range(int lo, int hi) {\n  Range {\n  }\n}\n",
         "Range.Range", "method", (2, 3), "Range.Range"),
    form("enum method", "src/E.java", "enum Level {\n  LOW;\n  int rank() { return 1; }\n}\n",
         "Level.rank", "method", (3, 3), "rank", "Level.rank"),
]

FORMS = JAVASCRIPT + TYPESCRIPT + PYTHON + GO + RUST + JAVA
IDS = [f"{f.path.rsplit('.', 1)[-1]}: {f.id}" for f in FORMS]
assert len({f.path for f in FORMS}) == len(FORMS), "one file per form"


@pytest.mark.parametrize("case", FORMS, ids=IDS)
def test_the_parser_sees_the_form_with_its_kind_and_lines(case: Form) -> None:
    parsed = parse_source(case.path, case.source)
    assert parsed.parser == "tree-sitter"
    seen = {(s.qualname, s.kind, (s.start_line, s.end_line)) for s in parsed.symbols}  # overloads share a qualname
    assert (case.qualname, case.kind, case.lines) in seen, seen


@pytest.mark.parametrize("case", FORMS, ids=IDS)
def test_the_skeleton_keeps_the_forms_signature(case: Form) -> None:
    parsed = parse_source(case.path, case.source)
    symbol = next(s for s in parsed.symbols if s.qualname == case.qualname)
    head = next(line for line in case.source.splitlines()[symbol.start_line - 1:symbol.end_line]
                if symbol.name in line)
    assert head in skeleton(case.path, case.source, parsed).splitlines()


def test_functions_handed_to_a_call_are_arguments_not_definitions() -> None:
    source = textwrap.dedent("""\
        res.format({
          html: function () {
            return 1;
          },
        });
        app.get('/', function (req, res) {});
        """)
    assert [s.qualname for s in parse_source("lib/format.js", source).symbols] == []


@pytest.fixture(scope="module")
def looking(tmp_path_factory: pytest.TempPathFactory) -> Looking:
    repo = python_repo(tmp_path_factory.mktemp("forms"), {f.path: f.source for f in FORMS})
    settings = load_settings(repo, embed_budget=0)
    indexer = build_indexer(settings)
    return Looking(RepoView(repo, exclude=[settings.index_path, settings.state_path]),
                   lambda focus: indexer.update(exclude=[settings.state_path])[0])


@pytest.mark.parametrize("case", FORMS, ids=IDS)
def test_symbol_finds_the_form_under_every_name_a_user_types(looking: Looking, case: Form) -> None:
    for typed in case.typed:
        found = looking.symbol({"name": typed}).text
        definitions = found.split("References:")[0]
        assert f"{case.path}:{case.lines[0]}:" in definitions, (typed, found)


def test_a_qualified_name_of_another_owner_finds_no_definition(looking: Looking) -> None:
    assert "(none in the index)" in looking.symbol({"name": "Layer.redirect"}).text
    assert "lib/router.js" not in looking.symbol({"name": "Other.route"}).text.split("References:")[0]


def _response_js() -> str:
    """express's lib/response.js in miniature: a CommonJS module of `res.x = function x(...)` members, too big to go
    into a small context whole."""
    helpers = "".join(textwrap.dedent(f"""\

        /**
         * Send {name} to the client, with its headers.
         */
        res.{name} = function {name}(body, options) {{
          var opts = options || {{}};
          var chunk = typeof body === 'string' ? body : JSON.stringify(body);
          this.set('X-{name}', String(chunk.length));
          if (opts.cache === false) {{
            this.set('Cache-Control', 'no-store');
          }}
          return this.end(chunk, opts.encoding || 'utf8');
        }};
        """) for name in [f"sendPart{n}" for n in range(40)])
    redirect = textwrap.dedent("""\

        /**
         * Redirect to the given `url` with optional response `status` defaulting to 302.
         */
        res.redirect = function redirect(url) {
          var address = url;
          var status = 302;
          address = this.location(address).get('Location');
          this.statusCode = status;
          this.set('Content-Length', Buffer.byteLength(address));
          this.end('Redirecting to ' + encodeURI(address));
        };
        """)
    head = "'use strict';\n\nvar http = require('http');\nvar res = Object.create(http.ServerResponse.prototype);\n" \
           "module.exports = res;\n"
    return head + helpers[:len(helpers) // 2] + redirect + helpers[len(helpers) // 2:]


def test_the_context_for_a_task_naming_res_redirect_shows_its_body(tmp_path: Path) -> None:
    examples = {f"examples/{name}/index.js": textwrap.dedent(f"""\
        var express = require('../../');
        var app = module.exports = express();
        app.get('/{name}', function (req, res) {{
          res.redirect('/login');  // redirect to the login page, the Location header says where
        }});
        """) for name in ("auth", "route-map", "session", "cookies")}
    repo = python_repo(tmp_path, {"lib/response.js": _response_js(), **examples, "index.js": "module.exports = "
                                  "require('./lib/express');\n", "lib/express.js": "exports = module.exports = "
                                  "function createApplication() {\n  return {};\n};\n",
                                  "package.json": '{"name": "express", "main": "index.js"}\n'})
    done = run_cli(["context", "--repo", str(repo), "--context-tokens", "3000",
                    "how does res.redirect build the Location header"], api_key=None)
    assert done.returncode == 0, done.stderr
    shown = done.stdout
    assert "### lib/response.js (excerpt)" in shown  # too big to go whole in this small budget: its named member
    assert "address = this.location(address).get('Location');" in shown  # the body, not a skeleton without it
    assert "this.set('Content-Length', Buffer.byteLength(address));" in shown


def test_the_map_names_a_commonjs_files_members_the_task_names_first(tmp_path: Path) -> None:
    index = indexed_tree(tmp_path, {"lib/response.js": _response_js()})
    line = file_map(index, ["lib/response.js"], lambda path: {"res.redirect"}, 2000).text.splitlines()[-1]
    assert line.startswith("lib/response.js: res.redirect, res.sendPart0, res.sendPart1")
