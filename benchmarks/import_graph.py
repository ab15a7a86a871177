"""The import graph of xdem, read from the source with :mod:`ast`: imports per module and circles.

    python benchmarks/import_graph.py [--repo PATH] [--list]

Every ``import`` of an xdem module counts: at the top of a module or inside a function (a
function-level import is still an arrow of the graph), and ``importlib.import_module("xdem...")``
with a literal name. Imports under ``if TYPE_CHECKING:`` are left out (they never run). A circle
is a strongly connected component of more than one module (Tarjan's algorithm). ``--list``
prints every function-level import of an xdem module. ``tests/test_import_layers.py`` uses
:func:`imports_of` and :func:`circles` to check the layers.
"""

from __future__ import annotations

import argparse
import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

#: The package read by default: the checkout this script is in.
PACKAGE = Path(__file__).resolve().parents[1] / "xdem"


@dataclass(frozen=True)
class Import:
    """One import of an xdem module: where it is and whether it runs when the module is imported."""

    line: int
    name: str
    in_function: bool
    #: ``xdem.io`` of ``from xdem.io import grid``: an arrow only if a name it gives is not a module.
    from_package: bool = False


def module_name(path: Path, *, root: Path = PACKAGE) -> str:
    """``xdem.io.open`` for ``root/io/open.py`` (``root`` is the ``xdem`` package directory)."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def within(name: str, package: str) -> bool:
    """Whether the module ``name`` is ``package`` or inside it."""
    return name == package or name.startswith(package + ".")


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _names(node: ast.AST, package: str) -> list[tuple[str, bool]]:
    if isinstance(node, ast.Import):
        return [(alias.name, False) for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        parts = package.split(".")
        base = ".".join(parts[: len(parts) - node.level + 1]) if node.level else ""
        target = ".".join(p for p in (base, node.module) if p)
        # ``from xdem import workflows`` imports the module xdem.workflows
        return [(target, True)] + [(f"{target}.{alias.name}", False) for alias in node.names]
    func = getattr(node, "func", None)
    if (isinstance(node, ast.Call) and getattr(func, "attr", getattr(func, "id", "")) == "import_module"
            and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
        return [(node.args[0].value, False)]
    return []


def imports_of(path: Path, *, root: Path = PACKAGE, type_checking: bool = False) -> list[Import]:
    """Every import of an xdem module in ``path`` (a module of the package at ``root``), in the
    order of the source; those under ``if TYPE_CHECKING:`` only with ``type_checking``."""
    module = module_name(path, root=root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[Import] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if _is_type_checking(node) and not type_checking:
            return
        out.extend(Import(node.lineno, n, in_function, target) for n, target in _names(node, package)
                   if within(n, "xdem"))
        inner = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inner)

    visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), False)
    return out


def graph(*, root: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the xdem modules it imports.

    A name that is not a module (``xdem.io.open.open_dem``) is an arrow to its module;
    ``from xdem.terrain import kernels`` is an arrow to ``xdem.terrain.kernels`` only (the
    package is imported first, as for any submodule, but it is not what is asked for); a
    package's import of its own submodules is an arrow.
    """
    paths = sorted(root.rglob("*.py"))
    modules = {module_name(p, root=root) for p in paths}
    edges: dict[str, set[str]] = {}
    for path in paths:
        source = module_name(path, root=root)
        targets = set()
        found = imports_of(path, root=root)
        for imp in found:
            gives = [i.name for i in found if i.line == imp.line and not i.from_package]
            if imp.from_package and gives and all(n in modules for n in gives):
                continue
            name = imp.name
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != source:
                targets.add(name)
        edges[source] = targets
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:  # Tarjan, iterative over each node's edges
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            connect(v)
    return sorted(found, key=lambda c: (-len(c), c))


def function_level_imports(*, root: Path = PACKAGE) -> dict[str, list[Import]]:
    """Module -> its function-level import statements of xdem modules (the first name of each)."""
    out: dict[str, list[Import]] = {}
    for path in sorted(root.rglob("*.py")):
        once: dict[int, Import] = {}
        for imp in imports_of(path, root=root):
            if imp.in_function:
                once.setdefault(imp.line, imp)  # one import statement counts once, whatever it names
        if once:
            out[module_name(path, root=root)] = list(once.values())
    return out


def main() -> None:
    """Print the counts, the circles and, with ``--list``, every function-level import."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, default=PACKAGE.parent, help="checkout of xdem to read")
    parser.add_argument("--list", action="store_true", help="list every function-level import")
    args = parser.parse_args()
    root = args.repo.resolve() / "xdem"
    edges = graph(root=root)
    inner = function_level_imports(root=root)
    per_package = Counter(".".join(m.split(".")[:2]) for m, imps in inner.items() for _ in imps)
    print(f"modules: {len(edges)}; arrows: {sum(map(len, edges.values()))}; "
          f"function-level import statements of xdem modules: {sum(per_package.values())}")
    for package, count in per_package.most_common():
        print(f"  {package}: {count}")
    found = circles(edges)
    print(f"circles: {len(found)}")
    for component in found:
        print("  " + " <-> ".join(component))
    if args.list:
        for module, imps in inner.items():
            for imp in imps:
                print(f"{module}:{imp.line} {imp.name}")


if __name__ == "__main__":
    main()
