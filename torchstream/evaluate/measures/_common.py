"""Input checks shared by the measures: 1-d float series, integer arguments, positions."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

__all__ = ["Series", "as_int", "as_series", "to_numpy"]

#: One value per step: a sequence, a numpy array or a tensor (NaN: a step not evaluated).
Series = Sequence[float] | np.ndarray | torch.Tensor


def to_numpy(values: Series, name: str) -> np.ndarray:
    """``values`` (tensor, array or sequence) as a numpy array (tensors are detached, on CPU)."""
    if isinstance(values, torch.Tensor):
        return values.detach().cpu().numpy()
    try:
        return np.asarray(values)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{name} must be array-like, got {type(values).__name__}") from exc


def as_series(values: Series, name: str) -> np.ndarray:
    """``values`` as a 1-d float64 array (NaN allowed: a step that was not evaluated)."""
    arr = to_numpy(values, name)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-d (one value per step), got shape {arr.shape}")
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise TypeError(f"{name} must hold numbers, got dtype {arr.dtype}")
    arr = arr.astype(np.float64)
    if np.isinf(arr).any():
        i = int(np.flatnonzero(np.isinf(arr))[0])
        raise ValueError(f"{name}[{i}] is infinite")
    return arr


def as_int(value: Any, name: str, *, minimum: int | None = None) -> int:
    """``value`` as a Python int (bools rejected), at least ``minimum`` when given."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        out = operator.index(value)
    except TypeError as exc:
        raise TypeError(f"{name} must be an integer, got {value!r}") from exc
    if minimum is not None and out < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {out}")
    return out
