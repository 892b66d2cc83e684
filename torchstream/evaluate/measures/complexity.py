"""Model complexity as a proxy for interpretability (A.6 §5.1.5 [^1]).

Lower complexity is read as more interpretable; track it over time. :func:`count_parameters`
counts a module's parameters; :func:`tree_complexity` (the Dynamic Model Tree paper's counting
rules for an incremental tree) lives with the trees, :mod:`torchstream.trees.complexity`, and is
re-exported here.

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
"""

from __future__ import annotations

import torch

from torchstream.trees.complexity import LeafModel, tree_complexity

__all__ = ["LeafModel", "count_parameters", "tree_complexity"]


def count_parameters(
    model: torch.nn.Module | torch.Tensor, *, nonzero: bool = False, atol: float = 0.0
) -> int:
    """Number of parameters of a module (or elements of a tensor); with ``nonzero``, only those
    with ``|value| > atol`` (e.g. the non-zero weights of a sparse linear model)."""
    if isinstance(model, torch.Tensor):
        tensors = [model]
    elif isinstance(model, torch.nn.Module):
        tensors = list(model.parameters())
    else:
        raise TypeError(f"model must be a torch Module or Tensor, got {type(model).__name__}")
    if float(atol) < 0:
        raise ValueError(f"atol must be >= 0, got {atol!r}")
    if not nonzero:
        return sum(t.numel() for t in tensors)
    return sum(int((t.detach().abs() > atol).sum()) for t in tensors)
