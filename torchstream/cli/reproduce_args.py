"""The options of ``torchstream reproduce`` and the names of the reproductions (found without
importing them; :mod:`torchstream.cli.reproduce` runs the command)."""

from __future__ import annotations

import argparse
import pkgutil

from torchstream import reproductions

__all__ = ["PACKAGE", "add_parser", "available"]

#: The package whose modules are the reproductions.
PACKAGE = reproductions.__name__


def available() -> list[str]:
    """The names of the reproductions: the public modules of :data:`PACKAGE`, sorted (listed
    by the package's import machinery, without importing them)."""
    return sorted(m.name for m in pkgutil.iter_modules(reproductions.__path__)
                  if not m.name.startswith("_") and not m.ispkg)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``torchstream reproduce`` to the sub-commands ``sub``."""
    p = sub.add_parser("reproduce", help="rebuild a paper's result next to the published number")
    p.add_argument("name", help="a reproduction name (`torchstream list` shows them), or 'all'")
    p.add_argument("--quick", action="store_true", help="a short run (a minute or two on a CPU)")
    p.add_argument("--out", help="directory of the markdown reports (default runs/reproduce)")
