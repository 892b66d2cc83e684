"""Feature-set stability of Nogueira et al. [^1], as used by FIRES [^2] in a sliding window.

Let ``Z`` be the ``r x d`` 0/1 matrix of the last ``r`` selections (row ``i``: which of the
``d`` features were selected at step ``t - r + 1 + i``). With ``p_j`` the column means, the
unbiased selection variance of feature ``j`` is ``s_j^2 = r / (r - 1) * p_j (1 - p_j)`` and::

    FSS = 1 - mean_j(s_j^2) / ( (k / d) * (1 - k / d) ),     k = mean set size = sum_j p_j

The value is 1 when every set in the window is the same; its minimum is ``-1`` (``r = 2``,
disjoint sets of size ``d / 2``). ``k`` is the empirical mean set size, which equals the
number of selected features when every set has the same size (the FIRES case).

References
----------
[^1]: Nogueira, S., Sechidis, K. and Brown, G. (2017). On the stability of feature selection
    algorithms. JMLR 18(174), 1-54.
[^2]: Haug, J., Pawelczyk, M., Broelemann, K. and Kasneci, G. (2020). Leveraging model
    inherent variable importance for stable online feature selection. KDD 2020, 1478-1502.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

__all__ = ["StabilityTracker", "nogueira_stability", "selection_matrix"]


def selection_matrix(
    selections: torch.Tensor | Sequence[Iterable[int]], n_features: int | None = None
) -> torch.Tensor:
    """The ``[r, d]`` boolean indicator matrix of ``selections``.

    ``selections`` is either a 0/1 or boolean tensor ``[r, d]`` (taken as is) or a sequence of
    ``r`` collections of feature indices (``n_features`` then gives ``d``). An index out of
    ``[0, d)``, a repeated index in one set or a non-0/1 entry raises a ``ValueError`` naming
    the set (row).
    """
    if isinstance(selections, torch.Tensor):
        if selections.ndim != 2:
            raise ValueError(
                f"selections must be a [r, d] indicator tensor, got shape {tuple(selections.shape)}"
            )
        if n_features is not None and selections.shape[1] != n_features:
            raise ValueError(
                f"selections has {selections.shape[1]} columns but n_features={n_features}"
            )
        if selections.dtype != torch.bool:
            bad = (selections != 0) & (selections != 1)
            if bad.any():
                r, c = (int(v) for v in bad.nonzero()[0])
                raise ValueError(
                    f"selections row {r}, column {c}: indicator entries must be 0 or 1, "
                    f"got {selections[r, c].item()}"
                )
        return selections.to(torch.bool).cpu()
    if n_features is None:
        raise ValueError("n_features is required when selections are index collections")
    if not isinstance(n_features, int) or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
    rows = list(selections)
    Z = torch.zeros(len(rows), n_features, dtype=torch.bool)
    for i, s in enumerate(rows):
        idx = [int(v) for v in (s.tolist() if isinstance(s, torch.Tensor) else s)]
        if len(set(idx)) != len(idx):
            raise ValueError(f"selections[{i}] repeats a feature index: {sorted(idx)}")
        for j in idx:
            if not 0 <= j < n_features:
                raise ValueError(f"selections[{i}] has feature index {j} outside [0, {n_features})")
        Z[i, idx] = True
    return Z


def nogueira_stability(
    selections: torch.Tensor | Sequence[Iterable[int]], n_features: int | None = None
) -> float:
    """Nogueira's stability of the ``r >= 2`` feature sets ``selections`` (module docstring).

    >>> round(nogueira_stability([{0, 1}, {0, 1}, {0, 2}], n_features=4), 12)
    0.333333333333
    >>> nogueira_stability([{0, 1}, {2, 3}], n_features=4)
    -1.0
    """
    Z = selection_matrix(selections, n_features)
    r, d = Z.shape
    if r < 2:
        raise ValueError(f"stability needs at least 2 selections, got {r}")
    return _stability(Z.to(torch.float64).sum(0), r, d)


def _stability(counts: torch.Tensor, r: int, d: int) -> float:
    """FSS from the per-feature selection counts over ``r`` sets of ``d`` features."""
    p = counts / r
    k = float(p.sum())
    denom = (k / d) * (1.0 - k / d)
    if denom <= 0.0:
        raise ValueError(
            f"stability is undefined when every set is empty or holds all {d} features "
            f"(mean set size {k})"
        )
    s2 = r / (r - 1) * p * (1.0 - p)
    return float(1.0 - s2.mean() / denom)


class StabilityTracker:
    """Nogueira stability over a sliding window of the last ``window`` selections.

    :meth:`update` takes one selection (indices, or a boolean mask ``[d]``) and returns the
    stability of the window, or ``nan`` until ``window`` selections have been seen. Cost
    ``O(d)`` per update (running selection counts).

    Parameters
    ----------
    n_features
        ``d``.
    window
        ``r >= 2``, the number of most recent sets compared (10 in FIRES's paper).

    Examples
    --------
    >>> tracker = StabilityTracker(4, window=3)
    >>> [round(tracker.update(s), 4) for s in ([0, 1], [0, 1], [0, 2], [0, 2], [0, 2])]
    [nan, nan, 0.3333, 0.3333, 1.0]
    """

    def __init__(self, n_features: int, window: int = 10) -> None:
        if not isinstance(n_features, int) or isinstance(n_features, bool) or n_features < 1:
            raise ValueError(f"n_features must be a positive integer, got {n_features!r}")
        if not isinstance(window, int) or isinstance(window, bool) or window < 2:
            raise ValueError(f"window must be an integer >= 2, got {window!r}")
        self.n_features = n_features
        self.window = window
        self._sets: deque[torch.Tensor] = deque()
        self._counts = torch.zeros(n_features, dtype=torch.int64)
        self.value = float("nan")
        self.n_updates = 0

    def update(self, selected: torch.Tensor | Iterable[int]) -> float:
        """Add one selection; returns (and stores in :attr:`value`) the windowed stability."""
        if isinstance(selected, torch.Tensor) and selected.dtype == torch.bool:
            if selected.shape != (self.n_features,):
                raise ValueError(
                    f"selected mask must have shape [{self.n_features}], got "
                    f"{tuple(selected.shape)}"
                )
            row = selected.cpu().clone()
        else:
            row = selection_matrix([selected], self.n_features)[0]
        self._sets.append(row)
        self._counts += row.to(torch.int64)
        if len(self._sets) > self.window:
            self._counts -= self._sets.popleft().to(torch.int64)
        self.n_updates += 1
        if len(self._sets) < self.window:
            self.value = float("nan")
        else:
            self.value = _stability(self._counts.to(torch.float64), self.window, self.n_features)
        return self.value

    def state_dict(self) -> dict[str, object]:
        return {
            "n_features": self.n_features,
            "window": self.window,
            "sets": [s.clone() for s in self._sets],
            "value": self.value,
            "n_updates": self.n_updates,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if int(state["n_features"]) != self.n_features or int(state["window"]) != self.window:
            raise ValueError(
                f"state is for n_features={state['n_features']}, window={state['window']}; "
                f"this tracker has n_features={self.n_features}, window={self.window}"
            )
        self._sets = deque(s.clone().to(torch.bool) for s in state["sets"])
        self._counts = torch.zeros(self.n_features, dtype=torch.int64)
        for s in self._sets:
            self._counts += s.to(torch.int64)
        self.value = float(state["value"])
        self.n_updates = int(state["n_updates"])

    def __repr__(self) -> str:
        return (
            f"StabilityTracker(n_features={self.n_features}, window={self.window}, "
            f"value={self.value:.4f})"
        )
