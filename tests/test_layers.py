"""The package's layers (README, "Layout"): no import circle between modules, and no module
imports from a layer above its own. Function-local imports count too: they hide circles."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Dict, List, Sequence, Set, Tuple

PACKAGE = Path(__file__).resolve().parents[1] / "agent" / "jetbench"

# Lowest first. A module may import its own layer and those below. Each entry is a module or
# a package (with everything under it); the longest match places a module.
LAYERS: Sequence[Tuple[str, ...]] = (
    ("jetbench", "jetbench.bounded", "jetbench.documents", "jetbench.errors", "jetbench.units",
     "jetbench.work_units", "jetbench.procs", "jetbench.interrupts"),
    ("jetbench.hw",),
    ("jetbench.sim",),
    ("jetbench.open_board", "jetbench.sampling", "jetbench.ownership"),
    ("jetbench.profiles",),
    ("jetbench.workload",),
    ("jetbench.distributed",),
    ("jetbench.report",),
    ("jetbench.run", "jetbench.inventory", "jetbench.monitor"),
    ("jetbench.daemon",),
    ("jetbench.cli", "jetbench.__main__"),
)


def modules(package: Path) -> Dict[str, Path]:
    out = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(mods: Dict[str, Path]) -> Dict[str, Set[str]]:
    """Module -> the package's modules it imports (anywhere in its body)."""
    edges: Dict[str, Set[str]] = {}
    for name, path in mods.items():
        is_pkg = path.name == "__init__.py"
        found: Set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            targets: List[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if is_pkg else name.split(".")[:-1]
                    here = here[:len(here) - node.level + 1]
                    base = ".".join(here + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base
                           for a in node.names]
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.add(target)
        edges[name] = found
    return edges


def layer_of(module: str) -> int:
    best, best_len = -1, -1
    for i, layer in enumerate(LAYERS):
        for prefix in layer:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best_len:
                best, best_len = i, len(prefix)
    return best


def circles(edges: Dict[str, Set[str]]) -> List[List[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: Dict[str, int] = {}
    low: Dict[str, int] = {}
    stack: List[str] = []
    on_stack: Set[str] = set()
    found: List[List[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def upward(edges: Dict[str, Set[str]]) -> List[str]:
    return sorted(f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
                  for a, targets in edges.items() for b in targets
                  if layer_of(b) > layer_of(a))


def test_every_module_has_a_layer():
    assert [m for m in modules(PACKAGE) if layer_of(m) < 0] == []


def test_no_import_circles():
    assert circles(imports(modules(PACKAGE))) == []


def test_no_import_from_a_higher_layer():
    assert upward(imports(modules(PACKAGE))) == []


def test_the_checks_see_a_circle_and_an_upward_import(tmp_path):
    pkg = tmp_path / "jetbench"
    (pkg / "hw").mkdir(parents=True)
    (pkg / "run").mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "hw" / "__init__.py").write_text("")
    (pkg / "run" / "__init__.py").write_text("")
    (pkg / "hw" / "a.py").write_text("def f():\n    from ..run import b\n")
    (pkg / "run" / "b.py").write_text("from ..hw.a import f\n")
    edges = imports(modules(pkg))
    assert circles(edges) == [["jetbench.hw.a", "jetbench.run.b"]]
    assert upward(edges) == ["jetbench.hw.a (layer 1) imports jetbench.run.b (layer 8)"]


def test_the_readmes_layout_names_every_package():
    """README's "Layout" says where a behaviour lives: every package and sub-package is in it."""
    readme = (PACKAGE.parents[1] / "README.md").read_text()
    layout = readme[readme.index("## Layout"):]
    missing = [str(init.parent.relative_to(PACKAGE)) for init in PACKAGE.rglob("__init__.py")
               if init.parent != PACKAGE and f"`{init.parent.name}/`" not in layout]
    assert not missing, f"packages the README's layout does not name: {missing}"


MAX_MODULE_LINES = 500  # issue 36: small modules; the simulator's tables are the exception


def long_modules(package: Path, limit: int = MAX_MODULE_LINES) -> List[str]:
    """Modules outside sim/ longer than `limit` lines, with their lengths."""
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package)
        lines = len(path.read_text().splitlines())
        if rel.parts[0] != "sim" and lines > limit:
            out.append(f"{rel}: {lines}")
    return out


def test_no_module_outside_the_simulator_is_over_500_lines(tmp_path):
    assert long_modules(PACKAGE) == []
    # the check itself sees a long module, and lets the simulator's be
    (tmp_path / "sim").mkdir()
    (tmp_path / "sim" / "tables.py").write_text("x = 1\n" * 600)
    (tmp_path / "big.py").write_text("x = 1\n" * 501)
    (tmp_path / "ok.py").write_text("x = 1\n" * 500)
    assert long_modules(tmp_path) == ["big.py: 501"]
