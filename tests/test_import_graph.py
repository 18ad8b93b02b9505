from __future__ import annotations

from pathlib import Path

from code_assistant.index.import_graph import ModuleResolver, go_module_path
from code_assistant.parse.code_parser import Import, parse_source


def make_repo(root: Path, files: dict[str, str]) -> list[str]:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def resolve_all(resolver: ModuleResolver, root: Path, path: str, language: str) -> list[str]:
    parsed = parse_source(path, (root / path).read_text())
    return sorted({f for imp in parsed.imports for f in resolver.resolve(path, language, imp)})


def test_python_absolute_relative_and_submodules(tmp_path: Path) -> None:
    files = make_repo(tmp_path, {
        "src/app/__init__.py": "",
        "src/app/core.py": "from . import util\nfrom .models import user\nfrom ..outside import x\n",
        "src/app/util.py": "",
        "src/app/models/__init__.py": "",
        "src/app/models/user.py": "",
        "src/app/models/order.py": "from ..util import helper\nfrom . import user\n",
        "main.py": "import app.core\nfrom app.models import user, order, NotAModule\nimport os\nimport helpers\n",
        "helpers.py": "",
        "libs/tool/tool/__init__.py": "",
        "libs/tool/tool/api.py": "",
        "scripts/run.py": "from tool import api\nimport sibling\n",
        "scripts/sibling.py": "",
    })
    resolver = ModuleResolver(files)
    assert resolve_all(resolver, tmp_path, "main.py", "python") == [
        "helpers.py", "src/app/core.py", "src/app/models/__init__.py", "src/app/models/order.py",
        "src/app/models/user.py"]
    assert resolve_all(resolver, tmp_path, "src/app/core.py", "python") == [
        "src/app/models/user.py", "src/app/util.py"]
    assert resolve_all(resolver, tmp_path, "src/app/models/order.py", "python") == [
        "src/app/models/user.py", "src/app/util.py"]
    assert resolve_all(resolver, tmp_path, "scripts/run.py", "python") == ["libs/tool/tool/api.py",
                                                                            "scripts/sibling.py"]


def test_python_from_package_import_name_points_at_package(tmp_path: Path) -> None:
    files = make_repo(tmp_path, {"pkg/__init__.py": "", "pkg/a.py": "", "use.py": "from pkg import thing\n"})
    assert ModuleResolver(files).resolve("use.py", "python", Import("pkg", ("thing",))) == ["pkg/__init__.py"]


def test_js_ts_relative_specifiers(tmp_path: Path) -> None:
    files = make_repo(tmp_path, {
        "web/src/app.ts": ("import {a} from './util';\nimport b from './lib';\nimport c from './esm.js';\n"
                           "import d from '../shared/types';\nimport React from 'react';\n"
                           "const e = require('./legacy');\nexport * from './comp';\nconst f = import('./lazy');\n"),
        "web/src/util.ts": "", "web/src/lib/index.ts": "", "web/src/esm.ts": "", "web/shared/types.d.ts": "",
        "web/src/legacy.cjs": "", "web/src/comp.tsx": "", "web/src/lazy.jsx": "",
    })
    assert resolve_all(ModuleResolver(files), tmp_path, "web/src/app.ts", "typescript") == [
        "web/shared/types.d.ts", "web/src/comp.tsx", "web/src/esm.ts", "web/src/lazy.jsx", "web/src/legacy.cjs",
        "web/src/lib/index.ts", "web/src/util.ts"]


def test_go_packages_via_go_mod(tmp_path: Path) -> None:
    files = make_repo(tmp_path, {
        "go.mod": "module example.com/demo\n\ngo 1.22\n",
        "cmd/main.go": 'package main\n\nimport (\n\t"fmt"\n\t"example.com/demo/calc"\n)\n',
        "calc/calc.go": "package calc\n", "calc/util.go": "package calc\n", "calc/calc_test.go": "package calc\n",
    })
    module = go_module_path((tmp_path / "go.mod").read_text())
    assert module == "example.com/demo"
    resolver = ModuleResolver(files, go_module=module)
    assert resolve_all(resolver, tmp_path, "cmd/main.go", "go") == ["calc/calc.go", "calc/util.go"]


def test_java_classes_wildcards_and_static(tmp_path: Path) -> None:
    files = make_repo(tmp_path, {
        "src/main/java/com/acme/App.java": ("package com.acme;\nimport com.acme.model.User;\n"
                                            "import com.acme.util.*;\nimport static com.acme.text.Strings.join;\n"
                                            "import java.util.List;\nimport com.acme.model.User.Role;\n"),
        "src/main/java/com/acme/model/User.java": "", "src/main/java/com/acme/util/A.java": "",
        "src/main/java/com/acme/util/B.java": "", "src/main/java/com/acme/text/Strings.java": "",
    })
    assert resolve_all(ModuleResolver(files), tmp_path, "src/main/java/com/acme/App.java", "java") == [
        "src/main/java/com/acme/model/User.java", "src/main/java/com/acme/text/Strings.java",
        "src/main/java/com/acme/util/A.java", "src/main/java/com/acme/util/B.java"]


def test_rust_crate_paths_and_mod_declarations(tmp_path: Path) -> None:
    files = make_repo(tmp_path, {
        "src/lib.rs": "mod parser;\nmod net;\nuse crate::util::helpers::trim;\nuse std::io;\n",
        "src/parser.rs": "use super::net::Client;\nuse crate::util;\n", "src/net/mod.rs": "mod http;\n",
        "src/net/http.rs": "", "src/util.rs": "mod helpers;\n", "src/util/helpers.rs": "",
    })
    resolver = ModuleResolver(files)
    assert resolve_all(resolver, tmp_path, "src/lib.rs", "rust") == ["src/net/mod.rs", "src/parser.rs",
                                                                     "src/util/helpers.rs"]
    assert resolve_all(resolver, tmp_path, "src/parser.rs", "rust") == ["src/net/mod.rs", "src/util.rs"]
    assert resolve_all(resolver, tmp_path, "src/net/mod.rs", "rust") == ["src/net/http.rs"]
    assert resolve_all(resolver, tmp_path, "src/util.rs", "rust") == ["src/util/helpers.rs"]
