"""File ranking and context fitting on small repositories, indexed for real with the local embedder."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from code_assistant import tokens
from code_assistant.index.indexer import RepoIndex
from code_assistant.retrieve import context as context_module
from code_assistant.retrieve import file_map, forms
from code_assistant.retrieve.context import build_context
from code_assistant.retrieve.ranking import rank
from tests.repos import indexed_tree

ROOT = Path(__file__).resolve().parent.parent


def _filler(name: str, n: int) -> str:
    return "".join(f"def {name}_{i}(value):\n    total = value * {i} + {i}\n    return total - {i}\n\n\n" for i in range(n))


FILES = {
    "shop/__init__.py": "",
    "shop/cart.py": "from shop.pricing import price_of\n\n\nclass ShoppingCart:\n    def __init__(self):\n"
                    "        self.items = []\n\n    def total(self):\n        return sum(price_of(i) for i in self.items)\n",
    "shop/pricing.py": "from shop.discounts import apply_discount\n\n\ndef price_of(item):\n"
                       "    return apply_discount(item['price'], item.get('code'))\n",
    "shop/discounts.py": "def apply_discount(price, code):\n    if code == 'HALF':\n        return price / 2\n"
                         "    return price\n",
    "shop/reports.py": "class SalesReport:\n    def render(self, rows):\n        return '\\n'.join(map(str, rows))\n",
    "shop/big.py": "class Warehouse:\n    def restock(self, n):\n        return n\n\n\n" + _filler("stock", 400),
    "tests/test_cart.py": "from shop.cart import ShoppingCart\n\n\ndef test_total_of_cart_with_discount():\n"
                          "    cart = ShoppingCart()\n    assert cart.total() == 0\n",
    "docs/usage.md": "# Shop\nThe ShoppingCart adds up prices after discounts.\n",
}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> RepoIndex:
    return indexed_tree(tmp_path_factory.mktemp("ctx"), FILES)


def _ranked(index: RepoIndex, task: str) -> list[str]:
    return [r.path for r in rank(index, task).files]


def test_traceback_frame_ranks_its_file_first(index: RepoIndex) -> None:
    task = ("Checkout crashes:\nTraceback (most recent call last):\n"
            f'  File "{index.repo}/shop/cart.py", line 9, in total\n'
            '  File "shop/discounts.py", line 2, in apply_discount\nTypeError: unsupported operand\n')
    assert _ranked(index, task)[0] == "shop/discounts.py"


def test_class_named_in_task_ranks_its_defining_file_first(index: RepoIndex) -> None:
    assert _ranked(index, "SalesReport prints the rows in the wrong order")[0] == "shop/reports.py"
    assert _ranked(index, "The total of a ShoppingCart is wrong")[0] == "shop/cart.py"


def test_tests_rank_below_code_unless_the_task_asks_for_tests(index: RepoIndex) -> None:
    plain = _ranked(index, "The total of a ShoppingCart with a discount is wrong")
    assert plain.index("shop/cart.py") < plain.index("tests/test_cart.py")
    failing = _ranked(index, "The pytest test test_total_of_cart_with_discount fails")  # the fix goes to the code
    assert failing[0] == "shop/cart.py" and failing.index("shop/cart.py") < failing.index("tests/test_cart.py")
    about_tests = _ranked(index, "Add a test for the cart total with a discount, next to "
                                 "test_total_of_cart_with_discount")
    assert about_tests[0] == "tests/test_cart.py"


def test_docs_rank_below_the_code_they_describe(index: RepoIndex) -> None:
    ranked = _ranked(index, "ShoppingCart adds up prices after discounts incorrectly")
    assert ranked[0] == "shop/cart.py"
    assert "docs/usage.md" not in ranked or ranked.index("shop/cart.py") < ranked.index("docs/usage.md")


def test_import_graph_neighbour_is_in_the_ranking_and_the_context(index: RepoIndex) -> None:
    ranking = rank(index, "`price_of` returns the wrong amount").files
    assert ranking[0].path == "shop/pricing.py"
    discounts = next(r for r in ranking if r.path == "shop/discounts.py")
    assert any("imports/imported by shop/pricing.py" in reason for reason in discounts.reasons)
    context = build_context(index, "`price_of` returns the wrong amount", 3000)
    assert {"shop/pricing.py", "shop/discounts.py"} <= set(context.paths)


def test_big_file_becomes_a_skeleton_or_excerpt_keeping_the_named_definition_and_budget_holds(
        index: RepoIndex) -> None:
    assert tokens.count_tokens((index.repo / "shop/big.py").read_text()) > 3000
    context = build_context(index, "Warehouse.restock ignores the `restock` count of a ShoppingCart with discounts",
                            3000)
    big = next(f for f in context.files if f.path == "shop/big.py")
    assert big.mode in ("skeleton", "excerpt") and "return n" in big.text
    assert context.tokens <= 3000
    assert context.tokens == sum(tokens.count_tokens(f.text) for f in context.files) + (
        tokens.count_tokens(context.map_text) if context.map_text else 0)
    assert len(context.files) >= 3  # the big file does not crowd out the others


def test_a_big_file_whose_skeleton_does_not_fit_shows_the_named_definition_whole_in_an_excerpt(
        index: RepoIndex) -> None:
    context = build_context(index, "Warehouse.restock ignores the count it is given", 1000)
    big = next(f for f in context.files if f.path == "shop/big.py")
    assert big.mode == "excerpt"
    assert "class Warehouse:\n    def restock(self, n):\n        return n\n" in big.text
    assert "def stock_1(" not in big.text and context.tokens <= 1000


def test_a_small_budget_seats_fewer_files_so_an_unrelated_outline_does_not_take_it(index: RepoIndex) -> None:
    """A seat for every SEAT_TOKENS of the budget: in 2,900 tokens a ShoppingCart task gave the outline of shop/big.py
    (400 definitions, 1,272 tokens) a seat beside the four files it is about; with the toml package's six seats of
    outlines at a 1,000-token budget, the file the task was about could not grow past its own outline."""
    context = build_context(index, "ShoppingCart total with discount codes", 2900)
    assert "shop/big.py" not in context.paths and "shop/big.py" in context.map
    assert {"shop/cart.py", "shop/pricing.py", "shop/discounts.py"} <= set(context.paths)
    assert all(f.mode == "full" for f in context.files)
    assert "2 core files: a seat for every 1250 tokens of the budget" in context.budget_log


def test_under_a_small_budget_an_excerpt_is_not_traded_for_a_skeleton(tmp_path: Path) -> None:
    """parse 1.12's parse.py (1,300 lines) in 2,500 tokens: a skeleton of its hundred headers (1,791 tokens) in place
    of the excerpt of the two functions the task names (678); a small model copied the headers."""
    module = "".join(f"def helper_{i}(value):\n    \"\"\"Helper {i}.\"\"\"\n    total = value * 3 + {i}\n"
                     f"    return total - {i} // 2\n\n\n" for i in range(120))
    index = indexed_tree(tmp_path, {"lib/parse.py": module + "def compile(fmt):\n    return fmt.lower()\n"})
    context = build_context(index, "compile() ignores case", 2500)
    assert [(f.path, f.mode) for f in context.files] == [("lib/parse.py", "excerpt")]
    assert "def compile(fmt):\n    return fmt.lower()" in context.files[0].text
    roomy = build_context(index, "compile() ignores case", 3500)
    assert [(f.path, f.mode) for f in roomy.files] == [("lib/parse.py", "skeleton")]


@pytest.mark.parametrize("budget", [300, 800, 2000, 12000])
def test_context_never_exceeds_the_budget(index: RepoIndex, budget: int) -> None:
    context = build_context(index, "ShoppingCart total with discount codes", budget)
    assert context.tokens <= budget
    on_map = tokens.count_tokens(context.map_text) if context.map_text else 0
    assert sum(f.tokens for f in context.files) + on_map == context.tokens


def test_ranked_files_that_do_not_fit_are_on_the_map_a_line_each_in_rank_order(index: RepoIndex) -> None:
    context = build_context(index, "ShoppingCart total with discount codes", 1000)
    ranked = [r.path for r in context.ranking]
    assert context.map == ["shop/big.py"], "the one ranked file no form of which fits is on the map"
    assert context.map == [p for p in ranked if p not in context.paths][:len(context.map)]
    assert context.map_text.splitlines() == [file_map.MAP_HEADER,
                                             "shop/big.py: Warehouse, stock_0, stock_1, stock_2, stock_3, stock_4, …"]
    assert context.render().endswith(context.map_text) and context.tokens <= 1000


def test_the_map_lists_the_names_the_task_uses_first(index: RepoIndex) -> None:
    named = file_map.file_map(index, ["shop/big.py"], lambda path: {"stock_399", "stock_7"}, 200)
    line = next(line for line in named.text.splitlines() if line.startswith("shop/big.py: "))
    assert line.startswith("shop/big.py: stock_7, stock_399, Warehouse") or line.startswith(
        "shop/big.py: stock_399, stock_7, Warehouse"), line


def test_path_list_groups_paths_by_directory_in_the_order_of_each_directorys_first_path() -> None:
    paths = ["sympy/core/mul.py", "setup.py", "sympy/polys/rings.py", "sympy/core/mod.py", "conftest.py"]
    assert file_map.path_list(paths) == ["sympy/core/: mul.py, mod.py", "./: setup.py, conftest.py",
                                               "sympy/polys/: rings.py"]
    assert file_map.path_list([]) == []


def test_ranked_files_after_the_maps_lines_are_listed_by_path(index: RepoIndex,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(file_map, "MAP_FILES", 0)  # no lines: the map goes straight to its paths
    context = build_context(index, "ShoppingCart total with discount codes", 1000)
    assert context.map == [] and context.listed == ["shop/big.py"]
    assert context.map_text.splitlines() == [file_map.LIST_HEADER, "shop/: big.py"]
    assert context.render().endswith(context.map_text) and context.tokens <= 1000


def test_the_paths_listed_are_the_longest_prefix_that_fits_the_room() -> None:
    paths = [f"pkg/sub{i % 7}/module_{i}.py" for i in range(120)]

    def cost(listed: list[str]) -> int:
        return tokens.count_tokens("\n".join([file_map.LIST_HEADER, *file_map.path_list(listed)]))

    previous = 0
    for room in range(0, 900, 37):
        fitted = file_map.fit_paths(paths, room)
        assert fitted == paths[:len(fitted)] and len(fitted) >= previous
        assert not fitted or cost(fitted) <= room
        if len(fitted) < len(paths):  # one more would not have fitted
            assert cost(paths[:len(fitted) + 1]) > room - 2
        previous = len(fitted)
    assert previous > 60, "a path costs a few tokens"


def test_a_repository_of_a_few_files_keeps_nearly_all_the_budget_for_code(index: RepoIndex) -> None:
    context = build_context(index, "ShoppingCart total with discount codes", 12000)
    kept = re.search(r"\((\d+) kept for the map of more files\)", context.budget_log[0])
    assert kept, context.budget_log[0]
    assert 0 < int(kept.group(1)) < 0.02 * 12000 < context_module.MAP_SHARE * 12000, "a few lines, not the share"


def test_no_map_below_its_minimum_budget(index: RepoIndex) -> None:
    context = build_context(index, "ShoppingCart total with discount codes", context_module.MAP_MIN_BUDGET - 1)
    assert context.map == [] and context.listed == [] and context.map_text == ""
    assert "More files" not in context.render() and "Further down" not in context.render()


def _cli(index: RepoIndex, index_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "main.py"), "--repo", str(index.repo), "--task",
                           "SalesReport render is wrong", "--context-only", "--index-path", str(index_path), *extra],
                          check=False, capture_output=True, text=True, timeout=300)


def test_cli_context_only_json_and_verbose_budget_log(index: RepoIndex, tmp_path: Path) -> None:
    proc = _cli(index, tmp_path / "idx", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["files"][0] == "shop/reports.py"
    assert "shop/reports.py" in out["context_files"] and out["tokens"] <= 12000
    mapped = out["map_files"] + out["listed_files"]
    assert mapped == [p for p in out["files"] if p not in out["context_files"]][:len(mapped)]

    verbose = _cli(index, tmp_path / "idx", "-v")
    assert verbose.returncode == 0, verbose.stderr
    assert "budget 12000 tokens" in verbose.stdout
    assert any(line.strip().startswith("+ shop/reports.py (") and "/12000" in line for line in verbose.stdout.splitlines())


LANGUAGE_REPOS = {
    "javascript": ({"src/cart.js": "const { priceOf } = require('./pricing');\n\nclass ShoppingCart {\n"
                                   "  total(items) { return items.reduce((s, i) => s + priceOf(i), 0); }\n}\n"
                                   "module.exports = { ShoppingCart };\n",
                    "src/pricing.js": "function priceOf(item) {\n  return item.price;\n}\nmodule.exports = { priceOf };\n",
                    "src/report.js": "function renderReport(rows) {\n  return rows.join('\\n');\n}\n"},
                   "src/pricing.js", "src/cart.js"),
    "typescript": ({"src/cart.ts": "import { priceOf } from './pricing';\n\nexport class ShoppingCart {\n"
                                   "  total(items: Item[]): number { return items.map(priceOf).length; }\n}\n",
                    "src/pricing.ts": "export function priceOf(item: Item): number {\n  return item.price;\n}\n",
                    "src/report.ts": "export function renderReport(rows: string[]): string {\n  return rows.join('');\n}\n"},
                   "src/pricing.ts", "src/cart.ts"),
    "go": ({"go.mod": "module example.com/shop\n\ngo 1.19\n",
            "cart/cart.go": "package cart\n\nimport \"example.com/shop/pricing\"\n\ntype ShoppingCart struct{}\n\n"
                            "func (c ShoppingCart) Total(p int) int {\n\treturn pricing.PriceOf(p)\n}\n",
            "pricing/pricing.go": "package pricing\n\nfunc PriceOf(p int) int {\n\treturn p\n}\n",
            "report/report.go": "package report\n\nfunc RenderReport(rows []string) int {\n\treturn len(rows)\n}\n"},
           "pricing/pricing.go", "cart/cart.go"),
    "java": ({"src/main/java/com/shop/Cart.java": "package com.shop;\n\nimport com.shop.pricing.Pricing;\n\n"
                                                  "public class Cart {\n  int total(int p) { return Pricing.priceOf(p); }\n}\n",
              "src/main/java/com/shop/pricing/Pricing.java": "package com.shop.pricing;\n\npublic class Pricing {\n"
                                                             "  public static int priceOf(int p) { return p; }\n}\n",
              "src/main/java/com/shop/Report.java": "package com.shop;\n\npublic class Report {\n"
                                                    "  String renderReport() { return \"\"; }\n}\n"},
             "src/main/java/com/shop/pricing/Pricing.java", "src/main/java/com/shop/Cart.java"),
    "rust": ({"Cargo.toml": "[package]\nname = \"shop\"\nversion = \"0.1.0\"\n",
              "src/lib.rs": "pub mod cart;\npub mod pricing;\npub mod report;\n",
              "src/cart.rs": "use crate::pricing::price_of;\n\npub struct ShoppingCart;\n\nimpl ShoppingCart {\n"
                             "    pub fn total(&self, p: i32) -> i32 { price_of(p) }\n}\n",
              "src/pricing.rs": "pub fn price_of(p: i32) -> i32 {\n    p\n}\n",
              "src/report.rs": "pub fn render_report(rows: &[String]) -> usize {\n    rows.len()\n}\n"},
             "src/pricing.rs", "src/cart.rs"),
}


@pytest.mark.parametrize("language", sorted(LANGUAGE_REPOS))
def test_each_language_ranks_the_defining_file_first_and_follows_imports(tmp_path: Path, language: str) -> None:
    files, defining, importer = LANGUAGE_REPOS[language]
    index = indexed_tree(tmp_path, files)
    assert importer in index.graph and defining in index.graph[importer], index.graph
    name = {"go": "PriceOf", "rust": "price_of", "java": "priceOf"}.get(language, "priceOf")
    ranked = _ranked(index, f"`{name}` returns the wrong price for discounted items")
    assert ranked[0] == defining
    assert importer in ranked[:3]


@pytest.mark.parametrize("room", [50, 300, 1200, 5000, 100_000])
@pytest.mark.parametrize("keep", [set(), {"Warehouse.restock", "price_of"}])
def test_later_passes_build_only_forms_that_can_fit_and_pick_the_same_one(index: RepoIndex, room: int,
                                                                          keep: set[str]) -> None:
    for path in index.files:
        text = (index.repo / path).read_text()
        every = forms.file_forms(path, text, keep, False, index)
        best = next((f for f in every if f.mode != "outline" and f.tokens <= room), None)
        assert forms.fitting_form(path, text, keep, False, index, room) == best, (path, room)


def test_with_tests_puts_the_top_source_files_test_right_after_it() -> None:
    files = {"shop/cart.py", "shop/pricing.py", "tests/test_cart.py", "tests/test_pricing.py", "README.md"}
    order = ["shop/cart.py", "shop/pricing.py", "README.md"]
    assert context_module.with_test_counterpart(order, files) == ["shop/cart.py", "tests/test_cart.py",
                                                                  "shop/pricing.py", "README.md"]
    ranked_low = [*order, "x1", "x2", "x3", "x4", "tests/test_cart.py"]
    assert context_module.with_test_counterpart(ranked_low, files)[:2] == ["shop/cart.py", "tests/test_cart.py"]
    already = ["shop/cart.py", "tests/test_cart.py", "shop/pricing.py"]
    assert context_module.with_test_counterpart(already, files) == already
    assert context_module.with_test_counterpart(["README.md"], files) == ["README.md"], "no source file, no test"


def test_a_reproduction_request_shows_how_the_project_writes_its_tests(index: RepoIndex) -> None:
    task = "ShoppingCart.total should round the sum to whole cents"
    context = build_context(index, task, 4000, with_tests=True)
    assert context.paths[0] == "shop/cart.py" and "tests/test_cart.py" in context.paths


PAIRED = {  # eight modules, so that the tests rank below the six core files
    **{f"shop/mod{i}.py": f"def cart_total_{i}(cart):\n    return cart.total([{i}])\n" for i in range(6)},
    "shop/cart.py": "class ShoppingCart:\n    def total(self, prices):\n        return sum(prices)\n",
    "shop/pricing.py": "def price_of(cart, item):\n    return cart.total([item['price']])\n",
    "tests/test_cart.py": "from shop.cart import ShoppingCart\n\n\n" + "".join(
        f"def test_total_{i}():\n    assert ShoppingCart().total([{i}]) == {i}\n\n\n" for i in range(40)),
}


@pytest.fixture(scope="module")
def paired(tmp_path_factory: pytest.TempPathFactory) -> RepoIndex:
    return indexed_tree(tmp_path_factory.mktemp("paired"), PAIRED)


def test_the_tests_of_the_top_source_files_are_shown_beside_them(paired: RepoIndex) -> None:
    context = build_context(paired, "ShoppingCart total is wrong", 12000, embed_budget=0)
    assert context.paths[0] == "shop/cart.py" and "tests/test_cart.py" not in [r.path for r in context.ranking[:6]]
    assert context.tests == {"shop/cart.py": "tests/test_cart.py"}
    assert context.paths[1] == "tests/test_cart.py"
    assert any(line.startswith("+ tests/test_cart.py (full") and "the test of shop/cart.py" in line
               for line in context.budget_log)
    alone = build_context(paired, "ShoppingCart total is wrong", 12000, embed_budget=0, tests_paired=False)
    assert alone.tests == {} and "tests/test_cart.py" not in alone.paths[:7]


def test_a_paired_test_too_big_to_show_whole_is_shown_as_a_skeleton_outline_or_head(paired: RepoIndex,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    task = "ShoppingCart total is wrong"
    whole = next(f for f in build_context(paired, task, 12000, embed_budget=0).files if f.path == "tests/test_cart.py")
    monkeypatch.setattr(context_module, "PAIR_MAX_TOKENS", whole.tokens - 1)
    shown = next(f for f in build_context(paired, task, 12000, embed_budget=0).files
                 if f.path == "tests/test_cart.py")
    assert shown.mode in ("skeleton", "outline") and shown.tokens < whole.tokens
    monkeypatch.setattr(context_module, "PAIR_MAX_TOKENS", 60)  # less than its outline: its first lines
    head = next(f for f in build_context(paired, task, 12000, embed_budget=0).files if f.path == "tests/test_cart.py")
    assert head.mode == "head" and head.tokens <= 60
    assert "from shop.cart import ShoppingCart" in head.text and re.search(r"⋮ \(\d+ more lines\)", head.text)
    monkeypatch.setattr(context_module, "PAIR_MAX_TOKENS", 5)
    context = build_context(paired, task, 12000, embed_budget=0)
    assert context.tests == {} and "tests/test_cart.py" not in context.paths[:7]
    assert any(line.startswith("skip tests/test_cart.py (the test of shop/cart.py)") for line in context.budget_log)


def test_pairs_follow_each_languages_convention_skip_tests_already_core_and_stop_at_three() -> None:
    files = {"pkg/flags.go", "pkg/flags_test.go", "pkg/args.go", "pkg/args_test.go", "src/router.js",
             "test/router.test.js", "lib/view.py", "tests/test_view.py", "lib/util.py", "tests/test_util.py",
             "README.md"}
    order = ["pkg/flags.go", "README.md", "src/router.js", "lib/view.py", "lib/util.py", "pkg/args.go"]
    assert context_module.test_pairs(order, files) == {"pkg/flags.go": "pkg/flags_test.go",
                                                       "src/router.js": "test/router.test.js",
                                                       "lib/view.py": "tests/test_view.py"}
    core_test = ["pkg/flags.go", "pkg/flags_test.go", "lib/view.py"]
    assert context_module.test_pairs(core_test, files) == {"lib/view.py": "tests/test_view.py"}
    assert context_module.with_pairs(["a.py", "b.py", "tests/test_a.py"], {"a.py": "tests/test_a.py"}) == [
        "a.py", "tests/test_a.py", "b.py"]


def test_close_scores_after_the_first_widen_the_seats_up_to_ten(monkeypatch: pytest.MonkeyPatch) -> None:
    from code_assistant.retrieve.ranking import RankedFile

    monkeypatch.setattr(context_module, "CLOSE", 1.0)

    def ranking(*scores: float) -> list[RankedFile]:
        return [RankedFile(f"f{i}.py", s) for i, s in enumerate(scores)]

    assert context_module.core_count(ranking(9, 5, 4, 3, 2, 1, 0, -1, -2)) == 6, "clear steps: the usual six"
    assert context_module.core_count(ranking(9, 5, 4.8, 4.6, 4.4, 4.2, 4.1, 4.0, 3, 2)) == 8
    assert context_module.core_count(ranking(*([5.0] * 14))) == 10, "never more than CORE_MAX"
    assert context_module.core_count(ranking(5, 4)) == 6


def test_a_core_file_without_definitions_too_big_to_show_whole_shows_its_head(tmp_path: Path) -> None:
    files = {"src/macros.rs": "".join(f"pub const EMIT_{i}: &str = \"emit {i} once: {{}} and {{}}\";\n"
                                      for i in range(400)),  # constants: no definitions (macro_rules! are)
             "src/lib.rs": "mod macros;\npub fn emit_all() {}\n"}
    index = indexed_tree(tmp_path, files)
    context = build_context(index, "the EMIT_7 format in macros.rs prints twice", 3000, embed_budget=0)
    shown = next(f for f in context.files if f.path == "src/macros.rs")
    assert shown.mode == "head" and "pub const EMIT_0" in shown.text and shown.tokens <= 3000


def test_a_paired_test_lives_where_the_language_keeps_the_files_tests() -> None:
    from code_assistant.retrieve.counterparts import nearest_test

    files = {"pkg/chart/common.go", "pkg/chart/chart_test.go", "pkg/chart/load_test.go", "pkg/release/common_test.go",
             "pkg/engine/files.go", "pkg/engine/files_test.go", "pkg/lone/lone.go",
             "packages/a/src/utils.ts", "packages/b/test/utils.test.ts", "packages/c/src/parse.ts",
             "packages/c/test/parse.test.ts", "src/flask/config.py", "tests/test_config.py"}
    assert nearest_test("pkg/engine/files.go", files) == "pkg/engine/files_test.go"
    assert nearest_test("pkg/chart/common.go", files) == "pkg/chart/chart_test.go", "a package mate, not another package"
    assert nearest_test("pkg/lone/lone.go", files) is None
    assert nearest_test("packages/a/src/utils.ts", files) is None, "another workspace's utils is not its test"
    assert nearest_test("packages/c/src/parse.ts", files) == "packages/c/test/parse.test.ts"
    assert nearest_test("src/flask/config.py", files) == "tests/test_config.py"


def test_in_a_budget_too_small_for_a_map_a_core_file_too_long_to_outline_shows_its_first_definitions(
        index: RepoIndex) -> None:
    """Issue 61: in a small window (a budget under the map's minimum), a ranked file whose outline alone is longer than
    what is left was skipped, leaving most of the budget unused (226 tokens of a 2,048-token window). It is shown by
    the outline of as many of its first definitions as fit, saying how many more there are."""
    context = build_context(index, "the warehouse restocks the wrong stock levels", 600)
    assert context.map == [] and context.tokens <= 600
    big = next(f for f in context.files if f.path == "shop/big.py")
    assert big.mode == "outline" and "more definitions)" in big.text and "class Warehouse" in big.text
    assert context.tokens > 600 // 2, "the budget is used, not left"
