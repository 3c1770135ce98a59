"""docs/layout.md's generated part is the code's: the packages, their modules and imports as
``docs/make_layout_graph.py`` draws them now, and no import in it runs up the layers of pyproject.toml's contract (the
siblings of one layer, separated by ``:`` there, may import each other, as ``lint-imports`` allows)."""

from __future__ import annotations

import importlib.util
import re
import sys

import pytest

from tests.paths import REPO_ROOT as ROOT


@pytest.fixture(scope="module")
def layout():
    spec = importlib.util.spec_from_file_location("make_layout_graph", ROOT / "docs" / "make_layout_graph.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def graph(layout):
    return layout.import_graph()


def test_the_page_shows_the_code_as_it_is(layout):
    page = layout.PAGE.read_text(encoding="utf-8")
    assert layout.page_with(layout.render(), page) == page, (
        "docs/layout.md no longer matches the code: run python docs/make_layout_graph.py"
    )


def upward(edges: dict[str, set[str]], layers: list[list[str]]) -> list[tuple[str, str]]:
    """The imports (package, package it imports) that go into a higher layer."""
    level = {unit: i for i, layer in enumerate(layers) for unit in layer}
    return sorted((a, b) for a, bs in edges.items() for b in bs if a in level and b in level and level[b] < level[a])


def test_no_import_runs_up_the_layers(layout, graph):
    edges, _, _ = graph
    assert upward(edges, layout.layers()) == [], "imports into a higher layer (pyproject.toml [tool.importlinter])"


def test_every_layer_of_the_contract_is_a_package_here(layout, graph):
    """A renamed or removed package would leave the contract guarding nothing."""
    _, modules, packages = graph
    named = [unit for layer in layout.layers() for unit in layer]
    assert set(named) <= packages, set(named) - packages
    assert all(modules[p] for p in named)  # and each has modules


def test_the_checks_see_an_arrow_up_and_a_stale_page(layout, graph):
    edges, _, _ = graph
    layers = layout.layers()
    assert "data" in edges["encoders"]  # a real arrow, downwards: no finding
    assert upward({**edges, "data": edges["data"] | {"encoders"}}, layers) == [("data", "encoders")]
    assert upward({"heads": {"calibration"}}, layers) == []  # siblings of one layer
    stale = layout.page_with("GENERATED", layout.PAGE.read_text(encoding="utf-8"))
    assert "GENERATED" in stale and layout.START not in stale
    with pytest.raises(SystemExit, match="markers"):
        layout.page_with("x", "a page without the markers")


def test_the_hand_written_parts_name_files_that_exist():
    """The page's `path.py` and `package/` mentions outside the generated part point at files of mlse/ (or of the
    checkout's root folders)."""
    page = (ROOT / "docs" / "layout.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`((?:[a-z_0-9]+/)+[a-z_0-9]+\.py)`", page))
    assert named, "no file named: the check would pass vacuously"
    missing = sorted(p for p in named if not (ROOT / "mlse" / p).is_file() and not (ROOT / p).is_file())
    assert missing == [], missing
