"""Model specs: a model type with its constructor arguments and learner settings, in TOML.

A spec file has two tables::

    [model]
    type = "mlp"          # mlp | probit | soft_tree | autoencoder
    hidden = [64]         # any other key is a constructor argument of the chosen class
    activation = "relu"

    [learner]
    optimizer = "adam"    # adam | sgd | adamw | rmsprop
    lr = 0.005
    loss = "auto"         # the learner decides what the names mean
    # also allowed: weight_decay, momentum, seed

:func:`load_spec` takes a path to such a file, or a bare name (``"mlp"``) that it looks up, in
order, in the folder(s) of the ``TORCHSTREAM_MODELS`` environment variable (several separated
by ``os.pathsep``), in the ``models/`` folder of the source tree (when the package runs from one), and finally among the built-in
defaults of :data:`BUILTIN_SPECS` (identical to the files shipped in ``models/``), so that an
installed package works without the source tree.

Example
-------
>>> import torch
>>> spec = load_spec("mlp")
>>> spec.type, spec.model["hidden"], spec.learner["optimizer"]
('mlp', [64], 'adam')
>>> spec.build(n_features=5, n_outputs=3)(torch.zeros(2, 5)).shape
torch.Size([2, 3])
"""

from __future__ import annotations

import copy
import inspect
import math
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import nn

from torchstream.models.autoencoder import Autoencoder
from torchstream.models.mlp import MLP
from torchstream.models.probit import Probit
from torchstream.models.soft_tree import SoftDecisionTree
from torchstream.models.spec_files import BUILTIN_SPECS, available_specs, spec_dirs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

__all__ = [
    "BUILTIN_SPECS",
    "LEARNER_KEYS",
    "MODEL_TYPES",
    "OPTIMIZERS",
    "ModelSpec",
    "available_specs",
    "load_spec",
    "spec_dirs",
]

#: Model classes by their ``type`` name in a spec.
MODEL_TYPES: dict[str, type[nn.Module]] = {
    "mlp": MLP,
    "probit": Probit,
    "soft_tree": SoftDecisionTree,
    "autoencoder": Autoencoder,
}

#: Keys allowed in the ``[learner]`` table.
LEARNER_KEYS: tuple[str, ...] = ("optimizer", "lr", "loss", "weight_decay", "momentum", "seed")

#: Values allowed for ``[learner] optimizer``.
OPTIMIZERS: tuple[str, ...] = ("adam", "sgd", "adamw", "rmsprop")

_BUILD_ARGS = ("self", "n_features", "n_outputs")
_BUILTIN_SOURCE = "<built-in>"


def _model_keys(cls: type[nn.Module]) -> tuple[str, ...]:
    """Constructor arguments of ``cls`` that a spec may set."""
    params = inspect.signature(cls.__init__).parameters
    return tuple(p for p in params if p not in _BUILD_ARGS)


def _check_learner(learner: Mapping[str, Any], where: str) -> None:
    for key in learner:
        if key not in LEARNER_KEYS:
            raise ValueError(
                f"{where}: unknown key {key!r} in [learner] (allowed: {', '.join(LEARNER_KEYS)})"
            )
    if "optimizer" in learner and learner["optimizer"] not in OPTIMIZERS:
        raise ValueError(
            f"{where}: [learner] optimizer must be one of {', '.join(OPTIMIZERS)}, "
            f"got {learner['optimizer']!r}"
        )
    for key, lowest, strict in (
        ("lr", 0.0, True),
        ("weight_decay", 0.0, False),
        ("momentum", 0.0, False),
    ):
        if key not in learner:
            continue
        value = learner[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        ok = ok and math.isfinite(value) and (value > lowest if strict else value >= lowest)
        if not ok:
            bound = "> 0" if strict else ">= 0"
            raise ValueError(f"{where}: [learner] {key} must be a number {bound}, got {value!r}")
    if "loss" in learner and not isinstance(learner["loss"], str):
        raise ValueError(f"{where}: [learner] loss must be a string, got {learner['loss']!r}")
    if "seed" in learner and (
        not isinstance(learner["seed"], int) or isinstance(learner["seed"], bool)
    ):
        raise ValueError(f"{where}: [learner] seed must be an integer, got {learner['seed']!r}")


@dataclass(frozen=True)
class ModelSpec:
    """A parsed, validated model spec.

    Attributes
    ----------
    name
        The spec's name (the file's stem, or the built-in name).
    type
        Key of :data:`MODEL_TYPES`.
    model
        Constructor keyword arguments of the model class (without ``n_features`` /
        ``n_outputs``, which :meth:`build` supplies).
    learner
        The ``[learner]`` table as written (keys among :data:`LEARNER_KEYS`).
    source
        The file the spec came from, or ``"<built-in>"``.
    """

    name: str
    type: str
    model: dict[str, Any]
    learner: dict[str, Any]
    source: str = _BUILTIN_SOURCE

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], name: str, source: str = _BUILTIN_SOURCE
    ) -> ModelSpec:
        """Validate the tables of a spec (as parsed from TOML) and build a :class:`ModelSpec`.

        Raises ``ValueError`` naming the offending key and ``source`` for an unknown table, a
        missing or unknown model ``type``, a ``[model]`` key that is not a constructor argument
        of the chosen class, or an unknown / invalid ``[learner]`` key.
        """
        where = f"model spec {name!r} ({source})"
        for key, value in data.items():
            if key not in ("model", "learner"):
                kind = "table" if isinstance(value, Mapping) else "key"
                raise ValueError(
                    f"{where}: unknown top-level {kind} {key!r} (allowed: [model], [learner])"
                )
            if not isinstance(value, Mapping):
                raise ValueError(f"{where}: {key!r} must be a table ([{key}])")  # noqa: TRY004
        if "model" not in data:
            raise ValueError(f"{where}: missing [model] table")
        model = copy.deepcopy(dict(data["model"]))
        learner = copy.deepcopy(dict(data.get("learner", {})))

        model_type = model.pop("type", None)
        if model_type is None:
            raise ValueError(f"{where}: [model] has no 'type' (one of {', '.join(MODEL_TYPES)})")
        if model_type not in MODEL_TYPES:
            raise ValueError(
                f"{where}: unknown model type {model_type!r} in [model] type "
                f"(known: {', '.join(MODEL_TYPES)})"
            )
        allowed = _model_keys(MODEL_TYPES[model_type])
        for key in model:
            if key in _BUILD_ARGS:
                raise ValueError(
                    f"{where}: key {key!r} in [model] is not allowed; it is set by build()"
                )
            if key not in allowed:
                raise ValueError(
                    f"{where}: unknown key {key!r} in [model] for type {model_type!r} "
                    f"(allowed: {', '.join(allowed)})"
                )
        _check_learner(learner, where)
        return cls(name=name, type=model_type, model=model, learner=learner, source=source)

    def build(self, n_features: int, n_outputs: int = 1, task: str | None = None) -> nn.Module:
        """A fresh model for inputs of width ``n_features`` and ``n_outputs`` outputs.

        ``n_outputs`` is ignored by ``autoencoder`` (its output is the reconstruction, of width
        ``n_features``). ``task`` (``"classification"`` / ``"regression"``) is passed on to
        models that take one (``soft_tree``) and ignored by the others; it must agree with a
        ``task`` the spec sets. Invalid argument values raise ``ValueError`` / ``TypeError``
        naming the spec.
        """
        cls = MODEL_TYPES[self.type]
        kwargs = copy.deepcopy(self.model)
        params = inspect.signature(cls.__init__).parameters
        where = f"model spec {self.name!r} ({self.source})"
        if task is not None and "task" in params:
            if kwargs.get("task", task) != task:
                raise ValueError(
                    f"{where}: sets task={kwargs['task']!r} but build() was asked for {task!r}"
                )
            kwargs["task"] = task
        if "n_outputs" in params:
            kwargs["n_outputs"] = n_outputs
        try:
            return cls(n_features, **kwargs)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from err
        except TypeError as err:
            raise TypeError(f"{where}: {err}") from err


def _read(path: Path, name: str) -> ModelSpec:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"model spec {name!r} ({path}): invalid TOML: {err}") from err
    return ModelSpec.from_dict(data, name=name, source=str(path))


def _is_bare_name(name: str) -> bool:
    return not name.endswith(".toml") and "/" not in name and os.sep not in name


def load_spec(name_or_path: str | Path) -> ModelSpec:
    """Load a model spec by bare name (``"mlp"``) or from a TOML file path.

    Raises ``FileNotFoundError`` listing the available names when nothing matches, and
    ``ValueError`` (naming the key and the file) for an invalid spec.
    """
    if isinstance(name_or_path, str) and _is_bare_name(name_or_path):
        name = name_or_path
        for folder in spec_dirs():
            path = folder / f"{name}.toml"
            if path.is_file():
                return _read(path, name)
        if name in BUILTIN_SPECS:
            return ModelSpec.from_dict(BUILTIN_SPECS[name], name=name)
        looked = ", ".join(str(d) for d in spec_dirs()) or "no spec folder found"
        raise FileNotFoundError(
            f"no model spec named {name!r} (looked in: {looked}; and the built-ins); "
            f"available specs: {', '.join(available_specs())}"
        )
    path = Path(name_or_path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(
            f"model spec file {str(path)!r} not found; "
            f"available specs: {', '.join(available_specs())}"
        )
    return _read(path, path.stem)
