"""FIRES: uncertainty-aware online feature weights and selection (Haug et al., KDD 2020 [^1]).

A model whose parameters are independent Gaussians ``theta_j ~ N(mu_j, sigma_j)`` (a
*parameter-distribution head*, see :mod:`torchstream.models.distributional`) is trained online
on the log marginal likelihood. ``mu_j`` is read as the importance of feature ``j`` and
``sigma_j`` as the uncertainty about it. FIRES weighs feature ``j`` by the maximiser of the
concave objective ``omega mu^2 - lambda_s omega sigma^2 - lambda_r omega^2``::

    omega_j = (mu_j^2 - lambda_s sigma_j^2) / (2 lambda_r)

and selects the ``n_selected`` features with the largest weights. The weights satisfy the
paper's properties: ``mu_j = 0 => omega_j <= 0``; at equal ``|mu|`` a larger ``sigma`` gives a
smaller weight; at equal ``sigma`` a larger ``|mu|`` gives a larger weight; the sign of ``mu``
does not matter. FIRES itself only needs the per-feature ``(mu, sigma)``, so it works with any
head (``feature_stats()``) or with raw tensors.

User features that span several encoded columns (a one-hot block, a numeric feature with its
missing-value indicator) are weighed as a whole with ``feature_groups``. The group ``g`` gets
the maximiser of the same objective with one weight shared by all its columns,
``sum_{c in g} (omega_g mu_c^2 - lambda_s omega_g sigma_c^2) - lambda_r omega_g^2``::

    omega_g = (mu_g^2 - lambda_s sigma_g^2) / (2 lambda_r),
    mu_g^2 = sum_{c in g} mu_c^2,   sigma_g^2 = sum_{c in g} sigma_c^2,

i.e. the column formula applied to the aggregated distribution ``(||mu_g||, ||sigma_g||)``, which
equals ``sum_{c in g} omega_c``. A signed sum of the ``mu_c`` would cancel for a one-hot block
whose categories push in opposite directions (the block then matters most); the norm does not,
keeps the sign invariance and properties P1 / P2 on ``(mu_g, sigma_g)``, and a one-column group
gets exactly its column's weight.

References
----------
[^1]: Haug, J., Pawelczyk, M., Broelemann, K. and Kasneci, G. (2020). Leveraging model
    inherent variable importance for stable online feature selection. KDD 2020, 1478-1502.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import torch

from torchstream.base import FeatureSelectorBase
from torchstream.explain.groups import FeatureGroups, check_feature_groups
from torchstream.models.distributional import ParameterDistribution

__all__ = ["FIRES", "fires_group_weights", "fires_weights", "minmax_scale", "top_k_stable"]


def fires_weights(
    mu: torch.Tensor, sigma: torch.Tensor, lambda_s: float = 0.01, lambda_r: float = 0.01
) -> torch.Tensor:
    """The closed-form FIRES weights ``(mu^2 - lambda_s sigma^2) / (2 lambda_r)``, element-wise.

    >>> w = fires_weights(torch.tensor([0.0, 0.5, -0.5]), torch.tensor([1.0, 1.0, 2.0]))
    >>> [round(v, 4) for v in w.tolist()]
    [-0.5, 12.0, 10.5]
    """
    return (mu * mu - lambda_s * (sigma * sigma)) / (2.0 * lambda_r)


def fires_group_weights(
    mu: torch.Tensor,
    sigma: torch.Tensor,
    groups: FeatureGroups,
    lambda_s: float = 0.01,
    lambda_r: float = 0.01,
) -> torch.Tensor:
    """FIRES weights ``[G]`` of column groups: ``(sum mu_c^2 - lambda_s sum sigma_c^2) /
    (2 lambda_r)`` over the columns ``c`` of each group (module docstring), i.e. the sum of the
    column weights.

    >>> g = check_feature_groups({"colour": [0, 2], "size": [1]}, 3)
    >>> mu, sigma = torch.tensor([0.3, 0.5, -0.4]), torch.tensor([1.0, 1.0, 2.0])
    >>> [round(v, 4) for v in fires_group_weights(mu, sigma, g).tolist()]
    [10.0, 12.0]
    """
    return groups.sum_columns(fires_weights(mu, sigma, lambda_s, lambda_r))


def minmax_scale(w: torch.Tensor) -> torch.Tensor:
    """``(w - min w) / (max w - min w)``; all zeros when every entry is equal (no NaN).

    The map is increasing, so the order of the entries is kept.

    >>> minmax_scale(torch.tensor([-0.5, 0.0, 1.5])).tolist()
    [0.0, 0.25, 1.0]
    >>> minmax_scale(torch.tensor([2.0, 2.0])).tolist()
    [0.0, 0.0]
    """
    lo, hi = w.min(), w.max()
    span = hi - lo
    if span <= 0:
        return torch.zeros_like(w)
    return (w - lo) / span


#: Up to this many weights the selection sorts them all (cheaper than a top-k and a filter).
_FULL_SORT_MAX = 1024


def top_k_stable(w: torch.Tensor, k: int) -> torch.Tensor:
    """The indices of the ``k`` largest entries of ``w [n]``, largest first, ties towards the
    lower index: exactly ``torch.sort(w, descending=True, stable=True).indices[:k]``, without
    sorting all ``n`` entries (the ``k``-th largest value from ``torch.topk``, then a stable
    sort of the entries at or above it).

    >>> top_k_stable(torch.tensor([0.5, 2.0, 0.5, 3.0, 0.5]), 3).tolist()
    [3, 1, 0]
    """
    n = w.shape[0]
    # few entries: one sort is cheaper; NaN / inf: the full sort's own order
    if k >= n or n <= _FULL_SORT_MAX or not bool(torch.isfinite(w).all()):
        return torch.sort(w, descending=True, stable=True).indices[:k].clone()
    threshold = torch.topk(w, k, sorted=False).values.min()
    candidates = (w >= threshold).nonzero().flatten()  # ascending indices
    order = torch.sort(w[candidates], descending=True, stable=True).indices
    return candidates[order[:k]]


def _positive(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a positive number, got {value!r}")
    if not math.isfinite(value) or not value > 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


class FIRES(FeatureSelectorBase):
    """Online feature weighting and selection from a parameter-distribution head.

    Per step (``learn``): the head takes one training step on the batch, then FIRES reads the
    head's per-feature ``(mu, sigma)`` (``feature_stats()``) and recomputes the weights and the
    selection. :meth:`update` does the second half from raw ``(mu, sigma)`` tensors.

    Ties are broken towards the lower feature index (a stable descending sort of the raw,
    unscaled weights), so the initial state ``mu = 0, sigma = 1`` (all weights ``-lambda_s /
    (2 lambda_r)``) selects features ``0 .. n_selected - 1``.

    Parameters
    ----------
    head
        A parameter-distribution head (``learn(X, y)``, ``feature_stats()``, ``n_features``),
        e.g. :class:`~torchstream.models.distributional.ProbitHead`; ``None`` to feed
        ``(mu, sigma)`` through :meth:`update` only.
    n_selected
        Number of features to select, ``1 <= n_selected <= d``.
    lambda_s
        Uncertainty penalty (> 0; paper default 0.01).
    lambda_r
        L2 regularisation of the weights (> 0; paper default 0.01).
    scale_weights
        Min-max scale the reported :attr:`weights` to [0, 1] (all zeros when all weights are
        equal). The selection is the same either way.
    feature_names
        Names for :meth:`as_dict` and plots (default ``"x0", "x1", ...``).
    history
        How many of the most recent steps of weights / selections to keep (``None``: all).
    feature_groups
        ``{feature name: column indices}`` (e.g. :meth:`torchstream.schema.Schema.feature_groups`),
        every column in exactly one group. Then ``n_selected`` counts *features*: the
        ``n_selected`` groups with the largest group weights (module docstring) are selected as
        whole blocks, and :attr:`selected` / :attr:`mask` hold all their columns. ``None``: every
        column is a feature (the column-level behaviour).

    Attributes
    ----------
    raw_weights
        The unscaled weights ``omega`` ``[d]`` (float64) of the last update.
    weights
        ``omega``, min-max scaled if ``scale_weights``.
    selected
        Indices ``[n_selected]`` of the selected features, best first (``None`` before the
        first update). With ``feature_groups``: the columns of the selected groups, the groups
        best first, each group's columns in the given order.
    feature_weights
        With ``feature_groups``: ``{feature name: group weight}`` (min-max scaled over the groups
        if ``scale_weights``); ``None`` without groups or before the first update.
    selected_features
        With ``feature_groups``: the names of the ``n_selected`` selected groups, best first
        (ties towards the earlier group); ``None`` without groups or before the first update.
    n_updates
        Number of updates so far.

    Examples
    --------
    A Probit head on a seeded stream where only features 0 and 3 matter:

    >>> import torch
    >>> from torchstream.models.distributional import ProbitHead
    >>> g = torch.Generator().manual_seed(0)
    >>> fires = FIRES(ProbitHead(6), n_selected=2)
    >>> for _ in range(5):
    ...     X = torch.randn(100, 6, generator=g, dtype=torch.float64)
    ...     fires.learn(X, (X[:, 0] - X[:, 3] > 0).long())
    >>> fires.selected.tolist(), [round(w, 3) for w in fires.weights.tolist()]
    ([0, 3], [1.0, 0.0, 0.012, 0.732, 0.002, 0.004])

    From raw ``(mu, sigma)``:

    >>> fires = FIRES(n_selected=2, feature_names=["a", "b", "c"], scale_weights=False)
    >>> fires.update(torch.tensor([0.5, 0.0, -0.3]), torch.tensor([1.0, 1.0, 0.1]))
    >>> fires.selected.tolist(), {k: round(v, 3) for k, v in fires.as_dict().items()}
    ([0, 2], {'a': 12.0, 'b': -0.5, 'c': 4.495})

    With a one-hot feature ``colour`` over columns 0 and 2, ``n_selected`` counts features:

    >>> fires = FIRES(n_selected=1, scale_weights=False,
    ...               feature_groups={"colour": [0, 2], "size": [1]})
    >>> fires.update(torch.tensor([0.25, 0.5, -0.25]), torch.tensor([1.0, 1.0, 1.0]))
    >>> fires.feature_weights, fires.selected_features, fires.selected.tolist()
    ({'colour': 5.25, 'size': 12.0}, ['size'], [1])
    """

    def __init__(
        self,
        head: ParameterDistribution | None = None,
        *,
        n_selected: int,
        lambda_s: float = 0.01,
        lambda_r: float = 0.01,
        scale_weights: bool = True,
        feature_names: Sequence[Hashable] | None = None,
        history: int | None = 1000,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        if isinstance(n_selected, bool) or not isinstance(n_selected, int) or n_selected < 1:
            raise ValueError(f"n_selected must be an integer >= 1, got {n_selected!r}")
        self.lambda_s = _positive(lambda_s, "lambda_s")
        self.lambda_r = _positive(lambda_r, "lambda_r")
        if history is not None and (
            isinstance(history, bool) or not isinstance(history, int) or history < 1
        ):
            raise ValueError(f"history must be a positive integer or None, got {history!r}")
        self.head = head
        n_features: int | None = None
        if head is not None:
            for attr in ("learn", "feature_stats"):
                if not callable(getattr(head, attr, None)):
                    raise TypeError(
                        f"head must have learn(X, y) and feature_stats() (a parameter-"
                        f"distribution head); {type(head).__name__} has no {attr}()"
                    )
            try:
                mu0, _ = head.feature_stats()
            except NotImplementedError as e:
                raise ValueError(
                    f"head {type(head).__name__} has no mapping of its parameters to features "
                    f"(feature_stats() is not implemented: {e})"
                ) from None
            n_features = int(mu0.shape[0])
        if feature_names is not None:
            names = list(feature_names)
            if n_features is not None and len(names) != n_features:
                raise ValueError(
                    f"feature_names has {len(names)} names but the head has {n_features} features"
                )
            if len(set(names)) != len(names):
                raise ValueError("feature_names must be unique")
            n_features = len(names)
            self._names: list[Hashable] | None = names
        else:
            self._names = None
        self.n_features = n_features
        self.n_selected = n_selected
        if feature_groups is not None and not isinstance(feature_groups, Mapping):
            raise TypeError(
                f"feature_groups must be a mapping {{name: column indices}}, got "
                f"{type(feature_groups).__name__}"
            )
        self.feature_groups = None if feature_groups is None else dict(feature_groups)
        self.groups: FeatureGroups | None = None
        if n_features is not None:
            self._check_k(n_features)
        self.scale_weights = bool(scale_weights)
        self.history_size = history
        self.raw_weights: torch.Tensor | None = None
        self.raw_feature_weights: torch.Tensor | None = None
        self.selected: torch.Tensor | None = None
        self.selected_groups: torch.Tensor | None = None
        self.n_updates = 0
        self._history: deque[tuple[int, torch.Tensor, torch.Tensor]] = deque(maxlen=history)

    # ------------------------------------------------------------------ checks
    def _check_k(self, d: int) -> None:
        if self.feature_groups is not None:
            self.groups = check_feature_groups(self.feature_groups, d)
            if self.n_selected > self.groups.n_groups:
                raise ValueError(
                    f"n_selected={self.n_selected} exceeds the number of feature groups "
                    f"{self.groups.n_groups}"
                )
            return
        if self.n_selected > d:
            raise ValueError(f"n_selected={self.n_selected} exceeds the number of features {d}")

    def set_feature_groups(self, feature_groups: Mapping[str, Sequence[int]]) -> None:
        """Weigh and select ``feature_groups`` (see the class parameters) from now on; only
        before the first update, since the kept history is per selection."""
        if self.n_updates or self.raw_weights is not None:
            raise RuntimeError("feature_groups can only be set before the first update")
        if not isinstance(feature_groups, Mapping):
            raise TypeError(
                f"feature_groups must be a mapping {{name: column indices}}, got "
                f"{type(feature_groups).__name__}"
            )
        old = self.feature_groups
        self.feature_groups = dict(feature_groups)
        if self.n_features is not None:
            try:
                self._check_k(self.n_features)
            except (TypeError, ValueError):
                self.feature_groups = old
                raise
        self._history = deque(maxlen=self.history_size)

    @property
    def _history_width(self) -> int:
        """Columns per history row of ``selected``: ``n_selected``, or with groups the most
        columns ``n_selected`` groups can have."""
        if self.groups is None:
            return self.n_selected
        sizes = sorted((len(m) for m in self.groups.members), reverse=True)
        return sum(sizes[: self.n_selected])

    def _check_stats(self, mu: Any, sigma: Any) -> tuple[torch.Tensor, torch.Tensor]:
        if not isinstance(mu, torch.Tensor) or not isinstance(sigma, torch.Tensor):
            raise TypeError(
                f"mu and sigma must be tensors, got {type(mu).__name__}, {type(sigma).__name__}"
            )
        if mu.ndim != 1:
            raise ValueError(f"mu must be 1-dimensional [d], got shape {tuple(mu.shape)}")
        if sigma.shape != mu.shape:
            raise ValueError(
                f"sigma must have the shape of mu {tuple(mu.shape)}, got {tuple(sigma.shape)}"
            )
        d = int(mu.shape[0])
        if self.n_features is None:
            self._check_k(d)
            self.n_features = d
        elif d != self.n_features:
            raise ValueError(f"mu has {d} features, expected {self.n_features}")
        mu = mu.detach().to(torch.float64)
        sigma = sigma.detach().to(torch.float64)
        # one fused read: a NaN or inf makes a sum non-finite; the offending entry is only
        # looked for when a sum is not finite (or finite values overflowed it) or sigma < 0
        total_mu, total_sigma, low = torch.stack([mu.sum(), sigma.sum(), sigma.min()]).tolist()
        if math.isfinite(total_mu) and math.isfinite(total_sigma) and low >= 0:
            return mu, sigma
        for name, v in (("mu", mu), ("sigma", sigma)):
            bad = ~torch.isfinite(v)
            if bad.any():
                j = int(bad.nonzero()[0])
                raise ValueError(f"{name}[{j}] is not finite ({v[j].item()})")
        if (sigma < 0).any():
            j = int((sigma < 0).nonzero()[0])
            raise ValueError(f"sigma[{j}] is negative ({sigma[j].item()}); sigma is a std dev")
        return mu, sigma

    # ------------------------------------------------------------------ updates
    def learn(self, X: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """One step: the head learns from ``(X, y)``, then :meth:`update` from its
        ``feature_stats()``."""
        if self.head is None:
            raise RuntimeError("FIRES has no head: pass (mu, sigma) to update() instead")
        self.head.learn(X, y)
        mu, sigma = self.head.feature_stats()
        self.update(mu, sigma)

    def update(self, mu: torch.Tensor, sigma: torch.Tensor) -> None:
        """Recompute weights and selection from per-feature ``mu [d]`` and ``sigma [d]``."""
        mu, sigma = self._check_stats(mu, sigma)
        omega = fires_weights(mu, sigma, self.lambda_s, self.lambda_r)
        self.raw_weights = omega
        if self.groups is None:
            self.selected = top_k_stable(omega, self.n_selected)
            row = self.selected.cpu()
        else:
            omega_g = self.groups.sum_columns(omega)
            self.raw_feature_weights = omega_g
            top = top_k_stable(omega_g, self.n_selected)
            self.selected_groups = top.clone()
            cols = [c for g in top.tolist() for c in self.groups.members[g]]
            self.selected = torch.tensor(cols, dtype=torch.long, device=omega.device)
            # rows padded to a fixed width by repeating the best column: as a set, the selection
            pad = self._history_width - len(cols)
            row = torch.tensor(cols + [cols[0]] * pad, dtype=torch.long)
        weights = self.weights
        assert weights is not None  # raw_weights was set above
        self._history.append((self.n_updates, weights.cpu().clone(), row))
        self.n_updates += 1

    # ------------------------------------------------------------------ views
    @property
    def feature_names(self) -> list[Hashable]:
        if self._names is not None:
            return list(self._names)
        return [f"x{j}" for j in range(self.n_features or 0)]

    @property
    def weights(self) -> torch.Tensor | None:
        if self.raw_weights is None:
            return None
        return minmax_scale(self.raw_weights) if self.scale_weights else self.raw_weights

    @property
    def mask(self) -> torch.Tensor | None:
        """Boolean ``[d]``: True for the selected features (``None`` before the first update)."""
        if self.selected is None or self.n_features is None:
            return None
        m = torch.zeros(self.n_features, dtype=torch.bool, device=self.selected.device)
        m[self.selected] = True
        return m

    @property
    def feature_weights(self) -> dict[str, float] | None:
        """``{feature name: group weight}`` with ``feature_groups`` (scaled like :attr:`weights`);
        ``None`` without groups or before the first update."""
        if self.groups is None or self.raw_feature_weights is None:
            return None
        w = self.raw_feature_weights
        w = minmax_scale(w) if self.scale_weights else w
        return dict(zip(self.groups.names, w.tolist()))

    @property
    def selected_features(self) -> list[str] | None:
        """Names of the ``n_selected`` selected feature groups, best first; ``None`` without
        groups or before the first update."""
        if self.groups is None or self.selected_groups is None:
            return None
        return [self.groups.names[g] for g in self.selected_groups.tolist()]

    def as_dict(self) -> dict[Hashable, float]:
        """``{feature name: weight}`` (scaled if ``scale_weights``); empty before any update."""
        w = self.weights
        if w is None:
            return {}
        return dict(zip(self.feature_names, w.tolist()))

    @property
    def history(self) -> dict[str, object]:
        """The kept steps: ``{"steps": [t], "weights": [n, d], "selected": [n, k],
        "feature_names": [...], "n_features": d}`` (weights as reported, on the CPU). With
        ``feature_groups`` a ``selected`` row holds the selected columns, padded to the widest
        possible selection by repeating its first entry (read as a set it is the selection)."""
        d = self.n_features or 0
        if self._history:
            weights = torch.stack([w for _, w, _ in self._history])
            selected = torch.stack([s for _, _, s in self._history])
        else:
            weights = torch.zeros(0, d, dtype=torch.float64)
            selected = torch.zeros(0, self._history_width, dtype=torch.long)
        return {
            "steps": [t for t, _, _ in self._history],
            "weights": weights,
            "selected": selected,
            "feature_names": self.feature_names,
            "n_features": d,
        }

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        """Weights, selection, history and the head's state: resume is exact."""
        return {
            "n_features": self.n_features,
            "n_selected": self.n_selected,
            "raw_weights": None if self.raw_weights is None else self.raw_weights.clone(),
            "selected": None if self.selected is None else self.selected.clone(),
            "raw_feature_weights": None
            if self.raw_feature_weights is None
            else self.raw_feature_weights.clone(),
            "selected_groups": None
            if self.selected_groups is None
            else self.selected_groups.clone(),
            "n_updates": self.n_updates,
            "history": [(t, w.clone(), s.clone()) for t, w, s in self._history],
            "head": None if self.head is None else self.head.state_dict(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if int(state["n_selected"]) != self.n_selected:
            raise ValueError(
                f"state has n_selected={state['n_selected']}, this FIRES has {self.n_selected}"
            )
        d = state["n_features"]
        if d is not None and self.n_features is not None and int(d) != self.n_features:
            raise ValueError(f"state has {d} features, this FIRES has {self.n_features}")
        if (state["head"] is None) != (self.head is None):
            raise ValueError("state and this FIRES differ in having a head")
        if self.head is not None:
            self.head.load_state_dict(state["head"])
        self.n_features = None if d is None else int(d)
        rw, sel = state["raw_weights"], state["selected"]
        self.raw_weights = None if rw is None else rw.clone()
        self.selected = None if sel is None else sel.clone()
        rfw, sg = state.get("raw_feature_weights"), state.get("selected_groups")
        if (sg is None) != (self.feature_groups is None or sel is None):
            raise ValueError("state and this FIRES differ in having feature_groups")
        if self.n_features is not None and self.feature_groups is not None:
            self._check_k(self.n_features)
        self.raw_feature_weights = None if rfw is None else rfw.clone()
        self.selected_groups = None if sg is None else sg.clone()
        self.n_updates = int(state["n_updates"])
        self._history = deque(
            ((int(t), w.clone(), s.clone()) for t, w, s in state["history"]),
            maxlen=self.history_size,
        )

    def __repr__(self) -> str:
        head = "None" if self.head is None else type(self.head).__name__
        return (
            f"FIRES(head={head}, n_selected={self.n_selected}, lambda_s={self.lambda_s}, "
            f"lambda_r={self.lambda_r}, n_updates={self.n_updates})"
        )
