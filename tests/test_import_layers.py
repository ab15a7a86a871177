"""The layers of the package and which may import which, read from the source with :mod:`ast`
(the reader is ``benchmarks/import_graph.py``, which also prints the counts).

Every ``import`` statement of every module counts, at the top or inside a function (a
function-level import is still an arrow of the graph), and so does
``importlib.import_module("xdem....")`` with a literal name. The rules:

- ``xdem.kernels`` (numpy/numba kernels on plain arrays) imports nothing of xdem but ``xdem.kernels``;
- ``xdem.io``, ``xdem.coreg``, ``xdem.report`` and ``xdem.kernels`` (the library below the run)
  import neither ``xdem.workflows`` (the run of a coregistration) nor ``xdem.cli`` (the commands):
  the arrows go down only, ``cli`` -> ``workflows`` -> ``report`` / ``coreg`` / ``io`` -> ``kernels``;
- no circles (strongly connected components of the graph, function-level imports included,
  ``if TYPE_CHECKING:`` blocks left out): none (:data:`ALLOWED_CIRCLES` is empty and stays so);
- imports of xdem modules are at the top of a module, in the whole package, but the lazy ones
  that keep a start fast or a heavy stack off a route that does not need it
  (:data:`LAZY_FOR_THE_START`), each with its reason in the source.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "xdem"
_spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
assert _spec is not None and _spec.loader is not None
G = importlib.util.module_from_spec(_spec)
sys.modules["import_graph"] = G  # dataclasses resolve their module
_spec.loader.exec_module(G)

#: Layers that may not import the run (``xdem.workflows``) or the commands (``xdem.cli``).
BELOW_THE_RUN = ("xdem.io", "xdem.coreg", "xdem.report", "xdem.kernels")
UPWARD = ("xdem.workflows", "xdem.cli")
#: Circles allowed in the import graph: none (issue 24 removed the last ones).
ALLOWED_CIRCLES: list[list[str]] = []
#: ``(module, imported)``: the function-level imports of xdem modules that keep a start fast
#: (``xdem --help``, a usage error, ``import xdem``) or keep a route's stack off another route.
LAZY_FOR_THE_START = {
    ("xdem.cli", "xdem.io.atomic"),  # the group: --help and usage errors import nothing of xdem.io
    ("xdem.cli.coreg", "xdem.cli._coreg_run"),  # each command module: click only, its run on first use
    ("xdem.cli.info", "xdem.cli._info_run"),
    ("xdem.cli.terrain", "xdem.cli._terrain_run"),
    ("xdem.cli.convert", "xdem.cli._convert_run"),
    ("xdem.cli.dh", "xdem.cli._dh_run"),
    ("xdem.cli.methods", "xdem.coreg.spec"),
    ("xdem.cli.report", "xdem.report"),
    ("xdem.cli.examples", "xdem.examples.pair"),
    ("xdem.cli._info_run", "xdem.workflows.points"),  # xdem.coreg for a points file only
    ("xdem.report", "xdem.report.write"),  # the points report imports the package without the DEM report
    ("xdem.examples", "xdem.examples.pair"),  # the file names without the pair's stack, for `xdem examples`
    ("xdem.workflows", "xdem.workflows.coreg"),  # the lazy package: `import xdem.workflows` without the run's stack
    ("xdem.workflows.points", "xdem.report.points"),  # matplotlib only when a points report is asked
    ("xdem.workflows._summary", "xdem.report"),  # the optional report module, only when a report is asked
    ("xdem.spatialstats", "xdem.spatialstats.plots"),  # matplotlib only when a binning plot is asked
    ("xdem.coreg.blockwise", "xdem.dem"),  # geoutils (~0.3 s CPU) only when apply() writes and returns a DEM
}


def _module_name(path: Path, *, root: Path = PACKAGE) -> str:
    return G.module_name(path, root=root)


def _within(name: str, package: str) -> bool:
    return G.within(name, package)


def imports_of(path: Path, *, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """``(line, module)`` of every xdem module that ``path`` (a module of the package at ``root``)
    imports, anywhere in it (``if TYPE_CHECKING:`` blocks too)."""
    return [(i.line, i.name) for i in G.imports_of(path, root=root, type_checking=True)]


def _modules(package: str) -> list[Path]:
    return sorted((PACKAGE.parent / package.replace(".", "/")).rglob("*.py"))


def test_the_import_reader_sees_every_kind_of_import(tmp_path):
    """Top-level, function-level, relative and ``import_module`` imports are all read."""
    pkg = tmp_path / "xdem" / "io"
    pkg.mkdir(parents=True)
    (pkg / "mod.py").write_text(
        "import xdem.kernels\nfrom . import grid\n\ndef f():\n    from xdem.workflows import run_coreg\n"
        "    import importlib\n    importlib.import_module('xdem.cli.coreg')\n", encoding="utf-8")
    found = {name for _, name in imports_of(pkg / "mod.py", root=tmp_path / "xdem")}
    assert {"xdem.kernels", "xdem.io.grid", "xdem.workflows", "xdem.cli.coreg"} <= found


@pytest.mark.parametrize("layer", BELOW_THE_RUN)
def test_library_layers_do_not_import_the_run_or_the_commands(layer):
    bad = [f"{_module_name(p)}:{line} imports {name}" for p in _modules(layer) for line, name in imports_of(p)
           if any(_within(name, up) for up in UPWARD)]
    assert not bad, "\n".join(bad)


def test_kernels_import_only_kernels():
    bad = [f"{_module_name(p)}:{line} imports {name}" for p in _modules("xdem.kernels")
           for line, name in imports_of(p) if not _within(name, "xdem.kernels")]
    assert not bad, "\n".join(bad)


def test_every_layer_has_modules():
    """The rules above check something: each layer is where they look."""
    assert all(_modules(layer) for layer in BELOW_THE_RUN) and len(list(PACKAGE.rglob("*.py"))) > 50


def test_the_graph_reader_leaves_out_type_checking_and_finds_circles(tmp_path):
    pkg = tmp_path / "xdem"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "a.py").write_text("from xdem import b\n", encoding="utf-8")
    (pkg / "b.py").write_text("def f():\n    from xdem.a import x\n", encoding="utf-8")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from xdem import a\n",
                              encoding="utf-8")
    (pkg / "d.py").write_text("from xdem import c\n", encoding="utf-8")
    edges = G.graph(root=pkg)
    assert edges["xdem.c"] == set() and edges["xdem.d"] == {"xdem.c"}
    assert G.circles(edges) == [["xdem.a", "xdem.b"]]
    assert [(i.name, i.in_function) for i in G.imports_of(pkg / "b.py", root=pkg)] == [
        ("xdem.a", True), ("xdem.a.x", True)]


def test_no_import_circles_but_the_listed_ones():
    """Circles of the whole graph (function-level imports included); the listed ones are all
    inside xdem.coreg or xdem.workflows, and each still exists (else: remove it from the list)."""
    found = G.circles(G.graph())
    assert [c for c in found if c not in ALLOWED_CIRCLES] == []
    assert [c for c in ALLOWED_CIRCLES if c not in found] == []
    assert all(_within(m, "xdem.coreg") or _within(m, "xdem.workflows") for c in ALLOWED_CIRCLES for m in c)


def test_imports_of_xdem_modules_are_at_the_top_but_for_a_fast_start():
    """A function-level import of an xdem module is one of :data:`LAZY_FOR_THE_START`, and each
    of those still exists."""
    found = {(module, imp.name) for module, imps in G.function_level_imports().items() for imp in imps}
    assert sorted(found - LAZY_FOR_THE_START) == []
    assert sorted(LAZY_FOR_THE_START - found) == []
