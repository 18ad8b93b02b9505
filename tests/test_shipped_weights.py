"""The fitted fusion as the package ships it: the weights load from the package's data (fusion_weights.json, written
by `python -m bench.fit_ranking --write`), cover their features, and rank a small repository's obvious file first."""
from __future__ import annotations

import math
from pathlib import Path

from code_assistant.index import embeddings, store
from code_assistant.index.indexer import Indexer
from code_assistant.retrieve import fusion
from code_assistant.retrieve.ranking import rank
from tests.repos import write_tree


def test_shipped_models_load_and_cover_their_features() -> None:
    for name, dense in (("fast", False), ("full", True)):
        model = fusion.shipped(name)
        assert set(model.names) <= set(fusion.NAMES)
        assert any(n.startswith("dense") for n in model.names) == dense
        assert len(model.weights) == len(model.means) == len(model.scales) == len(model.names)
        assert all(math.isfinite(v) for v in (*model.weights, *model.means, *model.scales))
        assert all(s > 0 for s in model.scales)


def test_shipped_models_rank_the_obvious_file_first(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", {
        "geo/__init__.py": "from geo.shapes import Polygon\nfrom geo.units import to_metres\n",
        "geo/shapes.py": "from geo.units import to_metres\n\n\nclass Polygon:\n    def area(self, points):\n"
                         "        return abs(sum(x * y for x, y in points)) / 2\n",
        "geo/units.py": "def to_metres(value, unit):\n    return value * {'km': 1000, 'm': 1}[unit]\n",
        "geo/render.py": "def render_svg(shape):\n    return '<svg/>'\n",
        "tests/test_shapes.py": "from geo.shapes import Polygon\n\n\ndef test_area():\n"
                                "    assert Polygon().area([(1, 1)]) == 0.5\n",
        "docs/index.md": "# geo\nPolygon area and units.\n",
    })
    embedder = embeddings.make_embedder("local")
    chunks = store.ChunkStore(store.open_client(tmp_path / "index"), store.collection_name(str(repo), embedder.name))
    index = Indexer(repo, tmp_path / "index", embedder, chunks).update()[0]
    top = [rank(index, task, embed_budget=0).files[0].path for task in (
        "`Polygon.area` returns a negative area for clockwise points",
        "to_metres raises KeyError for 'cm'",
        "Traceback (most recent call last):\n  File \"geo/render.py\", line 2, in render_svg\nValueError: bad shape",
    )]
    assert top == ["geo/shapes.py", "geo/units.py", "geo/render.py"]
