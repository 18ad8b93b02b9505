"""The pure parts of the language-aware ranking: what a path is for, what a task names in each language's terms,
which messages it quotes and how a file's text holds one, and what a workspace's package.json declares."""
from __future__ import annotations

from code_assistant.index.import_graph import ModuleResolver, js_package
from code_assistant.parse.code_parser import Import
from code_assistant.retrieve import file_roles, phrases
from code_assistant.retrieve.mentions import rust_modules, spec_mentions


def test_an_entry_file_is_named_by_its_directory_or_its_crate() -> None:
    assert file_roles.module_stem("src/plugin/utc/index.js") == "utc"
    assert file_roles.module_stem("tracing-attributes/src/lib.rs") == "tracing_attributes"
    assert file_roles.module_stem("src/net/mod.rs") == "net"
    assert file_roles.module_stem("geo/__init__.py") == "geo"
    assert file_roles.module_stem("cmd/helm/main.go") == "helm"
    assert file_roles.module_stem("src/walk.rs") == "walk"
    assert file_roles.module_stem("main.py") == "main"  # a Python main is a module of its own name
    assert file_roles.is_entry("src/index.js") and file_roles.is_entry("src/lib.rs")
    assert not file_roles.is_entry("src/app.rs") and not file_roles.is_entry("index.md")


def test_declarations_configs_vendored_and_generated_files_are_told_apart() -> None:
    assert file_roles.is_declaration("types/plugin/utc.d.ts") and not file_roles.is_declaration("src/utc.ts")
    for config in ("webpack.config.js", "packages/app/electron-builder.config.js", ".eslintrc.js",
                   "karma.sauce.conf.js", "rollup.config.mjs", "build.rs", "setup.py", "Gruntfile.js"):
        assert file_roles.is_config(config), config
    assert not file_roles.is_config("src/config.ts") and not file_roles.is_config("src/configure.js")
    assert file_roles.is_vendored("requests/packages/urllib3/util.py")
    assert file_roles.is_vendored("vendor/github.com/pkg/errors/errors.go")
    assert not file_roles.is_vendored("packages/core/src/index.ts")  # a monorepo's workspaces
    assert file_roles.is_generated("api/service.pb.go") and file_roles.is_generated("src/__generated__/schema.ts")
    assert not file_roles.is_generated("src/generator.go")


def test_rust_module_paths_name_their_file() -> None:
    modules = rust_modules({"tracing-core/src/lib.rs", "tracing-core/src/dispatcher.rs", "src/net/mod.rs",
                            "src/net/tcp.rs"})
    assert modules["tracing_core::dispatcher"] == "tracing-core/src/dispatcher.rs"
    assert modules["crate::net::tcp"] == "src/net/tcp.rs" and modules["crate::net"] == "src/net/mod.rs"
    assert "tracing_core" not in modules  # a crate alone names no one file


def test_import_specifiers_name_files_and_go_import_paths_name_packages() -> None:
    files = {"src/plugin/utc/index.js", "src/index.js", "core/mapping/unmarshaler.go", "core/mapping/utils.go",
             "core/mapping/utils_test.go"}
    task = ("import utc from 'dayjs/plugin/utc'; go get github.com/zeromicro/go-zero/core/mapping; see "
            "https://github.com/zeromicro/go-zero/core/mapping for more")
    assert spec_mentions(task, files) == (["src/plugin/utc/index.js"], ["core/mapping"])
    assert spec_mentions("nothing/here at all", files) == ([], [])


def test_quoted_messages_are_the_quoted_strings_and_message_lines() -> None:
    task = ('Running it fails with "failed to parse config file: open /etc/x.yaml: no such file".\n'
            "```\n2024/01/01 ERROR unmarshal: field name is not set\nx := 1\n```\n"
            "panic: runtime error: index out of range [3] with length 3\n"
            'I said "hello there" and it is short.\n')
    found = phrases.quoted_messages(task)
    assert found[0][:5] == ("failed", "to", "parse", "config", "file")
    assert ("error", "unmarshal", "field", "name", "is", "not", "set") == found[1][3:]
    assert found[2][:3] == ("panic", "runtime", "error")
    assert len(found) == 3  # neither `x := 1` nor a two-word quote is a message


def test_a_literal_with_placeholders_still_holds_a_run_of_the_message() -> None:
    message = phrases.quoted_messages('"failed to parse config file: open /etc/x.yaml: no such file"')[0]
    code = phrases.trigrams(phrases.words('return fmt.Errorf("failed to parse config file: %w", err)'))
    assert phrases.longest_run(message, code) == 5
    prose = phrases.trigrams(phrases.words("it is not a file to parse"))
    assert phrases.longest_run(message, prose) == 0


def test_a_workspace_package_resolves_by_name_to_its_source_not_its_build_output() -> None:
    core = js_package("packages/core/package.json",
                      '{"name": "@acme/core", "main": "dist/index.js", "exports": {".": {"import": "./dist/x.mjs"}}}')
    assert core == ("@acme/core", "packages/core", ["packages/core/dist/index.js", "packages/core/dist/x.mjs"])
    assert js_package("package.json", "not json") is None and js_package("package.json", '{"private": true}') is None
    resolver = ModuleResolver({"packages/core/src/index.ts", "packages/core/src/util/time.ts", "packages/cli/main.ts"},
                              js_packages=[core])
    assert resolver.resolve("packages/cli/main.ts", "typescript", Import("@acme/core", ())) == [
        "packages/core/src/index.ts"]
    assert resolver.resolve("packages/cli/main.ts", "typescript", Import("@acme/core/util/time", ())) == [
        "packages/core/src/util/time.ts"]
    assert resolver.resolve("packages/cli/main.ts", "typescript", Import("left-pad", ())) == []
