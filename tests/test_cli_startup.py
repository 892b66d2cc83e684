"""``torchstream --help`` and ``torchstream list`` start at once: the parser is built from the
commands' argument modules and a command's implementation is imported only when it runs, so
neither loads torch, the compiler stack, scikit-learn, matplotlib or TensorBoard (checked in
fresh interpreters). ``list``'s names are checked against the registries they stand for."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys

import pytest

import torchstream.cli.learners  # noqa: F401  (registers dmt, as the command line does)
from torchstream.cli import COMMANDS, build_parser, listing
from torchstream.learners.registry import registered_learners
from torchstream.streams import SYNTHETIC

#: What ``--help`` and ``list`` may not load.
HEAVY = ("torch", "torch._dynamo", "sklearn", "river", "matplotlib", "tensorboard", "pandas")

PROBE = """
import json, runpy, sys
sys.argv = ["torchstream", *{argv!r}]
try:
    runpy.run_module("torchstream.cli", run_name="__main__")
except SystemExit:
    pass
print(json.dumps(sorted(m for m in {heavy!r} if m in sys.modules)))
"""


def _loaded(argv: list[str]) -> tuple[list[str], str]:
    """The heavy modules a fresh ``python -m torchstream.cli ARGV`` loaded, and its output."""
    done = subprocess.run([sys.executable, "-c", PROBE.format(argv=argv, heavy=HEAVY)],
                          capture_output=True, text=True, timeout=120, check=True)
    *out, last = done.stdout.strip().splitlines()
    return json.loads(last), "\n".join(out)


@pytest.mark.parametrize("argv", [["--help"], ["run", "--help"], ["sweep", "--help"],
                                  ["list"]])
def test_help_and_list_import_nothing_heavy(argv: list[str]) -> None:
    loaded, out = _loaded(argv)
    assert loaded == [], f"{' '.join(argv)} imported {loaded}"
    assert "usage: torchstream" in out or out.startswith("streams:")


def test_the_parser_alone_imports_nothing_heavy() -> None:
    code = ("import sys; from torchstream.cli import build_parser; build_parser(); "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    assert done.stdout.strip() == "[]"


def test_a_command_imports_its_module_when_it_runs() -> None:
    loaded, out = _loaded(["report", "/nonexistent-run-dir"])
    assert "matplotlib" in loaded  # the report command's module draws with matplotlib
    assert "torch._dynamo" not in loaded


def test_every_command_of_the_parser_has_its_module() -> None:
    sub = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert set(sub) == set(COMMANDS)
    for module, name in COMMANDS.values():
        assert callable(getattr(importlib.import_module(module), name))


def test_listed_names_are_the_registries() -> None:
    assert listing.STREAMS == tuple(sorted(SYNTHETIC))
    assert listing.LEARNERS == tuple(registered_learners())
