"""Two-feature incremental partial dependence and Friedman's H² of the pair on a stream.

The two-way partial dependence of a model ``f`` on the features ``a, b`` is the mean output
with ``x_a = u`` and ``x_b = v`` set and the other features keeping their distribution,
``PD_ab(u, v) = E[f(u, v, X_rest)]``. Where ``f`` is additive in the two,
``PD_ab(u, v) = PD_a(u) + PD_b(v)`` up to a constant; Friedman and Popescu's H² measures the
share of the (centred) two-way PD that the two one-way PDs do not explain. The estimator is
iPDP's (:mod:`torchstream.explain.ipdp`) on a grid of ``u`` times a grid of ``v``, each axis
with iPDP's grid rules and storages (:mod:`torchstream.explain.pdp_grid`), and the two one-way
PDs on the same points from the same rows, so that H² follows the model on the stream.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from torchstream.base import PluginBase
from torchstream.checkpoint import check_settings
from torchstream.devices import to_device
from torchstream.explain.pdp_grid import (
    MISSING_LABEL,
    FeatureKind,
    GridRule,
    GroupSpec,
    RangeStorage,
    _block_values,
    _check_batch,
    _check_finite,
    _check_indicator,
    _check_onehot,
    _evaluate,
    _evaluation_points,
    _feature_index,
    _grid_settings,
    _int_at_least,
    _range_storage,
    group_spec,
)
from torchstream.explain.smoothing import ExponentialSmoother, check_alpha
from torchstream.typing import BatchView, ModelFn

__all__ = ["IncrementalPDP2D", "h_squared"]


def h_squared(pd: torch.Tensor, pd_a: torch.Tensor, pd_b: torch.Tensor) -> float:
    """Friedman's H² of a pair on a grid: ``pd [m_a, m_b]`` the two-way PD, ``pd_a [m_a]`` and
    ``pd_b [m_b]`` the one-way PDs at the same points, each centred by its mean over its grid
    points (every point weighted alike)::

        H² = sum_uv (PD_ab(u, v) - PD_a(u) - PD_b(v))² / sum_uv PD_ab(u, v)²   (centred PDs)

    0 where the two-way PD is the sum of the one-way PDs (no interaction), 1 where the one-way
    PDs are flat and the two-way PD is not (pure interaction); NaN where the two-way PD is
    constant (0 / 0).

    >>> import torch
    >>> u = torch.linspace(-1, 1, 5, dtype=torch.float64)
    >>> h_squared(u[:, None] * u[None, :], torch.zeros(5), torch.zeros(5))  # f = x_a x_b
    1.0
    >>> h_squared(u[:, None] + u[None, :], u, u)  # f = x_a + x_b
    0.0
    """
    pd = pd.to(torch.float64)
    a, b = pd_a.to(pd) - pd_a.to(pd).mean(), pd_b.to(pd) - pd_b.to(pd).mean()
    centred = pd - pd.mean()
    denominator = float(centred.square().sum())
    if not denominator > 0:
        return math.nan
    residual = centred - a.unsqueeze(1) - b.unsqueeze(0)
    return float(residual.square().sum()) / denominator


class _Axis:
    """One of the two explained features: its columns and kind (iPDP's
    :func:`~torchstream.explain.pdp_grid.group_spec`), its grid (iPDP's rules) and the
    running mean of its present values (a nullable numeric's "missing" point)."""

    def __init__(self, spec: GroupSpec | None, column: int, name: str, grid: GridRule,
                 grid_size: int, window: int, quantiles: tuple[float, float],
                 storage_size: int, entrance_prob: float, fixed_range: Any,
                 seed: int | None) -> None:
        self.spec = spec
        self.column = column  # the value column, or the one-hot block's first
        self.name = name
        self.kind: FeatureKind = "numeric" if spec is None else spec.kind
        self.block: tuple[int, ...] = (column,) if spec is None else spec.columns
        self.n_extra = 1 if self.kind == "nullable" else 0
        self.storage: RangeStorage | None = None
        self.present_sum = 0.0  # the present values of a nullable numeric: sum and count
        self.present_n = 0
        if self.kind == "categorical":  # the grid is the category set: 0..k-1
            if fixed_range is not None:
                raise ValueError(f"fixed_range is not used for the one-hot feature {name!r}: "
                                 "its grid is its categories (give None for it)")
            self.rule: str = "categories"
            self.grid_size = len(self.block)
            self.fixed: torch.Tensor | None = torch.arange(self.grid_size, dtype=torch.float64)
            self.quantiles = quantiles
            return
        try:
            setup = _grid_settings(grid, grid_size, window, quantiles, storage_size,
                                   entrance_prob, fixed_range)
        except ValueError as error:
            raise ValueError(f"{name!r}: {error}") from None
        self.rule = setup.rule
        self.grid_size = setup.grid_size
        self.quantiles = setup.quantiles
        self.fixed = setup.fixed
        self.storage = _range_storage(setup.rule, setup.window, setup.storage_size,
                                      setup.entrance_prob, seed)

    @property
    def rows(self) -> int:
        """Evaluation points per row: the grid, and a nullable numeric's "missing" point."""
        return self.grid_size + self.n_extra

    def fill(self) -> float:
        """What a missing cell becomes: the running mean of the present values (0.0 before
        any; :func:`~torchstream.schema.running_mean_fill`)."""
        if self.kind != "nullable" or not self.present_n:
            return 0.0
        return self.present_sum / self.present_n

    def points(self) -> torch.Tensor | None:
        """The numeric evaluation points ``[grid_size]`` before the batch (a one-point range
        repeated ``grid_size`` times), or None while the range storage holds under two
        values."""
        points = _evaluation_points(self.fixed, self.storage, self.quantiles, self.grid_size)
        if points is not None and points.numel() == 1:
            points = points.expand(self.grid_size)
        return points

    def read(self, X: torch.Tensor) -> list[torch.Tensor]:
        """What the host reads of the batch for this feature: its value column, and the
        missing indicator of a nullable numeric or the rows whose one-hot block is not
        one-hot."""
        parts = [X[:, self.column].detach()]
        if self.kind == "nullable":
            parts.append(X[:, self.block[1]].detach())
        elif self.kind == "categorical":
            block = X[:, list(self.block)].detach()
            parts.append((((block != 0) & (block != 1)).any(1) | (block.sum(1) != 1)).to(X.dtype))
        return parts

    def check(self, X: torch.Tensor, extra: torch.Tensor, step: int) -> None:
        """Raise for a missing indicator other than 0 / 1 or a block that is not one-hot."""
        if self.kind == "nullable":
            _check_indicator(extra, self.block[1], self.name, step)
        elif self.kind == "categorical":
            _check_onehot(X, extra, self.block, self.name, step)

    def labels(self, grid: torch.Tensor) -> list[str]:
        """A label per point of ``grid``: the category names, else the values, with
        ``"missing"`` last for a nullable numeric."""
        if self.kind == "categorical" and self.spec is not None:
            return list(self.spec.labels)
        numeric = grid[: self.grid_size].tolist()
        return [f"{v:.4g}" for v in numeric] + [MISSING_LABEL] * self.n_extra

    def state(self) -> dict[str, object]:
        return {"storage": None if self.storage is None else self.storage.state_dict(),
                "present_sum": self.present_sum, "present_n": self.present_n}

    def load(self, state: Mapping[str, Any]) -> None:
        if self.storage is not None:
            self.storage.load_state_dict(state["storage"])
        self.present_sum = float(state["present_sum"])
        self.present_n = int(state["present_n"])


class IncrementalPDP2D(PluginBase):
    r"""Two-feature incremental partial dependence of a model on a data stream, the one-way
    PDs of both features on the same grid and Friedman's H² of the pair from them.

    Algorithm (one call of :meth:`explain` with a batch of ``B`` rows; each axis is an iPDP
    axis, :class:`~torchstream.explain.ipdp.IncrementalPDP`)::

        u[1..m_a], v[1..m_b] = GetGridPoints(R_a), GetGridPoints(R_b)   # before the batch
        for b in 1..B:                                        # all rows at once
            ice2[b, k, l] = f(x_b with x_a := u[k], x_b := v[l])
            ice_a[b, k]   = f(x_b with x_a := u[k])
            ice_b[b, l]   = f(x_b with x_b := v[l])
            pd2, pd_a, pd_b, grid_a, grid_b <- EMAs (alpha) of ice2, ice_a, ice_b, u, v
        R_a, R_b = UpdateStorage(R_a, x_1..x_B[a]), UpdateStorage(R_b, x_1..x_B[b])
        H² = h_squared(pd2, pd_a, pd_b)                      # of the debiased EMAs

    so a batch costs ``B (m_a m_b + m_a + m_b)`` model evaluations, in one call to
    ``model_fn`` (or in chunks of ``chunk_size`` rows) under ``torch.no_grad()``. With a fixed
    grid, after ``n`` rows :attr:`pd` is exactly the ``alpha (1 - alpha)^(n - i) / c_n``
    weighted mean of the rows' ICE surfaces (scikit-learn's two-way ``partial_dependence``
    of those rows with those weights), and :attr:`pd_a`, :attr:`pd_b` the one-way PDs.

    **H².** :attr:`h2` is :func:`h_squared` of the current debiased estimates: each PD is
    centred by its mean over the grid points (every point weighted alike, as one computes
    it from scikit-learn's grid output), and ``H² = sum (PD_ab - PD_a - PD_b)² / sum PD_ab²``.
    Closed forms with centred inputs on a grid symmetric about 0: ``f = x_a x_b`` has H² = 1
    (flat one-way PDs), ``f = x_a + x_b`` has H² = 0. Where the model has no interaction of
    the pair (``f = g(x_a, rest) + h(x_b, rest)``), every row's ICE surface is additive and the
    three PDs come from the same rows with the same weights, so the estimate is 0 exactly (up
    to float rounding), whatever the EMA's noise. Otherwise it is the H² of the smoothed
    surfaces (a ratio of functions of the EMAs, its noise ``O(sqrt(alpha))``), not a test.

    **Grids.** Each axis follows iPDP's rules (``grid``: ``"rolling"``, ``"quantile"``,
    ``"fixed"``; a one-point range is evaluated at ``grid_size`` equal points), a one-hot
    group's grid is its categories (with ``feature_groups``), and a nullable numeric's grid
    has a last ``"missing"`` point (indicator 1, the value the running mean of the present
    values), as in iPDP. A row is explained once both axes have a range (the warm-up of a
    moving grid: the first batch is only stored).

    Parameters
    ----------
    model_fn
        The model as a :data:`~torchstream.typing.ModelFn` (``[n, d] -> [n]`` values or
        ``[n, k]`` class probabilities); ``None`` for a plug-in that explains
        ``batch.learner``.
    features
        The pair ``(a, b)``: column indices or names in ``feature_names`` (group names or
        positions with ``feature_groups``); two different features.
    feature_names, feature_groups
        As for :class:`~torchstream.explain.ipdp.IncrementalPDP`.
    grid_size, alpha, grid, window, quantiles, storage_size, entrance_prob
        As for :class:`~torchstream.explain.ipdp.IncrementalPDP`, for both axes (default
        ``grid_size`` 10: ``m_a m_b`` points per row).
    fixed_range
        For ``grid="fixed"``: one entry per feature, each iPDP's ``fixed_range`` (a pair
        ``(lo, hi)`` or the grid values; None for a one-hot feature).
    output_index
        Which column of an ``[n, k]`` model output is explained (iPDP's default).
    history_every, history_size
        Every ``history_every`` rows a snapshot ``(row, H²)`` is kept; at most the last
        ``history_size``.
    chunk_size
        At most this many rows per ``model_fn`` call; None: one call per batch.
    seed
        Seed of the frequency storages' entrance coins.

    Attributes
    ----------
    grid_a, grid_b, labels_a, labels_b
        The debiased grid points of each axis and their labels.
    pd, pd_a, pd_b
        The debiased two-way PD ``[m_a, m_b]`` and one-way PDs ``[m_a]``, ``[m_b]``.
    h2
        Friedman's H² of the pair (NaN before the first explained row).
    history
        Deque of the last snapshots ``(row, H²)``.

    Examples
    --------
    ``f(x) = x0 x1 + x2`` with standard normal features on a fixed grid over ``[-2, 2]``: the
    pair ``(x0, x1)`` interacts purely (H² = 1, up to the EMA's noise in its flat one-way
    PDs), the pair ``(x0, x2)`` not at all (H² = 0):

    >>> import torch
    >>> from torchstream.explain.ipdp2d import IncrementalPDP2D
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(4000, 3, generator=g, dtype=torch.float64)
    >>> f = lambda Z: Z[:, 0] * Z[:, 1] + Z[:, 2]
    >>> box = ((-2.0, 2.0), (-2.0, 2.0))
    >>> pdps = [IncrementalPDP2D(f, pair, grid="fixed", fixed_range=box, grid_size=5,
    ...                          alpha=0.01) for pair in ((0, 1), (0, 2))]
    >>> for start in range(0, 4000, 100):
    ...     for pdp in pdps:
    ...         pdp.explain(X[start:start + 100])
    >>> [round(pdp.h2, 2) for pdp in pdps]
    [1.0, 0.0]
    >>> pdps[0].pd.shape, pdps[0].labels_a
    (torch.Size([5, 5]), ['-2', '-1', '0', '1', '2'])
    """

    def __init__(
        self,
        model_fn: ModelFn | None,
        features: Sequence[int | str],
        *,
        feature_names: Sequence[str] | None = None,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
        grid_size: int = 10,
        alpha: float = 0.001,
        grid: GridRule = "rolling",
        window: int = 2000,
        quantiles: tuple[float, float] = (0.05, 0.95),
        storage_size: int = 100,
        entrance_prob: float = 1.0,
        fixed_range: Sequence[Any] | None = None,
        output_index: int | None = None,
        history_every: int = 1000,
        history_size: int = 10,
        chunk_size: int | None = None,
        seed: int | None = 0,
    ) -> None:
        if model_fn is not None and not callable(model_fn):
            raise TypeError(f"model_fn must be callable or None, got {type(model_fn).__name__}")
        self.model_fn = model_fn
        if isinstance(features, (str, bytes)) or len(features) != 2:
            raise ValueError(f"features must be a pair (a, b), got {features!r}")
        if fixed_range is not None and (isinstance(fixed_range, (str, bytes, torch.Tensor))
                                        or len(fixed_range) != 2):
            raise ValueError(
                f"fixed_range must hold one entry per feature (two: each a pair (lo, hi), grid "
                f"values, or None), got {fixed_range!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        self.alpha = check_alpha(alpha, "alpha")
        names = _feature_index(0, feature_names)[1]
        self._names = names
        self._width: int | None = None  # the columns feature_groups cover
        axes = []
        for i, feature in enumerate(features):
            spec = None
            if feature_groups is None:
                column, _ = _feature_index(feature, feature_names)
                name = names[column] if names is not None else f"x{column}"
            else:
                spec = group_spec(feature, feature_groups, names)
                column, name, self._width = spec.columns[0], spec.name, spec.n_columns
            ranges = None if fixed_range is None else fixed_range[i]
            axes.append(_Axis(spec, column, name, grid, grid_size, window, quantiles,
                              storage_size, entrance_prob, ranges, seed))
        self.axis_a, self.axis_b = axes
        if self.axis_a.block == self.axis_b.block:
            raise ValueError(f"features must be two different features, got {self.axis_a.name!r} "
                             "twice")
        self.features = (self.axis_a.name, self.axis_b.name)
        self.grid_rule = grid
        if output_index is not None:
            output_index = _int_at_least(output_index, "output_index", 0)
        self.output_index = output_index
        self.history_every = _int_at_least(history_every, "history_every", 1)
        self.history_size = _int_at_least(history_size, "history_size", 0)
        self.chunk_size = None if chunk_size is None else _int_at_least(chunk_size, "chunk_size", 1)
        self.seed = seed
        ra, rb = self.axis_a.rows, self.axis_b.rows
        # one EMA of: the two-way ICE [ra rb], the one-way ICE [ra], [rb], the points [ra], [rb]
        self._ema = ExponentialSmoother(self.alpha, (ra * rb + 2 * ra + 2 * rb,))
        self.history: deque[tuple[int, float]] = deque(maxlen=self.history_size)
        self.n_features: int | None = None  # width of X, fixed by the first batch
        self.n_seen = 0
        self.n_batches = 0
        self._last_snapshot = 0

    # ------------------------------------------------------------------ results
    @property
    def name(self) -> str:
        """Plug-in name, ``"ipdp2d/(a, b)"``."""
        return f"ipdp2d/({self.features[0]}, {self.features[1]})"

    @property
    def n_explained(self) -> int:
        """Rows explained so far (rows met by a grid still warming up are only stored)."""
        return self._ema.n

    def _parts(self) -> tuple[torch.Tensor, ...]:
        """The debiased EMA split into (two-way PD, PD_a, PD_b, points_a, points_b)."""
        ra, rb = self.axis_a.rows, self.axis_b.rows
        values = self._ema.debiased.cpu()
        return tuple(torch.split(values, [ra * rb, ra, rb, ra, rb]))

    def _grid(self, axis: _Axis, points: torch.Tensor) -> torch.Tensor:
        if self.n_explained == 0:
            return torch.full((axis.rows,), math.nan, dtype=torch.float64)
        numeric = axis.fixed if axis.fixed is not None else points[: axis.grid_size]
        if axis.n_extra:  # the "missing" point has no place on the numeric axis
            numeric = torch.cat([numeric, numeric.new_full((1,), math.nan)])
        return numeric.to(torch.float64).clone()

    @property
    def grid_a(self) -> torch.Tensor:
        """The grid of the first feature ``[m_a]`` (the smoothed evaluation points; the fixed
        grid or the category indices as they are); NaN before the first explained row."""
        return self._grid(self.axis_a, self._parts()[3])

    @property
    def grid_b(self) -> torch.Tensor:
        """The grid of the second feature ``[m_b]``, as :attr:`grid_a`."""
        return self._grid(self.axis_b, self._parts()[4])

    @property
    def labels_a(self) -> list[str]:
        """A label per point of :attr:`grid_a` (category names, values, ``"missing"``)."""
        return self.axis_a.labels(self.grid_a)

    @property
    def labels_b(self) -> list[str]:
        """A label per point of :attr:`grid_b`."""
        return self.axis_b.labels(self.grid_b)

    def _nan_before(self, value: torch.Tensor) -> torch.Tensor:
        return torch.full_like(value, math.nan) if self.n_explained == 0 else value.clone()

    @property
    def pd(self) -> torch.Tensor:
        """The debiased two-way PD ``[m_a, m_b]`` at :attr:`grid_a` x :attr:`grid_b`."""
        return self._nan_before(self._parts()[0].view(self.axis_a.rows, self.axis_b.rows))

    @property
    def pd_a(self) -> torch.Tensor:
        """The debiased one-way PD of the first feature ``[m_a]`` on the same points."""
        return self._nan_before(self._parts()[1])

    @property
    def pd_b(self) -> torch.Tensor:
        """The debiased one-way PD of the second feature ``[m_b]`` on the same points."""
        return self._nan_before(self._parts()[2])

    @property
    def h2(self) -> float:
        """Friedman's H² of the pair (:func:`h_squared` of :attr:`pd`, :attr:`pd_a`,
        :attr:`pd_b`); NaN before the first explained row."""
        if self.n_explained == 0:
            return math.nan
        pd, pd_a, pd_b = self._parts()[:3]
        return h_squared(pd.view(self.axis_a.rows, self.axis_b.rows), pd_a, pd_b)

    def as_dict(self) -> dict[str, object]:
        """The current plot and H² as plain Python values."""
        return {"features": list(self.features), "row": self.n_seen,
                "n_explained": self.n_explained, "grid_a": self.grid_a.tolist(),
                "grid_b": self.grid_b.tolist(), "labels_a": self.labels_a,
                "labels_b": self.labels_b, "pd": self.pd.tolist(), "pd_a": self.pd_a.tolist(),
                "pd_b": self.pd_b.tolist(), "h2": self.h2}

    # ------------------------------------------------------------------ explaining
    def explain(self, X: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """Explain the rows ``X [B, d]`` (``y`` is not used) with the current model. A batch
        with a NaN / inf value, a bad missing indicator or a block that is not one-hot, or a
        model output that is not finite, raises ``ValueError`` naming the batch row (and
        column) and leaves the explainer unchanged."""
        if self.model_fn is None:
            raise ValueError(
                "IncrementalPDP2D was built with model_fn=None: pass model_fn= to use "
                "explain(), or use it as a plug-in (it then explains batch.learner)")
        self._explain(X, self.model_fn)

    def _explain(self, X: torch.Tensor, model_fn: ModelFn) -> None:
        n_names = None if self._names is None else len(self._names)
        for axis in (self.axis_a, self.axis_b):
            X, d = _check_batch(X, axis.column, axis.name, self.n_features, n_names)
        if self._width is not None and d != self._width:
            raise ValueError(f"X has {d} columns but feature_groups cover {self._width}")
        b = X.shape[0]
        parts_a, parts_b = self.axis_a.read(X), self.axis_b.read(X)
        host = torch.cat([X.sum().view(1).to(X.dtype), *parts_a, *parts_b]).to("cpu",
                                                                               torch.float64)
        _check_finite(X, float(host[0]), self.axis_a.column, self.axis_a.name, self.n_batches)
        reads = torch.split(host[1:], b)
        n_a = len(parts_a)
        for axis, read in ((self.axis_a, reads[:n_a]), (self.axis_b, reads[n_a:])):
            if len(read) > 1:
                axis.check(X, read[1], self.n_batches)
        u, v = self.axis_a.points(), self.axis_b.points()
        if u is not None and v is not None:
            self._fold(X, u, v, model_fn)
        for axis, read in ((self.axis_a, reads[:n_a]), (self.axis_b, reads[n_a:])):
            values = read[0]
            if axis.kind == "nullable":
                values = values[read[1] == 0]  # a missing cell's value is not kept
                axis.present_sum += float(values.sum())
                axis.present_n += int(values.numel())
            if axis.storage is not None and values.numel():
                axis.storage.update(values)
        self.n_features = d
        self.n_seen += b
        self.n_batches += 1
        self._snapshot()

    def _fold(self, X: torch.Tensor, u: torch.Tensor, v: torch.Tensor,
              model_fn: ModelFn) -> None:
        b, d = X.shape
        device = X.device
        acc = torch.float32 if device.type == "mps" else torch.float64
        if self._ema.device != device or self._ema.raw.dtype != acc:
            self._ema.raw = self._ema.raw.to(device, acc)
            self._ema.sq_dev = self._ema.sq_dev.to(device, acc)
        values_a, za = _block_values(self.axis_a.kind, to_device(u, device, X.dtype),
                                     self.axis_a.fill())
        values_b, zb = _block_values(self.axis_b.kind, to_device(v, device, X.dtype),
                                     self.axis_b.fill())
        ra, rb = values_a.shape[0], values_b.shape[0]
        cols_a, cols_b = list(self.axis_a.block), list(self.axis_b.block)
        rows = ra * rb + ra + rb
        modified = X.detach().unsqueeze(1).expand(b, rows, d).clone()
        two = modified[:, : ra * rb].view(b, ra, rb, d)
        two[:, :, :, cols_a] = values_a.view(1, ra, 1, -1).expand(b, ra, rb, -1)
        two[:, :, :, cols_b] = values_b.view(1, 1, rb, -1).expand(b, ra, rb, -1)
        modified[:, ra * rb: ra * rb + ra, cols_a] = values_a
        modified[:, ra * rb + ra:, cols_b] = values_b
        ice = _evaluate(
            model_fn, modified.reshape(b * rows, d), output_index=self.output_index,
            chunk_size=self.chunk_size, dtype=acc, step=self.n_batches,
            first_row=self.n_seen, grid_size=rows,
        ).reshape(b, rows)
        points = torch.cat([za, zb]).to(acc).expand(b, ra + rb)
        self._ema.update(torch.cat([ice, points], 1))

    def _snapshot(self) -> None:
        block = self.n_seen // self.history_every
        if block > self._last_snapshot and self.n_explained > 0:
            self._last_snapshot = block
            if self.history_size:
                self.history.append((self.n_seen, self.h2))

    # ------------------------------------------------------------------ plug-in
    def on_batch(self, batch: BatchView) -> dict[str, float]:
        """Plug-in hook: explain ``batch.X`` with ``model_fn`` (or ``batch.learner``);
        returns ``{"ipdp2d/(a, b)/h2": H²}``, empty during warm-up."""
        model_fn = self.model_fn if self.model_fn is not None else batch.learner
        self._explain(batch.X, model_fn)
        if self.n_explained == 0:
            return {}
        return {f"{self.name}/h2": self.h2}

    # ------------------------------------------------------------------ state
    def _own(self) -> dict[str, object]:
        return {"class": type(self).__name__, "features": list(self.features),
                "grid_rule": self.grid_rule,
                "grid_size": [self.axis_a.grid_size, self.axis_b.grid_size]}

    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume bit-exactly."""
        return {
            **self._own(),
            "ema": self._ema.state_dict(),
            "axes": [self.axis_a.state(), self.axis_b.state()],
            "history": [list(h) for h in self.history],
            "n_features": self.n_features,
            "n_seen": self.n_seen,
            "n_batches": self.n_batches,
            "last_snapshot": self._last_snapshot,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_settings(state, self._own(), type(self).__name__)
        raw = state["ema"]["raw"]
        self._ema.raw = self._ema.raw.to(raw.dtype)  # keep the saved precision exactly
        self._ema.sq_dev = self._ema.sq_dev.to(raw.dtype)
        self._ema.load_state_dict(state["ema"])
        self.axis_a.load(state["axes"][0])
        self.axis_b.load(state["axes"][1])
        self.history = deque(((int(r), float(h)) for r, h in state["history"]),
                             maxlen=self.history_size)
        self.n_features = state["n_features"]
        self.n_seen = int(state["n_seen"])
        self.n_batches = int(state["n_batches"])
        self._last_snapshot = int(state["last_snapshot"])

    def __repr__(self) -> str:
        return (f"IncrementalPDP2D(features={self.features!r}, grid={self.grid_rule!r}, "
                f"alpha={self.alpha}, n_explained={self.n_explained})")
