"""The package stands on its own: ``python -m build`` makes a wheel and an sdist whose metadata
``twine check`` passes, and the wheel, installed into a fresh virtual environment outside the
repository, runs ``torchstream run`` and every built-in model spec from an empty folder (the
specs come from inside the package, not from the source tree's ``models/``), imports what the
notebooks import, and says where a reproduction's missing data files go.

The fresh environment gets its dependencies (torch, river, ...) from the project's environment
through a ``.pth`` line, so nothing is downloaded: the wheel is installed with ``--no-deps
--no-index``, and only the wheel's ``torchstream`` is importable there (the editable install's
hook in the project's site-packages is not run). Needs the ``release`` extra (``build``,
``twine``); about a minute.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import torchstream
from torchstream.models.spec_files import BUILTIN_SPECS

pytest.importorskip("build", reason="the release extra (build, twine) is not installed")
pytest.importorskip("twine", reason="the release extra (build, twine) is not installed")

ROOT = Path(torchstream.__file__).resolve().parents[1]


def _notebook_imports() -> list[str]:
    """Every top-level import statement of the notebooks' code cells, once each, sorted."""
    found: set[str] = set()
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                tree = ast.parse("".join(cell["source"]))
                found.update(ast.unparse(node) for node in tree.body
                             if isinstance(node, (ast.Import, ast.ImportFrom)))
    return sorted(found)


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    if check and done.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout}\n"
                             f"{done.stderr}")
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from this source tree (the wheel from the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
         cwd=ROOT)
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A fresh virtual environment with the wheel installed, and the environment variables to
    run it with (no ``TORCHSTREAM_MODELS``)."""
    home = tmp_path_factory.mktemp("venv")
    _run([sys.executable, "-m", "venv", "--without-pip", str(home / "env")], cwd=home)
    python = home / "env" / "bin" / "python"
    purelib = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                   cwd=home).stdout.strip()
    Path(purelib, "project_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    wheel, = dist.glob("torchstream-*.whl")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          "--no-deps", "--no-index", str(wheel)], cwd=home)
    env = {k: v for k, v in os.environ.items() if k not in ("TORCHSTREAM_MODELS", "PYTHONPATH")}
    return home / "env", env


def test_sdist_and_wheel_are_built_with_one_version_and_pass_twine_check(dist: Path) -> None:
    names = sorted(p.name for p in dist.iterdir())
    version = torchstream.__version__
    assert names == [f"torchstream-{version}-py3-none-any.whl", f"torchstream-{version}.tar.gz"]
    done = _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dist.iterdir())],
                cwd=dist)
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_installed_wheel_is_the_one_imported(venv: tuple[Path, dict[str, str]],
                                                 tmp_path: Path) -> None:
    env_dir, env = venv
    code = ("import torchstream, torchstream.models as m; "
            "print(torchstream.__file__); print(torchstream.__version__); "
            "print(m.load_spec('mlp').source)")
    out = _run([str(env_dir / "bin" / "python"), "-c", code], cwd=tmp_path,
               env=env).stdout.split()
    assert Path(out[0]).is_relative_to(env_dir), out[0]
    assert out[1] == torchstream.__version__
    assert out[2] == "<built-in>"  # no source tree: the spec comes from inside the package


def test_the_wheel_lists_the_built_in_specs(venv: tuple[Path, dict[str, str]],
                                            tmp_path: Path) -> None:
    env_dir, env = venv
    out = _run([str(env_dir / "bin" / "torchstream"), "list"], cwd=tmp_path, env=env).stdout
    line = next(s for s in out.splitlines() if s.startswith("models:"))
    assert ", ".join(sorted(BUILTIN_SPECS)) in line


@pytest.mark.parametrize("model", [None, *sorted(BUILTIN_SPECS)])
def test_the_wheel_runs_from_an_empty_folder(venv: tuple[Path, dict[str, str]], tmp_path: Path,
                                             model: str | None) -> None:
    env_dir, env = venv
    cmd = [str(env_dir / "bin" / "torchstream"), "run", "--n-samples", "300", "--no-progress",
           "--logdir", "logs", "--result-json", "result.json"]
    if model is not None:
        cmd += ["--model", model]
    done = _run(cmd, cwd=tmp_path, env=env, check=model != "autoencoder")
    if model == "autoencoder":  # the one built-in spec that is not a predictor: said, not run
        assert done.returncode == 2
        assert "'autoencoder' is an autoencoder spec (unsupervised), not a predictor" in (
            done.stderr)
        return
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["n_rows"] == 300
    assert (tmp_path / "logs" / (model or "mlp")).is_dir()


def test_the_notebooks_imports_come_from_the_wheel(venv: tuple[Path, dict[str, str]],
                                                   tmp_path: Path) -> None:
    env_dir, env = venv
    imports = _notebook_imports()
    assert any(line.startswith("from torchstream.") for line in imports)
    code = "\n".join([*imports, "import torchstream.explain.ipfi as m", "print(m.__file__)"])
    out = _run([str(env_dir / "bin" / "python"), "-c", code], cwd=tmp_path, env=env).stdout
    assert Path(out.split()[-1]).is_relative_to(env_dir)


def test_a_reproduction_without_its_data_says_where_to_put_it(
        venv: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    env_dir, env = venv
    empty = tmp_path / "data"
    empty.mkdir()
    done = _run([str(env_dir / "bin" / "torchstream"), "reproduce", "fires", "--quick"],
                cwd=tmp_path, env={**env, "TORCHSTREAM_DATA": str(empty)}, check=False)
    assert done.returncode == 2, done.stderr
    assert "needs the data files ['spambase.csv']" in done.stderr
    assert "$TORCHSTREAM_DATA" in done.stderr
