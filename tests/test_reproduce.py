"""Every reproduction runs in --quick mode and agrees with the paper within its stated
tolerance (the tolerances are justified in each module); the command writes its report; the
command and :func:`torchstream.reproductions.run` are the only ways in."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from torchstream import reproductions
from torchstream.cli import main
from torchstream.reproductions import Comparison, available, load, missing_data, run, table

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@pytest.mark.parametrize("name", available())
def test_quick_reproduction_within_tolerance(name):
    if missing_data(name):
        pytest.skip(f"shared data {missing_data(name)} not on this machine")
    rows = run(name, quick=True)
    assert rows and all(isinstance(r, Comparison) for r in rows)
    checked = [r for r in rows if r.tolerance is not None]
    assert checked, f"{name}: no number is checked against the paper"
    bad = [r for r in checked if not r.within]
    assert not bad, table(bad)


def test_command_writes_a_report(tmp_path, capsys):
    if missing_data("fires"):
        pytest.skip("spambase.csv not on this machine")
    assert main(["reproduce", "fires", "--quick", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "fires-quick.md").read_text()
    assert "| mean accuracy |" in text and "0.7420" in text
    assert "fires" in capsys.readouterr().out


def test_unknown_reproduction():
    with pytest.raises(SystemExit, match="unknown reproduction 'nope'"):
        main(["reproduce", "nope"])


def test_comparison_within():
    assert Comparison("m", 0.75, 0.74, 0.02).within is True
    assert Comparison("m", 0.80, 0.74, 0.02).within is False
    assert Comparison("m", float("nan"), 0.74, 0.02).within is False
    assert Comparison("m", 0.80, 0.74).within is None


def test_reproductions_are_modules_of_the_package():
    package = Path(reproductions.__file__).parent
    names = available()
    assert names == sorted(p.stem for p in package.glob("*.py") if not p.stem.startswith("_"))
    for name in names:
        module = load(name)
        assert module.__name__ == f"torchstream.reproductions.{name}"
        assert sys.modules[module.__name__] is module  # imported, not executed from a path
        assert Path(module.__file__).parent == package
        assert callable(module.reproduce) and isinstance(module.DATA, tuple)


def test_reproductions_are_found_through_the_package_path(tmp_path, monkeypatch):
    (tmp_path / "toy.py").write_text(
        "from torchstream.reproductions._comparison import Comparison\nDATA = ()\n"
        "def reproduce(quick, scale=1.0):\n"
        "    return [Comparison('m', scale * (2.0 if quick else 1.0), 2.0, 0.0)]\n")
    (tmp_path / "_helper.py").write_text("")
    monkeypatch.setattr(reproductions, "__path__", [str(tmp_path)])
    try:
        assert available() == ["toy"]  # what the package holds, wherever it is installed
        assert [r.within for r in run("toy", quick=True)] == [True]
        assert [r.ours for r in run("toy", quick=False, scale=3.0)] == [3.0]  # options pass
        with pytest.raises(TypeError, match="scale2"):
            run("toy", quick=True, scale2=1.0)
    finally:
        sys.modules.pop("torchstream.reproductions.toy", None)


def test_the_command_and_run_are_the_only_entries():
    """No ``main()``, no ``python -m`` block in the reproductions, no wrapper scripts."""
    package = Path(reproductions.__file__).parent
    for path in sorted(package.glob("*.py")):
        tree = ast.parse(path.read_text())
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert "main" not in functions, path.name
        assert "__main__" not in path.read_text(), path.name
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    assert not list(scripts.glob("reproduce_*.py"))


def test_package_discovery_includes_the_reproductions():
    setuptools = pytest.importorskip("setuptools")
    root = Path(__file__).resolve().parents[1]
    config = tomllib.loads((root / "pyproject.toml").read_text())
    find = config["tool"]["setuptools"]["packages"]["find"]
    packages = setuptools.find_packages(str(root), include=find["include"],
                                        exclude=find.get("exclude", ()))
    assert "torchstream.reproductions" in packages
