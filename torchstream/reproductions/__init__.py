"""Reproductions of published results, one module per paper.

Each module ``torchstream.reproductions.<name>`` has ``DATA`` (the shared data files it reads)
and ``reproduce(quick: bool, ...) -> list[Comparison]``. Two ways to run one: the command
``torchstream reproduce <name> [--quick]``, and from Python :func:`run`::

    from torchstream.reproductions import run, table
    print(table(run("fires", quick=True)))

:func:`available` lists the names without importing any reproduction (``pkgutil``, so they are
found in an installed package too); the other names are imported on first use.
"""

from __future__ import annotations

import pkgutil
from typing import TYPE_CHECKING

from torchstream._lazy import lazy_names

if TYPE_CHECKING:
    from torchstream.reproductions._comparison import Comparison, table
    from torchstream.reproductions._runner import load, missing_data, run

__all__ = ["PACKAGE", "Comparison", "available", "load", "missing_data", "run", "table"]

#: The package whose modules are the reproductions.
PACKAGE = __name__


def available() -> list[str]:
    """The names of the reproductions: the public modules of this package, sorted (listed by
    the import machinery, without importing them)."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__)
                  if not m.name.startswith("_") and not m.ispkg)


__getattr__, __dir__ = lazy_names(__name__, {
    "torchstream.reproductions._comparison": ("Comparison", "table"),
    "torchstream.reproductions._runner": ("load", "missing_data", "run"),
})
