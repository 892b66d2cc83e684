"""The package's import layers, read from the source with :mod:`ast` (nothing is imported).

Every module of ``torchstream`` belongs to one layer; a module may import its own layer and the
layers below it, never a layer above::

    0 data        torchstream.{_version, _lazy, base, checkpoint, compiling,
                  devices, files, losses, schema, streams, typing}
    1 models      torchstream.models
    2 learners    torchstream.learners
    3 algorithms  torchstream.{explain, select, drift, trees}
    4 evaluate    torchstream.{evaluate, distributed}
    5 report      torchstream.report (the drift report: reads detectors and explainers)
    6 sinks       torchstream.sinks
    7 viz         torchstream.viz (every matplotlib figure)
    8 face        torchstream.{cli, reproductions}, and the package's own ``__init__``, which
                  re-exports the public classes of several layers

Besides the layers:

* the graph of subpackages (an edge ``a -> b`` when a module of ``a`` imports one of ``b``)
  has no cycle, not even between two subpackages of one layer;
* no import runs inside a function, except of an optional dependency (:data:`OPTIONAL`);
  ``if TYPE_CHECKING:`` blocks at module level are module-level imports.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

import torchstream

PACKAGE = "torchstream"
ROOT = Path(torchstream.__file__).parent

LAYER_NAMES = ("data", "models", "learners", "algorithms", "evaluate", "report", "sinks", "viz",
               "face")

#: The layer of every top-level module or subpackage of ``torchstream`` (its name after
#: ``torchstream.``; ``""`` is the package's own ``__init__``).
LAYERS: dict[str, str] = {
    "_version": "data", "base": "data", "checkpoint": "data",
    "_lazy": "data", "compiling": "data", "devices": "data", "files": "data",
    "losses": "data", "schema": "data", "step": "data", "streams": "data", "typing": "data",
    "models": "models",
    "learners": "learners",
    "explain": "algorithms", "select": "algorithms", "drift": "algorithms",
    "trees": "algorithms",
    "evaluate": "evaluate", "distributed": "evaluate",
    "report": "report",
    "sinks": "sinks",
    "viz": "viz",
    "cli": "face", "reproductions": "face", "": "face",
}

#: Optional dependencies: the only modules a function may import.
OPTIONAL = frozenset({"ray", "sklearn", "sage", "tomllib", "tomli", "IPython", "selenium"})


@dataclass(frozen=True)
class Import:
    """One ``import`` statement's target inside the package."""

    module: str  # the importing module
    line: int
    target: str  # the imported module (a module of the package, or any top-level name)
    in_function: bool
    names: tuple[str, ...] = ()  # the names ``from target import ...`` takes

    def __str__(self) -> str:
        return self.target + (f" ({', '.join(self.names)})" if self.names else "")


def module_name(path: Path, root: Path = ROOT, package: str = PACKAGE) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join([package, *parts])


def unit_of(module: str) -> str:
    """The top-level module or subpackage a module belongs to (``""``: the package's
    ``__init__``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer_of(module: str) -> str:
    unit = unit_of(module)
    if unit not in LAYERS:
        raise KeyError(f"{module}: {unit!r} has no layer; add it to LAYERS")
    return LAYERS[unit]


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(source: str, module: str, modules: frozenset[str],
               is_package: bool = False) -> Iterator[Import]:
    """Every import of ``source`` (the module ``module``); ``from a import b`` names the module
    ``a.b`` when it is one of ``modules``, else ``a``."""

    def visit(node: ast.AST, in_function: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                      ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(module, child.lineno, alias.name, inner)
            elif isinstance(child, ast.ImportFrom):
                base = _resolve(child, module, is_package)
                names: dict[str, list[str]] = {}
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    if full in modules:
                        names.setdefault(full, [])
                    else:
                        names.setdefault(base, []).append(alias.name)
                for target, taken in names.items():
                    yield Import(module, child.lineno, target, inner, tuple(taken))
            elif (isinstance(child, ast.Call) and isinstance(child.func, ast.Name)
                  and child.func.id == "__import__" and child.args
                  and isinstance(child.args[0], ast.Constant)):
                yield Import(module, child.lineno, str(child.args[0].value), inner)
            yield from visit(child, inner)

    yield from visit(ast.parse(source), False)


def package_sources(root: Path = ROOT) -> dict[str, tuple[Path, str]]:
    return {module_name(p, root): (p, p.read_text(encoding="utf-8"))
            for p in sorted(root.rglob("*.py"))}


def strongly_connected(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return out


def _unit_label(unit: str) -> str:
    return f"{PACKAGE}.{unit}" if unit else f"{PACKAGE} (__init__)"


def violations(sources: Mapping[str, tuple[Path, str]]) -> list[str]:
    """Every breach of the rules of the module docstring, one readable line each."""
    modules = frozenset(sources)
    unreadable: list[str] = []
    upward: list[str] = []
    local: list[str] = []
    edges: dict[str, dict[str, list[Import]]] = {}
    for module, (path, source) in sorted(sources.items()):
        try:
            found = list(imports_of(source, module, modules, path.name == "__init__.py"))
        except SyntaxError as e:
            unreadable.append(f"  {module}:{e.lineno}: {e.msg}")
            continue
        for imp in found:
            where = f"{module}:{imp.line}"
            ours = imp.target == PACKAGE or imp.target.startswith(PACKAGE + ".")
            if imp.in_function and imp.target.split(".")[0] not in OPTIONAL:
                local.append(f"  {where} imports {imp} inside a function")
            if not ours:
                continue
            target = imp.target if imp.target in modules else PACKAGE
            src, dst = layer_of(module), layer_of(target)
            if LAYER_NAMES.index(dst) > LAYER_NAMES.index(src):
                upward.append(f"  {where} imports {imp}: layer {src} -> {dst} (higher)")
            a, b = unit_of(module), unit_of(target)
            if a != b:
                edges.setdefault(a, {}).setdefault(b, []).append(imp)
    graph = {a: set(bs) for a, bs in edges.items()}
    cycles = []
    for component in strongly_connected(graph):
        links = [f"{imp.module}:{imp.line} -> {imp}"
                 for a in component for b in sorted(graph[a] & set(component))
                 for imp in edges[a][b]]
        names = ", ".join(_unit_label(u) for u in component)
        cycles.append(f"  cycle between {names}:\n" + "\n".join(f"    {x}" for x in links))
    report = []
    for title, lines in (("modules that do not parse", unreadable),
                         ("imports of a higher layer", upward),
                         ("cycles between subpackages", cycles),
                         ("imports inside functions (not an optional dependency)", local)):
        if lines:
            report.append(f"{title} ({len(lines)}):\n" + "\n".join(lines))
    return report


def test_every_module_has_a_layer():
    unknown = sorted({unit_of(m) for m in package_sources()} - set(LAYERS))
    assert not unknown, f"subpackages or modules without a layer: {unknown}"
    assert set(LAYERS.values()) == set(LAYER_NAMES)


def test_imports_respect_the_layers():
    report = violations(package_sources())
    assert not report, "import rules broken:\n" + "\n".join(report)


def _fake_package(tmp_path: Path, files: Mapping[str, str]) -> dict[str, tuple[Path, str]]:
    root = tmp_path / PACKAGE
    for name, text in {"__init__.py": "", **files}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return {module_name(p, root): (p, p.read_text()) for p in sorted(root.rglob("*.py"))}


def test_the_check_finds_each_kind_of_breach(tmp_path):
    sources = _fake_package(tmp_path, {
        "schema.py": "import torch\n",
        "models/__init__.py": "from torchstream import schema\n",
        # upward (models -> evaluate) and, with evaluate -> models, a cycle
        "models/mlp.py": "def f():\n    from torchstream.evaluate import runner\n",
        "evaluate/__init__.py": "",
        "evaluate/runner.py": "from ..models import mlp\n\ndef g():\n    import ray\n",
        # viz above sinks: no breach
        "sinks/__init__.py": "",
        "sinks/history.py": "",
        "viz/__init__.py": "",
        "viz/history.py": "from torchstream.sinks.history import *\n",
    })
    report = "\n".join(violations(sources))
    assert "torchstream.models.mlp:2 imports torchstream.evaluate.runner: layer models -> " \
           "evaluate (higher)" in report
    assert "cycle between torchstream.evaluate, torchstream.models" in report
    assert "torchstream.evaluate.runner:1 -> torchstream.models.mlp" in report
    assert "torchstream.models.mlp:2 imports torchstream.evaluate.runner inside a function" \
        in report
    assert "ray" not in report and "sinks" not in report and "schema" not in report
    entries = [line for line in report.splitlines()
               if line.startswith("  ") and not line.startswith("    ")]
    assert len(entries) == 3  # one upward import, one cycle, one local import


def test_strongly_connected_components():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": {"e"}, "e": {"d"}, "f": {"a"}}
    assert sorted(strongly_connected(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def private_crossings(sources: Mapping[str, tuple[Path, str]]) -> list[str]:
    """Imports that reach into another subpackage's private parts: a ``_``-prefixed module
    below it, or a ``_``-prefixed name (dunders aside). The package's own private top-level
    helpers (``torchstream._lazy``, ``_version``) serve every subpackage and are not counted."""
    modules = frozenset(sources)
    found = []
    for module, (path, source) in sorted(sources.items()):
        for imp in imports_of(source, module, modules, path.name == "__init__.py"):
            parts = imp.target.split(".")
            if parts[0] != PACKAGE or len(parts) < 2 or unit_of(imp.target) == unit_of(module):
                continue
            private_module = any(p.startswith("_") for p in parts[2:])
            private_names = [n for n in imp.names if n.startswith("_") and not n.startswith("__")]
            if private_module or private_names:
                found.append(f"{module}:{imp.line} imports {imp}")
    return found


def test_no_subpackage_imports_the_private_parts_of_another():
    crossings = private_crossings(package_sources())
    assert not crossings, "private imports across subpackages:\n" + "\n".join(crossings)


def test_the_private_check_sees_modules_and_names(tmp_path):
    sources = _fake_package(tmp_path, {
        "_lazy.py": "",
        "explain/__init__.py": "from torchstream._lazy import *\n",
        "explain/_groups.py": "",
        "explain/pdp.py": "from torchstream.explain._groups import x\n",  # within explain: fine
        "drift/__init__.py": "",
        "drift/erics.py": "from torchstream.explain._groups import x\n"
                          "from torchstream.explain.pdp import _spec, __doc__, grid\n",
    })
    assert private_crossings(sources) == [
        "torchstream.drift.erics:1 imports torchstream.explain._groups (x)",
        "torchstream.drift.erics:2 imports torchstream.explain.pdp (_spec, __doc__, grid)",
    ]


@pytest.mark.parametrize("former", [
    "torchstream.sweep", "torchstream.reproduce", "torchstream.sinks.plots",
    "torchstream.sinks.evaluation_plots", "torchstream.sinks.selection_plots",
    "torchstream.sinks.local_plots", "torchstream.trees.plot", "torchstream.trees.monitor",
    "torchstream._deprecation",
])
def test_no_forwarding_modules_are_left(former):
    """Each module lives at one path: the former paths of moved modules are gone, and so is
    the helper that kept renamed keywords working."""
    with pytest.raises(ModuleNotFoundError, match=former.replace(".", r"\.")):
        importlib.import_module(former)


def test_nothing_in_the_package_is_deprecated():
    """The package is unreleased: no module, keyword or attribute warns that it is deprecated."""
    warning = [module for module, (_, source) in package_sources().items()
               if "DeprecationWarning" in source or "is deprecated" in source]
    assert not warning, f"modules that deprecate something: {warning}"
