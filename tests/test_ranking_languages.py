"""Ranking beyond Python, on small repositories of each language built here: a Go package with two files and a
test, a JavaScript monorepo with two workspaces and a barrel, a Rust crate with mod.rs. The obvious file for a task
ranks first with the shipped weights, and no file BM25 ranks in its top 20 is dropped from the candidates."""
from __future__ import annotations

from pathlib import Path

import pytest

from code_assistant.index.indexer import RepoIndex
from code_assistant.index.lexical import tokenize
from code_assistant.retrieve import signals
from code_assistant.retrieve.mentions import kind_of
from code_assistant.retrieve.ranking import code_before_its_tests, rank
from tests.repos import indexed_tree

GO_PACKAGE = {
    "go.mod": "module example.com/shop\n\ngo 1.21\n",
    "cart/cart.go": "package cart\n\nimport \"errors\"\n\n// Cart holds the items of one order.\ntype Cart struct {\n"
                    "\titems map[string]int\n}\n\n"
                    "var ErrEmpty = errors.New(\"cart: cannot check out an empty cart\")\n\n"
                    "// Add puts n of an item in the cart.\nfunc (c *Cart) Add(sku string, n int) {\n"
                    "\tif c.items == nil {\n\t\tc.items = map[string]int{}\n\t}\n\tc.items[sku] += n\n}\n\n"
                    "// Checkout empties the cart.\nfunc (c *Cart) Checkout() error {\n\tif len(c.items) == 0 {\n"
                    "\t\treturn ErrEmpty\n\t}\n\tc.items = nil\n\treturn nil\n}\n",
    "cart/price.go": "package cart\n\n// Total is the price of the cart in cents.\nfunc (c *Cart) Total(prices "
                     "map[string]int) int {\n\ttotal := 0\n\tfor sku, n := range c.items {\n"
                     "\t\ttotal += prices[sku] * n\n\t}\n\treturn total\n}\n",
    "cart/cart_test.go": "package cart\n\nimport \"testing\"\n\nfunc TestCheckoutEmpty(t *testing.T) {\n"
                         "\tvar c Cart\n\tif err := c.Checkout(); err != ErrEmpty {\n\t\tt.Fatal(err)\n\t}\n}\n\n"
                         "func TestTotal(t *testing.T) {\n\tvar c Cart\n\tc.Add(\"a\", 2)\n"
                         "\tif c.Total(map[string]int{\"a\": 3}) != 6 {\n\t\tt.Fatal(\"total\")\n\t}\n}\n",
    "main.go": "package main\n\nimport \"example.com/shop/cart\"\n\nfunc main() {\n\tvar c cart.Cart\n"
               "\tc.Add(\"apple\", 1)\n\t_ = c.Checkout()\n}\n",
}

JS_MONOREPO = {
    "package.json": '{"name": "acme", "private": true, "workspaces": ["packages/*"]}\n',
    "packages/core/package.json": '{"name": "@acme/core", "main": "dist/index.js", "types": "dist/index.d.ts"}\n',
    "packages/core/src/index.ts": "export * from './duration'\nexport * from './format'\n",
    "packages/core/src/duration.ts": "const UNITS: Record<string, number> = { h: 3600, m: 60, s: 1 }\n\n"
                                     "export function parseDuration(text: string): number {\n"
                                     "  const match = /^(\\d+)([hms])$/.exec(text)\n"
                                     "  if (!match) throw new Error(`invalid duration: ${text}`)\n"
                                     "  return Number(match[1]) * UNITS[match[2]]\n}\n",
    "packages/core/src/format.ts": "export function formatSeconds(total: number): string {\n"
                                   "  const minutes = Math.floor(total / 60)\n"
                                   "  return `${minutes}m${total % 60}s`\n}\n",
    "packages/core/index.d.ts": "export declare function parseDuration(text: string): number\n"
                                "export declare function formatSeconds(total: number): string\n",
    "packages/cli/package.json": '{"name": "@acme/cli", "main": "src/main.ts"}\n',
    "packages/cli/src/main.ts": "import { parseDuration, formatSeconds } from '@acme/core'\n\n"
                                "export function run(argv: string[]): string {\n"
                                "  return formatSeconds(parseDuration(argv[0]))\n}\n",
    "packages/cli/webpack.config.js": "module.exports = { entry: './src/main.ts', mode: 'production' }\n",
    "packages/core/src/__tests__/duration.test.ts": "import { parseDuration } from '../duration'\n\n"
                                                    "test('hours', () => expect(parseDuration('2h')).toBe(7200))\n",
}

RUST_CRATE = {
    "Cargo.toml": "[package]\nname = \"netkit\"\nversion = \"0.1.0\"\n",
    "src/lib.rs": "pub mod net;\npub mod config;\n",
    "src/config.rs": "pub struct Config {\n    pub retries: u32,\n}\n\nimpl Default for Config {\n"
                     "    fn default() -> Self {\n        Config { retries: 3 }\n    }\n}\n",
    "src/net/mod.rs": "pub mod tcp;\npub mod udp;\n\npub use tcp::connect;\n",
    "src/net/tcp.rs": "use std::net::TcpStream;\n\npub fn connect(addr: &str) -> std::io::Result<TcpStream> {\n"
                      "    let (host, port) = addr.split_once(':').expect(\"address without a port\");\n"
                      "    TcpStream::connect((host, port.parse::<u16>().unwrap()))\n}\n",
    "src/net/udp.rs": "use std::net::UdpSocket;\n\npub fn bind(port: u16) -> std::io::Result<UdpSocket> {\n"
                      "    UdpSocket::bind((\"0.0.0.0\", port))\n}\n",
    "tests/connect.rs": "#[test]\nfn connects() {\n"
                        "    assert!(netkit::net::tcp::connect(\"localhost:1\").is_err());\n}\n",
}


def _index(tmp_path: Path, files: dict[str, str]) -> RepoIndex:
    return indexed_tree(tmp_path, files)


def _top(index: RepoIndex, task: str) -> str:
    return rank(index, task, embed_budget=0).files[0].path


@pytest.mark.parametrize(("task", "obvious"), [
    ("Checkout on an empty cart should return an error, but TestCheckoutEmpty fails:\n"
     "    --- FAIL: TestCheckoutEmpty\n    cart_test.go:7: <nil>", "cart/cart.go"),
    ("The cart Total is wrong when the same item is added twice", "cart/price.go"),
    ("Running the shop prints: cart: cannot check out an empty cart", "cart/cart.go"),
])
def test_go_package_the_obvious_file_ranks_first(tmp_path: Path, task: str, obvious: str) -> None:
    assert _top(_index(tmp_path, GO_PACKAGE), task) == obvious


@pytest.mark.parametrize(("task", "obvious"), [
    ("parseDuration from @acme/core throws `invalid duration: 1h30m` for compound durations",
     "packages/core/src/duration.ts"),
    ("formatSeconds pads nothing: 65 seconds come out as 1m5s instead of 1m05s", "packages/core/src/format.ts"),
])
def test_js_monorepo_the_obvious_file_ranks_first(tmp_path: Path, task: str, obvious: str) -> None:
    assert _top(_index(tmp_path, JS_MONOREPO), task) == obvious


def test_js_monorepo_a_workspace_import_reaches_the_package_source(tmp_path: Path) -> None:
    index = _index(tmp_path, JS_MONOREPO)
    assert "packages/core/src/index.ts" in index.graph["packages/cli/src/main.ts"]  # via package.json, not dist/
    assert set(index.graph["packages/core/src/index.ts"]) == {"packages/core/src/duration.ts",
                                                              "packages/core/src/format.ts"}


@pytest.mark.parametrize(("task", "obvious"), [
    ("`netkit::net::tcp::connect` panics with 'address without a port' for `localhost`", "src/net/tcp.rs"),
    ("bind should accept port 0 and let the OS choose a UDP port", "src/net/udp.rs"),
])
def test_rust_crate_the_obvious_file_ranks_first(tmp_path: Path, task: str, obvious: str) -> None:
    assert _top(_index(tmp_path, RUST_CRATE), task) == obvious


def test_no_file_bm25_ranks_in_its_top_20_is_dropped(tmp_path: Path) -> None:
    """A task asking for tests in a repository whose test files repeat its words: the code files BM25 ranks in its
    top 20 (among non-test files, as the localization bench's baseline) are all candidates and all ranked."""
    files = {f"tests/test_widget_{i}.py": "def test_widget_render_color_cache():\n    widget render color cache\n" * 3
             for i in range(120)}
    files |= {f"app/module_{i}.py": f"def helper_{i}():\n    return {i}\n" + "widget\n" * (i % 5)
              for i in range(130)}
    files |= {f"tools/render_{i}.py": "def run():\n    render color\n" for i in range(5)}
    index = _index(tmp_path, files)
    task = "Add tests for the widget render color cache, like test_widget_render_color_cache"
    scores = index.bm25(tokenize(task))
    source = sorted((p for p in scores if kind_of(p) != "test"), key=lambda p: (-scores[p], p))[:20]
    sig = signals.gather(index, task)
    assert sig.about_tests and len(source) == 20
    assert set(source) <= set(sig.files)
    assert set(source) <= {f.path for f in rank(index, task, embed_budget=0).files}


def test_a_test_the_task_points_at_ranks_right_after_the_code_it_exercises() -> None:
    ordered = [("cart/cart_test.go", 6.4), ("main.go", 6.0), ("cart/cart.go", 5.8), ("cart/price.go", 2.2)]
    assert code_before_its_tests(ordered, {"cart/cart_test.go": "cart/cart.go"}) == [
        ("main.go", 6.0), ("cart/cart.go", 5.8), ("cart/cart_test.go", 5.8), ("cart/price.go", 2.2)]


def test_a_test_already_below_its_code_or_without_it_in_the_ranking_stays_where_it_is() -> None:
    ordered = [("cart/cart.go", 5.8), ("cart/cart_test.go", 5.0), ("shop_test.go", 4.0)]
    assert code_before_its_tests(ordered, {"cart/cart_test.go": "cart/cart.go", "shop_test.go": "shop.go"}) == ordered
