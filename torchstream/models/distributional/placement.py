"""Putting a batch where a Gaussian head computes: its device and dtype."""

from __future__ import annotations

from typing import TypeVar, cast

import torch

__all__ = ["to_head"]

#: The targets' type: a tensor is moved, anything else passes through unchanged.
_Y = TypeVar("_Y")


def to_head(head: object, X: torch.Tensor, y: _Y) -> tuple[torch.Tensor, _Y]:
    """``X`` (and a tensor ``y``) moved to the head's ``device`` and ``X`` cast to its ``dtype``
    (a runner's batches live on the learner's device, which may differ); an attribute the head
    lacks leaves that part unchanged.

    >>> class Head:
    ...     dtype, device = torch.float64, torch.device("cpu")
    >>> X, y = to_head(Head(), torch.ones(2, 3), torch.tensor([0, 1]))
    >>> X.dtype, y.tolist()
    (torch.float64, [0, 1])
    """
    dtype, device = getattr(head, "dtype", None), getattr(head, "device", None)
    X = X.to(
        dtype=dtype if isinstance(dtype, torch.dtype) else X.dtype,
        device=device if isinstance(device, torch.device) else X.device,
    )
    if isinstance(y, torch.Tensor) and isinstance(device, torch.device):
        y = cast(_Y, y.to(device))
    return X, y
