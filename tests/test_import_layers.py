"""The layers of the package and which may import which, read from the source with :mod:`ast`.

Every ``import`` statement of every module counts, at the top or inside a function (a
function-level import is still an arrow of the graph), and so does
``importlib.import_module("xdem....")`` with a literal name. The rules:

- ``xdem.kernels`` (numpy/numba kernels on plain arrays) imports nothing of xdem but ``xdem.kernels``;
- ``xdem.io``, ``xdem.coreg``, ``xdem.report`` and ``xdem.kernels`` (the library below the run)
  import neither ``xdem.workflows`` (the run of a coregistration) nor ``xdem.cli`` (the commands):
  the arrows go down only, ``cli`` -> ``workflows`` -> ``report`` / ``coreg`` / ``io`` -> ``kernels``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "xdem"
#: Layers that may not import the run (``xdem.workflows``) or the commands (``xdem.cli``).
BELOW_THE_RUN = ("xdem.io", "xdem.coreg", "xdem.report", "xdem.kernels")
UPWARD = ("xdem.workflows", "xdem.cli")


def _module_name(path: Path, *, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def imports_of(path: Path, *, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """``(line, module)`` of every xdem module that ``path`` (a module of the package at ``root``)
    imports, anywhere in it."""
    module = _module_name(path, root=root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1]) if node.level else ""
            target = ".".join(p for p in (base, node.module) if p)
            # ``from xdem import workflows`` imports the module xdem.workflows
            names = [target] + [f"{target}.{alias.name}" for alias in node.names]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names = [node.args[0].value]
        out += [(node.lineno, n) for n in names if _within(n, "xdem")]
    return out


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
