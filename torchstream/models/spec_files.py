"""Where model specs are found, by name: the built-in specs' tables and the folders searched
for ``<name>.toml`` (imports nothing but the standard library, so ``torchstream list`` names
the specs without importing torch; :mod:`torchstream.models.specs` reads and builds them).

>>> "mlp" in available_specs()
True
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

__all__ = ["BUILTIN_SPECS", "available_specs", "spec_dirs"]

#: Built-in defaults, table by table as in the TOML files of ``models/`` (kept identical to them).
BUILTIN_SPECS: dict[str, dict[str, dict[str, Any]]] = {
    "mlp": {
        "model": {"type": "mlp", "hidden": [64], "activation": "relu", "dropout": 0.0},
        "learner": {"optimizer": "adam", "lr": 0.005, "loss": "auto"},
    },
    "probit": {
        "model": {"type": "probit"},
        "learner": {"optimizer": "adam", "lr": 0.01, "loss": "auto"},
    },
    "soft_tree": {
        "model": {"type": "soft_tree", "depth": 4, "inverse_temperature": 1.0},
        "learner": {"optimizer": "adam", "lr": 0.01, "loss": "auto"},
    },
    "autoencoder": {
        "model": {"type": "autoencoder", "latent": 4, "hidden": [16], "activation": "relu"},
        "learner": {"optimizer": "adam", "lr": 0.005, "loss": "mse"},
    },
}


def spec_dirs() -> list[Path]:
    """Folders searched for ``<name>.toml``, in order (existing ones only)."""
    dirs: list[Path] = []
    env = os.environ.get("TORCHSTREAM_MODELS", "")
    dirs.extend(Path(p).expanduser() for p in env.split(os.pathsep) if p)
    root = Path(__file__).resolve().parents[2]
    if (root / "pyproject.toml").is_file():  # a source tree, not site-packages
        dirs.append(root / "models")
    return [d for d in dirs if d.is_dir()]


def available_specs() -> tuple[str, ...]:
    """Names :func:`load_spec` accepts as a bare name (files found and built-ins), sorted."""
    names = set(BUILTIN_SPECS)
    for folder in spec_dirs():
        names.update(p.stem for p in folder.glob("*.toml") if p.is_file())
    return tuple(sorted(names))
