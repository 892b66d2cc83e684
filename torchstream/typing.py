"""Shared type aliases."""

from __future__ import annotations

from collections.abc import Callable

import torch

#: A model as explainers see it: float rows ``[n, d]`` -> outputs ``[n]`` or ``[n, k]``
#: (class probabilities for classifiers). Pure: calling it never trains the model.
ModelFn = Callable[[torch.Tensor], torch.Tensor]

__all__ = ["ModelFn"]
