"""``import torchstream`` is cheap: the public names of the package and of its subpackages are
imported on first use (``torchstream._lazy``), so a bare import loads none of the compiler
stack, scikit-learn, matplotlib, pandas or TensorBoard, and each subpackage loads only what the
names asked for need. Checked in fresh interpreters (``sys.modules`` after each import)."""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import torchstream
from torchstream._lazy import lazy_names

ROOT = Path(torchstream.__file__).parent

#: What a bare ``import torchstream`` may not load (torch itself included: nothing is asked yet).
HEAVY = ("torch", "torch._dynamo", "sklearn", "river", "scipy", "matplotlib", "pandas",
         "tensorboard", "captum")

#: Each step's code, run in order in one interpreter, and the heavy modules it may not add.
STEPS: list[tuple[str, tuple[str, ...]]] = [
    ("import torchstream", HEAVY),
    ("torchstream.__version__", HEAVY),
    # a CSV stream and a torch learner: no river generators (sklearn), no compiler
    ("from torchstream.streams import read_csv", ("torch._dynamo", "sklearn", "matplotlib")),
    # entering through the task classes, then their base
    ("from torchstream import OnlineRegressor", ("torch._dynamo", "sklearn", "matplotlib")),
    ("from torchstream import OnlineLearner", ("torch._dynamo", "sklearn", "matplotlib")),
    # an explainer without captum (local attributions), a sink without TensorBoard
    ("from torchstream.explain import IncrementalPFI", ("torch._dynamo", "sklearn", "captum")),
    ("from torchstream.sinks import History", ("torch._dynamo", "sklearn", "tensorboard")),
    # the synthetic streams are river's generators: river.datasets brings scikit-learn
    ("from torchstream.streams import agrawal_drift", ("torch._dynamo",)),
]

PROBE = """
import json, sys
heavy = {heavy!r}
out = []
for code in {codes!r}:
    before = {{m for m in heavy if m in sys.modules}}
    exec(code)
    out.append(sorted({{m for m in heavy if m in sys.modules}} - before))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def loaded() -> list[list[str]]:
    """The heavy modules each step of :data:`STEPS` added, from one fresh interpreter."""
    code = PROBE.format(heavy=HEAVY, codes=[c for c, _ in STEPS])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("step", range(len(STEPS)), ids=[c for c, _ in STEPS])
def test_each_import_loads_only_what_it_needs(loaded, step):
    code, forbidden = STEPS[step]
    assert not set(loaded[step]) & set(forbidden), f"{code!r} imported {loaded[step]}"


def test_the_probe_sees_heavy_imports(loaded):
    # the last steps need torch, river and scikit-learn: the probe is not blind
    assert "torch" in loaded[2] and "pandas" in set().union(*map(set, loaded[2:5]))
    assert "sklearn" in loaded[-1] and "river" in set().union(*map(set, loaded))


def _lazy_packages() -> dict[str, Path]:
    """Every package whose ``__init__`` installs :func:`lazy_names`, by module name."""
    found = {}
    for path in sorted(ROOT.rglob("__init__.py")):
        if "lazy_names(" in path.read_text(encoding="utf-8"):
            parts = path.relative_to(ROOT.parent).parent.parts
            found[".".join(parts)] = path
    return found


def _declared(path: Path) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """The names an ``__init__`` imports under ``if TYPE_CHECKING:`` and those it hands to
    :func:`lazy_names`, both as ``{module: {name, ...}}``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    typed: dict[str, set[str]] = {}
    lazy: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for imp in node.body:
                assert isinstance(imp, ast.ImportFrom) and imp.module
                typed.setdefault(imp.module, set()).update(a.name for a in imp.names)
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and getattr(node.value.func, "id", None) == "lazy_names"):
            where = ast.literal_eval(node.value.args[1])
            lazy = {module: set(names) for module, names in where.items()}
    return typed, lazy


def test_the_lazy_packages_are_the_expected_ones():
    assert set(_lazy_packages()) == {
        "torchstream", "torchstream.evaluate", "torchstream.explain", "torchstream.learners",
        "torchstream.sinks", "torchstream.streams", "torchstream.drift", "torchstream.models",
        "torchstream.cli", "torchstream.report", "torchstream.reproductions",
    }


@pytest.mark.parametrize("package", sorted(_lazy_packages()))
def test_lazy_names_match_the_typed_imports_and_resolve(package):
    typed, lazy = _declared(_lazy_packages()[package])
    assert typed == lazy, "the TYPE_CHECKING imports and the lazy names differ"
    module = importlib.import_module(package)
    for name in module.__all__:
        assert name in dir(module)
        value = getattr(module, name)
        owner = next((m for m, names in lazy.items() if name in names), None)
        if owner is not None:
            assert value is getattr(importlib.import_module(owner), name)
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        getattr(module, "no_such_name")


def test_no_two_modules_import_each_other():
    """A lazy package imports none of its modules, so a module is imported first wherever a
    user enters; two modules that import each other would work from one side only. There is
    no such pair (learners.tasks imports learners.online, never the reverse)."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        from test_layers import imports_of, package_sources, strongly_connected
    finally:
        sys.path.pop(0)
    sources = package_sources()
    modules = frozenset(sources)
    graph: dict[str, set[str]] = {}
    for module, (path, source) in sources.items():
        for imp in imports_of(source, module, modules, path.name == "__init__.py"):
            if not imp.in_function and imp.target in modules and imp.target != module:
                graph.setdefault(module, set()).add(imp.target)
    assert strongly_connected(graph) == []
    assert "torchstream.learners.online" in graph["torchstream.learners.tasks"]


def test_the_in_memory_sink_draws_nothing():
    """Figures live in :mod:`torchstream.viz`: importing the History (a fresh interpreter) loads
    no matplotlib, and drawing it does (the probe is not blind)."""
    code = ("import sys; import torchstream.sinks.history; a = 'matplotlib' in sys.modules; "
            "import torchstream.viz.history; print(a, 'matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300, check=True)
    assert done.stdout.split() == ["False", "True"]


def test_a_name_listed_twice_is_refused():
    with pytest.raises(ValueError, match="'x' is listed under a and b"):
        lazy_names("pkg", {"a": ("x",), "b": ("x", "y")})
