"""The public modules listed in ``[tool.mypy] files`` of pyproject.toml type-check cleanly."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

api = pytest.importorskip("mypy.api", reason="mypy is not installed (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = ROOT / "pyproject.toml"

#: Modules that must always be on the checked list.
REQUIRED = {
    "torchstream/base.py",
    "torchstream/typing.py",
    "torchstream/devices.py",
    "torchstream/checkpoint.py",
    "torchstream/schema.py",
    "torchstream/explain/ipfi.py",
    "torchstream/explain/isage.py",
    "torchstream/explain/ipdp.py",
    "torchstream/explain/local.py",
    "torchstream/select/fires.py",
    "torchstream/drift/erics.py",
    "torchstream/learners/online.py",
    "torchstream/learners/network.py",
    "torchstream/evaluate/plugins.py",
    "torchstream/evaluate/runner.py",
}


def _checked_files() -> list[str]:
    with PYPROJECT.open("rb") as handle:
        return list(tomllib.load(handle)["tool"]["mypy"]["files"])


def test_checked_list_covers_the_public_modules() -> None:
    entries = _checked_files()
    folders = [e for e in entries if e.endswith("/")]
    missing = [
        m for m in REQUIRED if m not in entries and not any(m.startswith(f) for f in folders)
    ]
    assert not missing, sorted(missing)
    assert all((ROOT / e).is_dir() if e.endswith("/") else (ROOT / e).is_file() for e in entries)


def test_mypy_reports_no_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)
    stdout, stderr, status = api.run(
        ["--config-file", str(PYPROJECT), "--cache-dir", str(tmp_path), "--no-error-summary"]
    )
    assert status == 0, stdout + stderr
    assert "error:" not in stdout, stdout
