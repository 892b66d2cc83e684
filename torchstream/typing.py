"""Shared type aliases and the small structural types explainers accept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

import torch

#: A model as explainers see it: float rows ``[n, d]`` -> outputs ``[n]`` or ``[n, k]``
#: (class probabilities for classifiers). Pure: calling it never trains the model.
ModelFn = Callable[[torch.Tensor], torch.Tensor]


class BatchView(Protocol):
    """One batch as a plug-in's ``on_batch`` sees it (the runner passes a
    :class:`torchstream.step.Batch`): its ``step`` in the run, the stream index
    ``start`` of its first row, inputs ``X [B, d]``, targets ``y [B]``, the prediction
    ``y_pred`` made before learning, and the ``learner`` as a model function."""

    @property
    def step(self) -> int: ...

    @property
    def start(self) -> int: ...

    @property
    def X(self) -> torch.Tensor: ...

    @property
    def y(self) -> torch.Tensor: ...

    @property
    def y_pred(self) -> torch.Tensor: ...

    @property
    def learner(self) -> ModelFn: ...

    @property
    def size(self) -> int: ...


@runtime_checkable
class Storage(Protocol):
    """Rows kept for imputation: ``update(X [n, d])`` adds rows, ``sample(n) -> [n, d]`` draws
    stored rows (the reservoirs and fresh samplers of :mod:`torchstream.explain.storage`)."""

    def update(self, X: torch.Tensor) -> None: ...

    def sample(self, n: int) -> torch.Tensor: ...


@runtime_checkable
class Imputer(Protocol):
    """Fills removed features: ``impute(x [B, d], mask [B, R, d], storage) -> [B, R, d]``
    (``mask`` True where a feature is present)."""

    def impute(self, x: torch.Tensor, mask: torch.Tensor, storage: Storage) -> torch.Tensor: ...


@runtime_checkable
class Sampler(Imputer, Protocol):
    """An imputer that keeps its own rows (a conditional sampler): ``impute`` as
    :class:`Imputer` and ``update(X [n, d])``."""

    def update(self, X: torch.Tensor) -> None: ...


__all__ = ["BatchView", "Imputer", "ModelFn", "Sampler", "Storage"]
