"""Lazy public names of a package: each is imported from its submodule on first access.

A package's ``__init__`` names where each public name lives and installs the module-level
``__getattr__`` and ``__dir__`` this returns (PEP 562); ``import torchstream`` then imports
none of torch, river, scikit-learn, matplotlib, pandas or TensorBoard, and
``from torchstream.streams import read_csv`` none of the synthetic streams' river generators.
The same names are imported under ``if TYPE_CHECKING:`` in that ``__init__``, for type checkers,
the documentation and ``tests/test_layers.py``, which read them as the package's imports;
``tests/test_lazy_imports.py`` checks that both lists agree.

Example
-------
>>> import sys, types
>>> package = types.ModuleType("pkg")
>>> package.__getattr__, package.__dir__ = lazy_names("pkg", {"math": ("sqrt",)})
>>> sys.modules["pkg"] = package
>>> package.sqrt(9.0), "sqrt" in vars(package)  # imported, then kept on the package
(3.0, True)
>>> package.cbrt
Traceback (most recent call last):
    ...
AttributeError: module 'pkg' has no attribute 'cbrt'
>>> del sys.modules["pkg"]
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence


def lazy_names(
    package: str, where: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public names ``where`` gives
    as ``{submodule: (name, ...)}``; a name is imported from its submodule at its first
    access and then kept as an attribute of the package (the next access is a plain lookup).

    Raises ``ValueError`` if a name is listed under two submodules.
    """
    owner: dict[str, str] = {}
    for module, names in where.items():
        for name in names:
            if name in owner:
                raise ValueError(f"{package}: {name!r} is listed under {owner[name]} "
                                 f"and {module}")
            owner[name] = module

    def __getattr__(name: str) -> object:
        module = owner.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(owner))

    return __getattr__, __dir__
