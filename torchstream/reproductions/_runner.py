"""Finding, checking and running one reproduction (:func:`torchstream.reproductions.run`)."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

from torchstream.reproductions._comparison import Comparison
from torchstream.streams import data_path

__all__ = ["load", "missing_data", "run"]


def _package() -> ModuleType:
    """The package ``torchstream.reproductions`` (its ``available()`` and ``__path__``): always
    imported before this module, which it names lazily (so the two do not import each other)."""
    return sys.modules[__package__]


def load(name: str) -> ModuleType:
    """Import the reproduction ``torchstream.reproductions.<name>``; an unknown name, a module
    without ``reproduce`` or a missing optional dependency is a ``ValueError``."""
    package = _package()
    known = package.available()
    if name not in known:
        raise ValueError(f"unknown reproduction {name!r}; known: {', '.join(known)}")
    try:
        module = importlib.import_module(f"{package.__name__}.{name}")
    except ModuleNotFoundError as e:
        if (e.name or "torchstream").split(".")[0] == "torchstream":
            raise
        raise ValueError(f"reproduction {name!r} needs the package {e.name!r}, which is not "
                         "installed (pip install 'torchstream[reproduce]')") from None
    if not callable(getattr(module, "reproduce", None)):
        raise ValueError(f"{module.__name__} has no function reproduce(quick)")
    return module


def missing_data(name: str) -> list[str]:
    """The shared data files (``DATA`` of the reproduction) that are not on this machine."""
    return [f for f in getattr(load(name), "DATA", ()) if not data_path(f).exists()]


def run(name: str, *, quick: bool = False, **options: object) -> list[Comparison]:
    """Run the reproduction ``name`` (``quick``: the short run the test suite checks; else the
    paper's size) and return its comparisons with the paper. ``options`` go to the module's
    ``reproduce`` (e.g. ``run("ipfi", data=["elec2"])``). Missing data files are a
    ``ValueError`` that names them."""
    module = load(name)
    missing = missing_data(name)
    if missing:
        raise ValueError(f"reproduction {name!r} needs the data files {missing} "
                         "(in $TORCHSTREAM_DATA or ../shared/data)")
    return list(module.reproduce(quick=quick, **options))
