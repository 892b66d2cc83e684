"""Model complexity as a proxy for interpretability (A.6 §5.1.5 [^1]; DMT paper A.4 [^2]).

Lower complexity is read as more interpretable; track it over time. :func:`tree_complexity`
lives with the trees (:mod:`torchstream.trees.complexity`) and is re-exported here. The counting rules of
the Dynamic Model Tree paper (§VI-D2) for an incremental tree with ``n_inner`` inner nodes and
``n_leaves`` leaves, ``m`` features and ``c`` classes:

* **splits**: 1 per inner node; a majority-class leaf adds 0, a leaf holding a model adds 1
  (binary task) or ``c`` (``c > 2`` classes), the model being a final split of the data;
* **parameters**: 1 per inner node (the split value); a majority-class leaf adds 1, a leaf
  holding a linear model or Naive Bayes adds ``m`` (``m * c`` for ``c > 2`` classes: the
  parameters of each class are counted).

>>> tree_complexity(3, 4)
{'splits': 3, 'params': 7}
>>> tree_complexity(3, 4, leaf_model="linear", n_features=10)
{'splits': 7, 'params': 43}

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
[^2]: Haug, J., Broelemann, K. and Kasneci, G. (2022). Dynamic model tree for interpretable
    data stream learning. ICDE 2022.
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
