"""Online feature-selection measures: feature-set stability and reduction rate (A.6 §5.3 [^1]).

* **Feature set stability** (A.6 Eq. 7; Nogueira et al. [^2] over a sliding window, as in
  FIRES [^3]): with ``a_t`` the 0/1 indicator of the features selected at step ``t``, ``w`` the
  window, ``p_j = (1/w) sum_{i<w} a_{t-i,j}`` and ``s_j^2 = w/(w-1) p_j (1 - p_j)``::

      FSS_{t,w} = 1 - mean_j(s_j^2) / ( (k/m) (1 - k/m) )

  ``k`` is the (mean) number of selected features and ``m`` the number of features. The value is
  1 for an unchanged selection, 0 in expectation for uniformly random sets, at least -1.
  The computation is that of :func:`torchstream.select.stability.nogueira_stability`; here
  the undefined cases give **NaN** instead of an error: fewer than 2 sets, or ``k = 0`` or
  ``k = m`` (every set empty, or every set holds all features).
* **Reduction rate**: ``RR = 1 - k / m``, the share of the features *not* selected.

>>> round(feature_set_stability([[0, 1], [0, 1], [0, 2]], n_features=4), 4)
0.3333
>>> feature_set_stability([[0, 1]], n_features=4), feature_set_stability([[], []], n_features=4)
(nan, nan)
>>> reduction_rate(5, n_features=20)
0.75

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
[^2]: Nogueira, S., Sechidis, K. and Brown, G. (2017). On the stability of feature selection
    algorithms. JMLR 18(174), 1-54.
[^3]: Haug, J., Pawelczyk, M., Broelemann, K. and Kasneci, G. (2020). Leveraging model
    inherent variable importance for stable online feature selection. KDD 2020.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import torch

from torchstream.evaluate.measures._common import as_int
from torchstream.select.stability import nogueira_stability, selection_matrix

__all__ = ["feature_set_stability", "reduction_rate", "windowed_feature_set_stability"]

Selections = torch.Tensor | np.ndarray | Sequence[Iterable[int]]


def _matrix(selections: Selections, n_features: int | None) -> torch.Tensor:
    if isinstance(selections, np.ndarray):
        selections = torch.from_numpy(selections)
    return selection_matrix(selections, n_features)


def _defined(Z: torch.Tensor) -> bool:
    return Z.shape[0] >= 2 and bool(Z.any()) and not bool(Z.all())


def feature_set_stability(selections: Selections, n_features: int | None = None) -> float:
    """Nogueira stability of all the sets in ``selections`` (index collections, with
    ``n_features``; or a 0/1 matrix ``[r, m]``). NaN for fewer than 2 sets or ``k in {0, m}``.
    """
    Z = _matrix(selections, n_features)
    return nogueira_stability(Z) if _defined(Z) else float("nan")


def windowed_feature_set_stability(
    selections: Selections, n_features: int | None = None, window: int = 10
) -> np.ndarray:
    """``FSS_{t,w}`` at every step ``t``: the stability of the last ``window`` sets (FIRES used
    ``window = 10``, float ``2``). The first ``window - 1`` steps are NaN."""
    w = as_int(window, "window", minimum=2)
    Z = _matrix(selections, n_features)
    out = np.full(Z.shape[0], np.nan)
    for t in range(w - 1, Z.shape[0]):
        block = Z[t - w + 1 : t + 1]
        if _defined(block):
            out[t] = nogueira_stability(block)
    return out


def reduction_rate(selected: int | Iterable[int] | Any, n_features: int) -> float:
    """``1 - k / m``: ``selected`` is the number ``k`` of selected features, a collection of their
    indices, or a boolean mask ``[m]``."""
    m = as_int(n_features, "n_features", minimum=1)
    if isinstance(selected, (torch.Tensor, np.ndarray)) and selected.dtype in (
        torch.bool,
        np.bool_,
    ):
        if tuple(selected.shape) != (m,):
            raise ValueError(f"selected mask must have shape ({m},), got {tuple(selected.shape)}")
        k = int(selected.sum())
    elif isinstance(selected, Iterable):
        k = int(_matrix([selected], m).sum())
    else:
        k = as_int(selected, "selected")
    if not 0 <= k <= m:
        raise ValueError(f"selected holds {k} features; it must lie in [0, n_features={m}]")
    return 1.0 - k / m
