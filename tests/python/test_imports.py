"""The Python package's import graph: no circles (modules that import each other), read
from the source with ast.  Imports inside functions count too: a lazy import that closes
a circle only hides it until the order of first calls changes."""
import ast
import os

import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..", "..", "python")
PACKAGES = {"gsb": os.path.join(ROOT, "gsb"),
            "cuml": os.path.join(ROOT, "cuml_shim", "cuml"),
            "cuml_proxy": os.path.join(ROOT, "cuml_shim", "cuml_proxy")}


def _modules():
    """{dotted name: path} of every module of the packages."""
    out = {}
    for package, folder in PACKAGES.items():
        for name in sorted(os.listdir(folder)):
            if name.endswith(".py"):
                stem = name[:-3]
                out[package if stem == "__init__" else f"{package}.{stem}"] = \
                    os.path.join(folder, name)
    return out


def _import_nodes(tree):
    """Every import statement of the module, at its top level or inside functions."""
    return (node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)))


def _edges(name, path, modules):
    is_package = path.endswith("__init__.py")
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    out = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = name.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                base = ".".join(parts[:keep] + ([node.module] if node.module else []))
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base
                       for a in node.names]
        out.update(t for t in targets if t in modules and t != name)
    return out


def import_graph():
    modules = _modules()
    return {name: _edges(name, path, modules) for name, path in modules.items()}


def cycles(graph):
    """Every strongly connected component of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
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

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    graph = import_graph()
    assert "gsb._convert" in graph and graph["gsb._data"], "the graph reads the sources"
    assert cycles(graph) == []


def test_the_checker_sees_a_cycle():
    graph = import_graph()
    graph["gsb._convert"] = graph["gsb._convert"] | {"gsb._data"}  # _data imports _convert
    assert ["gsb._convert", "gsb._data"] in cycles(graph)


@pytest.mark.parametrize("module", ["gsb._data", "gsb._estimator"])
def test_array_conversion_is_shared(module):
    assert "gsb._convert" in import_graph()[module]
