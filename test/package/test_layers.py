"""The package's folders are layers (README "Layout"): every import of ``robodyn_ros`` code, at module level
or inside a function, goes to the same layer or one below it, there is no import cycle between modules,
and only ``ros/`` imports rclpy. Read from the source (AST), so an import that only runs on some path
counts too.

Order: model < robots < dynamics < kernels < identification < estimation < control < simulation < bags <
ros < benchmarks < cli (``robots`` holds the bundled URDFs and their data; ``benchmarks`` the bench and soak
harness, which drives nodes; the package root re-exports the public names).
"""
import ast
import os

import pytest

from conftest import CHECKOUT

PACKAGE = os.path.join(CHECKOUT, "robodyn_ros")
ORDER = ("model", "robots", "dynamics", "kernels", "identification", "estimation", "control", "simulation", "bags",
         "ros", "benchmarks", "cli")


def _module_name(path):
    rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def _exists(name):
    base = os.path.join(os.path.dirname(PACKAGE), *name.split("."))
    return os.path.isfile(base + ".py") or os.path.isdir(base)


def import_graph():
    """``{module: {imported robodyn_ros module or "rclpy"}}`` of every module of the package."""
    graph = {}
    for directory, _, files in os.walk(PACKAGE):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            module = _module_name(path)
            package = module if name == "__init__.py" else module.rsplit(".", 1)[0]
            targets = set()
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read(), path)):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        parts = package.split(".")
                        base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                    else:
                        base = node.module or ""
                    names = [f"{base}.{alias.name}" if _exists(f"{base}.{alias.name}") else base
                             for alias in node.names]
                else:
                    continue
                for target in names:
                    if target.split(".")[0] == "rclpy":
                        targets.add("rclpy")
                    elif target.startswith("robodyn_ros"):
                        targets.add(target)
            graph[module] = targets
    return graph


def layer(module):
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and parts[1] in ORDER) else "(root)"


def cycles(graph):
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
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


@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_every_folder_is_a_layer(graph):
    folders = {layer(m) for m in graph} - {"(root)"}
    assert folders == set(ORDER), f"folders not in the layer order: {folders ^ set(ORDER)}"


def test_no_import_cycles(graph):
    assert graph["robodyn_ros.model.model"] and graph["robodyn_ros.kernels.codegen"]
    assert cycles(graph) == []


def test_imports_only_go_down(graph):
    upward = [(m, t) for m, targets in graph.items() for t in targets
              if t != "rclpy" and layer(m) in ORDER and layer(t) in ORDER
              and ORDER.index(layer(t)) > ORDER.index(layer(m))]
    into_root = [(m, t) for m, targets in graph.items() for t in targets if t == "robodyn_ros" and m != t]
    assert not upward, "imports going up a layer: " + ", ".join(f"{m} -> {t}" for m, t in sorted(upward))
    assert not into_root, f"modules importing the package root: {into_root}"


def test_only_ros_imports_rclpy(graph):
    importers = sorted(m for m, targets in graph.items() if "rclpy" in targets)
    assert importers and all(layer(m) == "ros" for m in importers), importers


def test_the_checks_can_fail():
    """The cycle finder and the layer of a module on a graph with a known cycle and an upward import."""
    toy = {"robodyn_ros.model.a": {"robodyn_ros.model.b"}, "robodyn_ros.model.b": {"robodyn_ros.model.a"},
           "robodyn_ros.dynamics.c": {"robodyn_ros.cli.main"}}
    assert cycles(toy) == [["robodyn_ros.model.a", "robodyn_ros.model.b"]]
    assert layer("robodyn_ros.dynamics.c") == "dynamics" and layer("robodyn_ros.cli") == "cli"
    assert layer("robodyn_ros") == "(root)"
