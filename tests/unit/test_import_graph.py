"""The package's modules import each other without circles, counting imports inside functions too (a lazy import
hides a circle, it does not remove it), and so do its subpackages taken as wholes; so do the compiled path's Rust
modules (``native/src``), by their ``crate::`` paths outside their tests."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import spark_kafka_eos

PACKAGE_DIR = Path(spark_kafka_eos.__file__).parent
PACKAGE = PACKAGE_DIR.name
INTERNAL = f"{PACKAGE}._internal"
NATIVE_SOURCES = Path(__file__).resolve().parents[2] / "native" / "src"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE_DIR.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports (``from pkg import sub`` imports ``sub``, not ``pkg``)."""
    modules = {module_name(path): path for path in PACKAGE_DIR.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.split(".")[0] == PACKAGE:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
                targets = submodules if len(submodules) == len(node.names) else submodules | {node.module}
            elif isinstance(node, ast.Import):
                targets = {alias.name for alias in node.names if alias.name.split(".")[0] == PACKAGE}
            else:
                continue
            graph[name] |= {target for target in targets if target in modules and target != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for successor in sorted(graph[node]):
            if successor not in index:
                visit(successor)
                low[node] = min(low[node], low[successor])
            elif successor in stack:
                low[node] = min(low[node], index[successor])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def subpackage(module: str) -> str:
    """``spark_kafka_eos._internal.write.coordinator`` -> ``spark_kafka_eos._internal.write``; a module at the top of
    the package or of ``_internal`` stands for itself."""
    return ".".join(module.split(".")[:3 if module.startswith(f"{INTERNAL}.") else 2])


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert circles(import_graph()) == []


def test_no_subpackage_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    # The package's own __init__ (the public API) imports from everywhere; nothing may import it back.
    assert not [name for name, targets in graph.items() if PACKAGE in targets], "modules that import the package's __init__"
    packages: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name == PACKAGE:
            continue
        packages.setdefault(subpackage(name), set()).update(subpackage(t) for t in targets if subpackage(t) != subpackage(name))
    assert circles(packages) == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for target in graph[stack.pop()] - seen:
            seen.add(target)
            stack.append(target)
    return seen


def test_the_decision_log_depends_on_neither_the_write_path_nor_the_operator_tools() -> None:
    graph = import_graph()
    log_modules = [name for name in graph if subpackage(name) == f"{INTERNAL}.decision_log"]
    assert f"{INTERNAL}.decision_log.protocol" in log_modules
    above = {f"{INTERNAL}.write", f"{INTERNAL}.ops", f"{PACKAGE}.cli"}
    assert {m: sorted(t for t in reachable(graph, m) if subpackage(t) in above) for m in log_modules} == {m: [] for m in log_modules}


def test_only_the_command_entry_point_imports_the_operator_tools() -> None:
    graph = import_graph()
    importers = {name for name, targets in graph.items()
                 if subpackage(name) != f"{INTERNAL}.ops" and any(subpackage(t) == f"{INTERNAL}.ops" for t in targets)}
    assert importers == {f"{PACKAGE}.cli"}


def rust_module_graph() -> dict[str, set[str]]:
    """Rust module -> the crate's modules it uses (``crate::<module>``), its ``#[cfg(test)]`` part left out."""
    modules = {path.stem: path.read_text().split("#[cfg(test)]")[0] for path in NATIVE_SOURCES.glob("*.rs")}
    return {name: set(re.findall(r"\bcrate::(\w+)", source)) & modules.keys() - {name} for name, source in modules.items()}


def test_no_rust_module_uses_one_that_uses_it_back() -> None:
    graph = rust_module_graph()
    assert {"handle", "deliveries", "producer"} <= graph.keys()
    assert circles(graph) == []


def test_the_graph_sees_a_circle_where_there_is_one() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
