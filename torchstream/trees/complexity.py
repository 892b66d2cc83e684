"""Complexity of an incremental tree by the counting rules of the Dynamic Model Tree paper
(§VI-D2 [^1]), a proxy for its interpretability.

For a tree with ``n_inner`` inner nodes and ``n_leaves`` leaves, ``m`` features and ``c``
classes:

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
[^1]: Haug, J., Broelemann, K. and Kasneci, G. (2022). Dynamic model tree for interpretable
    data stream learning. ICDE 2022.
"""

from __future__ import annotations

import operator
from typing import Literal

__all__ = ["LeafModel", "tree_complexity"]

LeafModel = Literal["majority", "linear", "naive_bayes"]


def _count(value: object, name: str, minimum: int) -> int:
    """``value`` as a Python int of at least ``minimum`` (bools rejected)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    try:
        out = operator.index(value)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TypeError(f"{name} must be an integer, got {value!r}") from exc
    if out < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {out}")
    return out


def tree_complexity(
    n_inner: int,
    n_leaves: int,
    *,
    leaf_model: LeafModel = "majority",
    n_features: int | None = None,
    n_classes: int = 2,
) -> dict[str, int]:
    """Number of splits and of parameters of a tree by the §VI-D2 rules (module docstring)."""
    inner = _count(n_inner, "n_inner", 0)
    leaves = _count(n_leaves, "n_leaves", 0)
    c = _count(n_classes, "n_classes", 2)
    if leaf_model == "majority":
        per_leaf_splits, per_leaf_params = 0, 1
    elif leaf_model in ("linear", "naive_bayes"):
        if n_features is None:
            raise ValueError(f"n_features is required for leaf_model={leaf_model!r}")
        m = _count(n_features, "n_features", 1)
        per_leaf_splits = 1 if c == 2 else c
        per_leaf_params = m if c == 2 else m * c
    else:
        raise ValueError(
            f"leaf_model must be 'majority', 'linear' or 'naive_bayes', got {leaf_model!r}"
        )
    return {
        "splits": inner + leaves * per_leaf_splits,
        "params": inner + leaves * per_leaf_params,
    }
