"""Incremental partial dependence plots (iPDP) [^1].

The partial dependence (PD) of a model ``f`` on feature ``S`` is the mean model output when
``x_S`` is set to a value ``z`` and the other features keep their distribution,
``PD(z) = E[f(z, X_rest)]``; the batch PDP averages the ICE curves ``z -> f(z, x_i, rest)`` of a
data set over a grid of values ``z_1..z_m``. iPDP estimates it online: every row contributes its
ICE curve at the *current* evaluation points (spread over the recent range of the feature), and
exponential moving averages of the evaluation points and of the ICE curves forget old rows, so
the plot follows a changing model (real drift) and a moving feature range (virtual drift).

References
----------
[^1]: Muschalik, M., Fumagalli, F., Jagtani, R., Hammer, B. and Hüllermeier, E. (2023). iPDP:
    On Partial Dependence Plots in Dynamic Modeling Scenarios. xAI 2023, CCIS 1901, 177–194.
"""

from __future__ import annotations

import math
import types
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import torch

from torchstream.base import ExplainerBase, PluginBase
from torchstream.checkpoint import check_settings
from torchstream.devices import to_device
from torchstream.explain._compiled import CompiledPath
from torchstream.explain._fused_ipdp import IpdpConfig, IpdpResult, compiled_ipdp_step
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

__all__ = ["IncrementalPDP"]


class IncrementalPDP(CompiledPath, ExplainerBase, PluginBase):
    r"""Incremental partial dependence plot [^1] of one feature of a model on a data stream.

    Algorithm (one call of :meth:`explain` with a batch of ``B`` rows; ``B = 1`` is Alg. 1 of
    [^1])::

        state: grid[1..m] = 0, pd[1..m] = 0 (zero-initialised EMAs), n = 0, range storage R
        z[1..m] = GetGridPoints(R, m)                 # R as it was BEFORE the batch
        for b in 1..B:                                # all rows of the batch at once
            n += 1
            for k in 1..m:
                ice[b, k] = f(x_b with x_b[S] := z[k])          # ICE curve of row b
                grid[k]   = (1 - alpha) grid[k] + alpha z[k]      # EMA of the evaluation points
                pd[k]     = (1 - alpha) pd[k] + alpha ice[b, k]   # EMA of the ICE curves
        R = UpdateStorage(R, x_1[S]..x_B[S])          # after explaining
        return grid / c_n, pd / c_n                   # debiased, c_n = 1 - (1 - alpha)^n

    ``GetGridPoints`` spreads ``m`` equidistant points over ``[lo, hi]``:

    * ``grid="rolling"``: ``lo, hi`` = exact minimum and maximum of the feature over the last
      ``window`` rows (:class:`~torchstream.explain.storage.RollingExtremes`, Alg. 2 of [^1]);
    * ``grid="quantile"``: ``lo, hi`` = the ``quantiles`` of a
      :class:`~torchstream.explain.storage.FrequencyStorage` of ``storage_size`` values, each new
      value entering with probability ``entrance_prob`` (Alg. 3 of [^1]; it covers about the
      last ``storage_size / entrance_prob`` rows);
    * ``grid="fixed"``: constant points (``fixed_range=(lo, hi)`` or explicit grid values), the
      setting of Thm 3.2 of [^1]. Here the debiased grid *is* the fixed grid (the EMA of a
      constant sequence, debiased, is that constant), returned as such.

    A row is explained once the range storage holds two values (the fixed grid needs none;
    before, :attr:`grid`, :attr:`pd` and :attr:`score` are NaN); a one-point range (a constant
    feature) gives a one-point grid (:attr:`score` 0 for a numeric feature). The ``B * m``
    modified rows of a batch go to ``model_fn`` in one call (or in chunks of ``chunk_size``
    rows), under ``torch.no_grad()``, on the device of ``X``; ``X`` and the model are not
    changed. Within a batch the model is fixed and the points of all rows come from the range
    storage as it was before the batch (with a fixed grid this equals ``B`` calls of one row
    each).

    With ``feature_groups`` the explained feature is a group, of :attr:`kind`:

    * ``"numeric"``: one column, as above;
    * ``"categorical"``: a one-hot block of ``k`` columns. The grid is the category set (point
      ``c`` sets column ``c`` of the block to 1, the others to 0), so ``PD(c) = E[f(c,
      X_rest)]`` for each category; :attr:`grid` is ``0..k-1``, :attr:`grid_labels` the
      category names, :attr:`grid_rule` ``"categories"``; the grid arguments are not used;
    * ``"nullable"``: a value column and its ``"<name>:missing"`` indicator. The numeric grid
      over the present values (indicator 0), plus a last ``"missing"`` point: indicator 1 and
      the value a missing cell becomes, the running mean of the present values before the
      batch (:attr:`missing_value`, :func:`~torchstream.schema.running_mean_fill`); its
      :attr:`grid` entry is NaN.

    :attr:`score` is the sample standard deviation of :attr:`pd` over all its points.

    Parameters
    ----------
    model_fn
        The model as a :data:`~torchstream.typing.ModelFn` (``[n, d] -> [n]`` values or
        ``[n, k]`` class probabilities); ``None`` for a plug-in that explains ``batch.learner``.
    feature
        The explained column ``S`` of ``X``: its index (checked against ``X``'s width at the
        first batch) or its name in ``feature_names``; with ``feature_groups`` a group name (or
        the group's position).
    feature_names
        Names of the columns of ``X`` (a sequence of unique names, or a
        :class:`~torchstream.schema.Schema`; ``X`` must then have that many columns); default
        ``x0..``. They name the columns of :attr:`importance` and the explained feature in tags
        and plots; with ``feature_groups`` they give the category labels and tell a nullable
        numeric's indicator (``"<name>:missing"``) from a one-hot block.
    feature_groups
        ``{feature name: encoded column indices}`` covering every column of ``X`` once (checked
        like iPFI's): explain the group ``feature`` as one user feature (see above). None: the
        column ``feature`` (no change to the one-column iPDP).
    grid_size
        Number ``m >= 2`` of evaluation points (ignored when ``fixed_range`` lists the points).
    alpha
        Smoothing factor in ``(0, 1]`` (the paper uses 0.001 on drifting streams, 0.01 for a
        static model); the estimate's variance is ``O(alpha)``.
    grid
        ``"rolling"``, ``"quantile"`` or ``"fixed"`` (see above).
    window
        Rows covered by the rolling minimum / maximum.
    quantiles
        ``(q_lo, q_hi)`` of the frequency storage spanning the ``"quantile"`` grid.
    storage_size, entrance_prob
        Size ``L`` and entrance probability ``P(E)`` of the frequency storage.
    fixed_range
        For ``grid="fixed"``: a pair ``(lo, hi)`` (``grid_size`` equidistant points) or the grid
        values themselves (a tensor, array, or a sequence of length other than 2).
    output_index
        Which column of an ``[n, k]`` model output is explained (default 1, the probability of
        class 1, for ``k >= 2``; 0 for ``k = 1``); must be None for an ``[n]`` output.
    n_ice
        Number of recent ICE curves kept (a ring buffer, for plots); 0 keeps none.
    history_every, history_size
        Every ``history_every`` rows a snapshot ``(row, grid, pd)`` is kept; at most the last
        ``history_size`` snapshots.
    chunk_size
        At most this many rows per ``model_fn`` call (a memory cap); None: one call per batch.
    seed
        Seed of the frequency storage's entrance coins (``None``: a fresh random seed).
    compile
        Run the model's part of each batch as one ``torch.compile``d step
        (:mod:`torchstream.explain._fused_ipdp`); the points, the "missing" value and the
        storage update stay outside it, so the plot is the eager one up to float rounding.
        Covers an ``nn.Module``, a learner with a ``network`` and a Python function of torch
        operations (compiled by tracing it) without ``chunk_size``; otherwise the eager path runs
        with a warning. The one-off compile time is :attr:`compile_seconds`.

    Attributes
    ----------
    grid, pd
        The debiased plot ``[m]`` (``[k]`` categories, ``[m + 1]`` for a nullable numeric).
    grid_labels
        A label per grid point (category names, grid values, ``"missing"``).
    kind
        ``"numeric"``, ``"categorical"`` or ``"nullable"``.
    grid_raw, pd_raw
        The zero-initialised EMAs ``[m]`` of the paper's theorems (``c_n`` times the above).
    ice, ice_grid
        The last ``n_ice`` ICE curves and their evaluation points ``[<= n_ice, m]``.
    history
        Deque of the last ``history_size`` snapshots ``(row, grid, pd)``.
    n_explained, n_seen
        Rows explained / rows passed to :meth:`explain` so far.
    feature_name
        The name of the explained feature (``feature_names[feature]``, default
        ``"x<feature>"``; the group's name with ``feature_groups``).

    Examples
    --------
    A model ``f(x) = x0^2 + x1`` on a stream with ``x0, x1 ~ U[-1, 1]``: the PD of ``x0`` is
    ``z^2 + E[x1] = z^2``, up to the EMA's noise (sd ``sqrt(alpha / (2 - alpha) Var(x1))``
    = 0.04 here), and its importance the sd of ``(1, 0.25, 0, 0.25, 1)``, 0.468:

    >>> import torch
    >>> from torchstream.explain.ipdp import IncrementalPDP
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.rand(3000, 2, generator=g, dtype=torch.float64) * 2 - 1
    >>> ipdp = IncrementalPDP(lambda Z: Z[:, 0] ** 2 + Z[:, 1], 0, grid_size=5, alpha=0.01)
    >>> for start in range(0, 3000, 10):
    ...     ipdp.explain(X[start:start + 10])
    >>> grid, pd = ipdp.grid, ipdp.pd
    >>> [round(v, 2) for v in grid.tolist()]
    [-1.0, -0.5, -0.0, 0.5, 1.0]
    >>> [round(v, 2) for v in pd.tolist()]
    [0.96, 0.21, -0.04, 0.21, 0.95]
    >>> round(ipdp.score, 3)
    0.466
    >>> [round(v, 3) for v in ipdp.importance.tolist()]  # [d]: only x0 is explained
    [0.466, nan]

    A one-hot feature of a schema: one PD value per category. Here the model adds 1, 3, -1
    for the three categories, so the PD is exactly those values and the score their sd, 2:

    >>> from torchstream.schema import Feature, Schema
    >>> schema = Schema([Feature("job", "categorical", ("Private", "State", "Self")), "age"])
    >>> rows = [{"job": "Private", "age": 30.0}, {"job": "Self", "age": 50.0}]
    >>> X = schema.encode(rows, dtype=torch.float64)
    >>> f = lambda Z: Z[:, :3] @ torch.tensor([1.0, 3.0, -1.0], dtype=torch.float64)
    >>> cat = IncrementalPDP(f, "job", feature_names=schema,
    ...                      feature_groups=schema.feature_groups(), alpha=0.1)
    >>> cat.explain(X)
    >>> cat.grid.tolist(), cat.grid_labels
    ([0.0, 1.0, 2.0], ['Private', 'State', 'Self'])
    >>> [round(v, 12) for v in cat.pd.tolist()], round(cat.score, 12)
    ([1.0, 3.0, -1.0], 2.0)

    References
    ----------
    [^1]: Muschalik, M., Fumagalli, F., Jagtani, R., Hammer, B. and Hüllermeier, E. (2023).
        iPDP: On Partial Dependence Plots in Dynamic Modeling Scenarios. xAI 2023, CCIS 1901,
        177–194.
    """

    def __init__(
        self,
        model_fn: ModelFn | None,
        feature: int | str,
        *,
        feature_names: Sequence[str] | None = None,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
        grid_size: int = 20,
        alpha: float = 0.001,
        grid: GridRule = "rolling",
        window: int = 2000,
        quantiles: tuple[float, float] = (0.05, 0.95),
        storage_size: int = 100,
        entrance_prob: float = 1.0,
        fixed_range: Any = None,
        output_index: int | None = None,
        n_ice: int = 20,
        history_every: int = 1000,
        history_size: int = 10,
        chunk_size: int | None = None,
        seed: int | None = 0,
        compile: bool = False,
    ) -> None:
        if model_fn is not None and not callable(model_fn):
            raise TypeError(f"model_fn must be callable or None, got {type(model_fn).__name__}")
        self.model_fn = model_fn
        self._spec: GroupSpec | None = None
        if feature_groups is None:
            self.feature, self._names = _feature_index(feature, feature_names)
        else:
            self._names = _feature_index(0, feature_names)[1]
            self._spec = group_spec(feature, feature_groups, self._names)
            self.feature = self._spec.columns[0]  # the value column, or the block's first
        #: ``"numeric"`` (one column), ``"nullable"`` (value and missing indicator) or
        #: ``"categorical"`` (a one-hot block; the last two only with ``feature_groups``).
        self.kind: FeatureKind = "numeric" if self._spec is None else self._spec.kind
        self.alpha = check_alpha(alpha, "alpha")
        setup = _grid_settings(
            grid, grid_size, window, quantiles, storage_size, entrance_prob, fixed_range
        )
        self.grid_rule: GridRule | Literal["categories"] = setup.rule
        self.grid_size, self.window, self.quantiles = setup.grid_size, setup.window, setup.quantiles
        self.storage_size, self.entrance_prob = setup.storage_size, setup.entrance_prob
        self._fixed: torch.Tensor | None = setup.fixed
        if self.kind == "categorical":  # the grid is the category set: 0..k-1
            if fixed_range is not None:
                raise ValueError(
                    f"fixed_range is not used for the one-hot feature {self._name_of()!r}: "
                    "its grid is its categories"
                )
            self.grid_rule = "categories"
            self.grid_size = len(self._block())
            self._fixed = torch.arange(self.grid_size, dtype=torch.float64)
        #: 1 for a nullable numeric (its "missing" point after the numeric grid), else 0.
        self._n_extra = 1 if self.kind == "nullable" else 0
        if output_index is not None:
            output_index = _int_at_least(output_index, "output_index", 0)
        self.output_index = output_index
        self.n_ice = _int_at_least(n_ice, "n_ice", 0)
        self.history_every = _int_at_least(history_every, "history_every", 1)
        self.history_size = _int_at_least(history_size, "history_size", 0)
        self.feature_name = self._name_of()
        self.chunk_size = None if chunk_size is None else _int_at_least(chunk_size, "chunk_size", 1)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise ValueError(f"seed must be an integer or None, got {seed!r}")
        self.seed = seed

        self.storage: RangeStorage | None = None if self.kind == "categorical" else _range_storage(
            grid, self.window, self.storage_size, self.entrance_prob, seed
        )
        m = self.grid_size + self._n_extra
        # one EMA of the pairs (evaluation points, ICE values): row 0 grid, row 1 PD
        self._ema = ExponentialSmoother(self.alpha, (2, m))
        self._ice = torch.zeros(0, m, dtype=torch.float64)
        self._ice_grid = torch.zeros(0, m, dtype=torch.float64)
        self.history: deque[tuple[int, torch.Tensor, torch.Tensor]] = deque(
            maxlen=self.history_size
        )
        self.n_features: int | None = None  # width of X, fixed by the first batch
        self.n_seen = 0  # rows passed to explain()
        self.n_batches = 0  # explain() calls (the step named in error messages)
        self._last_snapshot = 0  # n_seen // history_every at the last snapshot
        #: The evaluation point of every explained row while all met the same one-point range
        #: (a constant feature), else None; the debiased EMA of it is only equal up to rounding.
        self._point: float | None = None
        #: Sum and count of the present values of a nullable numeric (the running mean that a
        #: missing cell becomes, :func:`~torchstream.schema.running_mean_fill`).
        self._present_sum = 0.0
        self._present_n = 0
        self._init_compiled(compile)
        self._step_fn: Callable[..., IpdpResult] | None = None
        if self.compile and self.chunk_size is not None:
            self._compile_off("chunk_size is set (the compiled step evaluates a batch in one call)")

    def _name_of(self) -> str:
        """The explained feature's name: its group's name with ``feature_groups``, else
        ``feature_names[feature]``, else ``"x<feature>"``."""
        if self._spec is not None:
            return self._spec.name
        if self._names is not None:
            return self._names[self.feature]
        return f"x{self.feature}"

    def _block(self) -> tuple[int, ...]:
        """The explained group's columns (``(feature,)`` without groups)."""
        return (self.feature,) if self._spec is None else self._spec.columns

    # ------------------------------------------------------------------ results
    @property
    def name(self) -> str:
        """Plug-in name, ``"ipdp/<feature_name>"``."""
        return f"ipdp/{self.feature_name}"

    @property
    def n_explained(self) -> int:
        """Rows explained so far (rows met by an invalid range are only stored)."""
        return self._ema.n

    @property
    def grid(self) -> torch.Tensor:
        """Debiased grid points ``[m]`` (the smoothed evaluation points; the fixed grid itself
        for ``grid="fixed"``), or ``[1]`` where they are all one point (a constant feature);
        NaN before the first explained row."""
        if self.n_explained == 0:
            return torch.full((self.grid_size + self._n_extra,), math.nan, dtype=torch.float64)
        if self._point is not None:  # every explained row met the same one-point range
            points = torch.tensor([self._point], dtype=self._ema.raw.dtype,
                                  device=self._ema.device)
        elif self._fixed is not None:
            points = self._fixed.to(self._ema.device, self._ema.raw.dtype)
        else:
            points = self._ema.debiased[0, : self.grid_size]
        points = points[:1] if self._one_point() else points
        if self._n_extra:  # the "missing" point has no place on the numeric axis
            points = torch.cat([points, points.new_full((1,), math.nan)])
        return points.clone()

    @property
    def grid_labels(self) -> list[str]:
        """A label per point of :attr:`grid`: the category names of a one-hot feature (its
        column names without the ``"<feature>="`` prefix, e.g. ``"Private"`` for
        ``"workclass=Private"``), else the grid values (``"%.4g"``), with ``"missing"`` last
        for a nullable numeric."""
        if self._spec is not None and self.kind == "categorical":
            return list(self._spec.labels)
        numeric = self.grid[: self.grid.numel() - self._n_extra]
        return [f"{v:.4g}" for v in numeric.tolist()] + [MISSING_LABEL] * self._n_extra

    @property
    def missing_value(self) -> float:
        """For a nullable numeric: the debiased mean of the values its value column held at
        the "missing" point (the running mean of the present values); NaN otherwise and before
        the first explained row."""
        if not self._n_extra or self.n_explained == 0:
            return math.nan
        return float(self._ema.debiased[0, self.grid_size])

    @property
    def pd(self) -> torch.Tensor:
        """Debiased PD values at :attr:`grid` (``[m]``, or ``[1]`` for a one-point grid); NaN
        before the first explained row."""
        if self.n_explained == 0:
            return torch.full((self.grid_size + self._n_extra,), math.nan, dtype=torch.float64)
        values = self._ema.debiased[1]
        numeric = values[: self.grid_size]
        numeric = numeric[:1] if self._one_point() else numeric
        if self._n_extra:
            numeric = torch.cat([numeric, values[self.grid_size:]])
        return numeric.clone()

    def _one_point(self) -> bool:
        """Whether all smoothed grid points are equal (every explained row met a one-point
        range; the EMA treats the ``m`` columns alike, so they stay exactly equal)."""
        points = self._fixed if self._fixed is not None else self._ema.raw[0, : self.grid_size]
        low, high = torch.aminmax(points)
        return bool(low == high)

    @property
    def grid_raw(self) -> torch.Tensor:
        """Zero-initialised EMA of the evaluation points ``[m]`` (the paper's ``x_{t,k}``)."""
        return self._ema.raw[0].clone()

    @property
    def pd_raw(self) -> torch.Tensor:
        """Zero-initialised EMA of the ICE curves ``[m]`` (biased towards 0 for ~1/alpha rows)."""
        return self._ema.raw[1].clone()

    @property
    def correction(self) -> float:
        """``c_n = 1 - (1 - alpha)^n``, the sum of the EMA weights (debiased = raw / c_n)."""
        return self._ema.correction

    @property
    def ice(self) -> torch.Tensor:
        """The most recent ICE curves ``[<= n_ice, m]``, oldest first."""
        return self._ice.clone()

    @property
    def ice_grid(self) -> torch.Tensor:
        """The evaluation points of each curve in :attr:`ice` ``[<= n_ice, m]``."""
        return self._ice_grid.clone()

    @property
    def importance(self) -> torch.Tensor:
        """The importance per column of ``X`` ``[d]``: :attr:`score` at the explained
        ``feature``, NaN at the columns this explainer does not explain (``d`` is fixed by the
        first batch, or by ``feature_names``; before it the vector has ``feature + 1`` entries,
        all NaN)."""
        values = torch.full((self._width(),), math.nan, dtype=torch.float64)
        values[self.feature if self._spec is None else self._spec.position] = self.score
        return values

    @property
    def feature_names(self) -> list[str]:  # type: ignore[override]
        """Names of the columns of :attr:`importance`: the given ``feature_names``, else
        ``x<j>``; the group names with ``feature_groups``."""
        if self._spec is not None:
            return list(self._spec.group_names)
        if self._names is not None:
            return list(self._names)
        return [f"x{j}" for j in range(self._width())]

    def _width(self) -> int:
        """Columns of ``X``: known from the first batch or ``feature_names``, else at least
        ``feature + 1``; the number of groups with ``feature_groups``."""
        if self._spec is not None:
            return len(self._spec.group_names)
        if self.n_features is not None:
            return self.n_features
        return len(self._names) if self._names is not None else self.feature + 1

    @property
    def score(self) -> float:
        """PDP-based importance: the sample standard deviation (ddof = 1) of the debiased PD
        values over the grid (Greenwell et al. 2018): over the categories of a one-hot feature,
        over the numeric points and the "missing" point of a nullable numeric; NaN before the
        first explained row. For a
        linear PD with slope ``beta`` on ``m`` equidistant points of ``[a, b]`` it is
        ``|beta| (b - a) / (m - 1) * sqrt(m (m + 1) / 12)`` (blind to the sign of ``beta``);
        exactly 0 for a one-point grid (a constant feature; not for a nullable numeric, whose
        missing point is a second one)."""
        if self.n_explained == 0:
            return math.nan
        if self._one_point() and not self._n_extra:
            return 0.0
        return float(self.pd.std(unbiased=True))

    def as_dict(self) -> dict[str, object]:
        """The current plot as plain Python values."""
        return {
            "feature": self.feature_name,
            "row": self.n_seen,
            "n_explained": self.n_explained,
            "grid": self.grid.tolist(),
            "grid_labels": self.grid_labels,
            "pd": self.pd.tolist(),
            "importance": self.score,
        }

    # ------------------------------------------------------------------ explaining
    def explain(self, X: torch.Tensor, y: torch.Tensor | None = None) -> None:
        """Explain the rows ``X [B, d]`` (``y`` is not used) with the current model (the
        debiased plot is then :attr:`grid`, :attr:`pd`: ``[m]``, or ``[1]`` for a one-point
        grid); the feature
        values enter the range storage afterwards. A batch with a NaN / inf value in any column,
        or a model output that is not finite, raises ``ValueError`` naming the batch row (and
        column) and leaves the explainer unchanged."""
        if self.model_fn is None:
            raise ValueError(
                "IncrementalPDP was built with model_fn=None: pass model_fn= to use explain(), "
                "or use it as a plug-in (it then explains batch.learner)"
            )
        self._explain(X, self.model_fn)

    def _explain(self, X: torch.Tensor, model_fn: ModelFn) -> None:
        X, d = _check_batch(X, self.feature, self.feature_name, self.n_features,
                            None if self._names is None else len(self._names))
        if self._spec is not None and d != self._spec.n_columns:
            raise ValueError(
                f"X has {d} columns but feature_groups cover {self._spec.n_columns}"
            )
        points = _evaluation_points(self._fixed, self.storage, self.quantiles, self.grid_size)
        host = None
        if points is not None and self._compiled_on and self.n_explained > 0:
            host = self._fused_fold(X, points, model_fn)
        if host is None:  # the eager path (also the redo of a batch the flag rejected)
            host = self._host_read(X, X.sum().view(1))
            self._check_host(X, host)
            if points is not None:
                self._fold(X, points, model_fn)
        values = host[1:1 + X.shape[0]]
        if self.kind == "nullable":
            values = values[host[1 + X.shape[0]:] == 0]  # a missing cell's value is not kept
        self.n_features = d
        if self.storage is not None and values.numel():
            self.storage.update(values)
        self._present_sum += float(values.sum())
        self._present_n += int(values.numel())
        self.n_seen += X.shape[0]
        self.n_batches += 1
        self._snapshot()

    def _host_read(self, X: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """One host read (float64): ``head`` (the batch's check sum, or the compiled step's
        flag), the explained column's values (what the range storage keeps) and the missing
        indicator of a nullable numeric, or the rows whose one-hot block is not one-hot."""
        read = [head.to(X.dtype), X[:, self.feature].detach()]
        if self.kind == "nullable":
            read.append(X[:, self._block()[1]].detach())
        elif self.kind == "categorical":  # rows whose block is not one-hot
            block = X[:, list(self._block())].detach()
            read.append((((block != 0) & (block != 1)).any(1) | (block.sum(1) != 1)).to(X.dtype))
        return torch.cat(read).to("cpu", torch.float64)

    def _check_host(self, X: torch.Tensor, host: torch.Tensor) -> None:
        """Raise for a non-finite value of ``X``, a missing indicator other than 0 / 1 or a
        block that is not one-hot, naming the row (``host`` from :meth:`_host_read`)."""
        b = X.shape[0]
        _check_finite(X, float(host[0]), self.feature, self.feature_name, self.n_batches)
        if self.kind == "nullable":
            _check_indicator(host[1 + b:], self._block()[1], self.feature_name, self.n_batches)
        elif self.kind == "categorical":
            _check_onehot(X, host[1 + b:], self._block(), self.feature_name, self.n_batches)

    def _fold(self, X: torch.Tensor, points: torch.Tensor, model_fn: ModelFn) -> None:
        b, d = X.shape
        m = self.grid_size
        device = X.device
        acc = torch.float32 if device.type == "mps" else torch.float64
        if self._ema.device != device or self._ema.raw.dtype != acc:
            self._move(device, acc)
        z = to_device(points, device, X.dtype)
        n_points = z.shape[0]  # m, or 1 for a one-point range
        fill = self._present_sum / self._present_n if self._present_n else 0.0
        values, z = _block_values(self.kind, z, fill)  # a nullable numeric's "missing" last
        rows = values.shape[0]
        modified = X.detach().unsqueeze(1).expand(b, rows, d).clone()
        modified[:, :, list(self._block())] = values
        ice = _evaluate(
            model_fn, modified.reshape(b * rows, d), output_index=self.output_index,
            chunk_size=self.chunk_size, dtype=self._ema.raw.dtype, step=self.n_batches,
            first_row=self.n_seen, grid_size=rows,
        ).reshape(b, rows)
        if n_points != m:  # one point: its ICE value in all m numeric columns of the EMA
            ice = torch.cat([ice[:, :1].expand(b, m), ice[:, 1:]], 1)
            z = torch.cat([z[:1].expand(m), z[1:]])
            point = float(points[0])
            self._point = point if self.n_explained == 0 or self._point == point else None
        else:
            self._point = None
        width = m + self._n_extra
        z_acc = z.to(acc)  # the points as evaluated
        self._ema.update(torch.stack([z_acc.expand(b, width), ice], 1))
        self._keep_ice(ice, z_acc)

    # ------------------------------------------------------------------ compiled path
    def _compiled_model(self, model_fn: ModelFn) -> ModelFn | None:
        """What the compiled step calls: a Python function (``def``, lambda or bound method,
        compiled by tracing it), else the torch module behind ``model_fn``
        (:meth:`~torchstream.explain._compiled.CompiledPath._module_of`; None, and the path
        off with a warning, for any other callable)."""
        if isinstance(model_fn, (types.FunctionType, types.MethodType)):
            return model_fn
        return self._module_of(model_fn)

    def _step_config(self, b: int, acc: torch.dtype) -> IpdpConfig:
        block = self._block()
        ema = b <= self._ema._BLOCK
        return IpdpConfig(
            kind=self.kind,
            feature=self.feature,
            indicator=block[1] if self.kind == "nullable" else -1,
            block=block,
            grid_size=self.grid_size,
            n_extra=self._n_extra,
            output_index=self.output_index,
            acc_dtype=acc,
            alpha=self.alpha,
            ema=ema,
            decay=(1.0 - self.alpha) ** b if ema else 1.0,
        )

    def _fused_fold(
        self, X: torch.Tensor, points: torch.Tensor, model_fn: ModelFn
    ) -> torch.Tensor | None:
        """The batch's fold through the compiled step (:func:`~torchstream.explain._fused_ipdp.
        ipdp_step`), committed only where its flag passed; returns the host read of
        :meth:`_host_read` (led by the flag), or None where this batch must run eagerly (then
        nothing has changed)."""
        model = self._compiled_model(model_fn)
        if model is None:
            return None
        b = X.shape[0]
        device = X.device
        acc = torch.float32 if device.type == "mps" else torch.float64
        if self._ema.device != device or self._ema.raw.dtype != acc:
            self._move(device, acc)
        z = to_device(points, device, X.dtype)
        if self._n_extra:  # the "missing" point: the running mean of the present values
            fill = self._present_sum / self._present_n if self._present_n else 0.0
            z = torch.cat([z, z.new_full((1,), fill)])
        cfg = self._step_config(b, acc)
        smoother = self._ema
        rn, plan = self._ema_inputs(smoother, b, cfg.ema)
        if self._step_fn is None:
            self._step_fn = compiled_ipdp_step()
        step_fn = self._step_fn
        key = (b, z.shape[0], X.dtype, device, cfg.ema)
        res = self._call_compiled(key, lambda: step_fn(
            model, X, z, smoother.raw, smoother.sq_dev, rn, plan, cfg))
        if res is None:
            return None
        host = self._host_read(X, res.ok.view(1))
        if float(host[0]) != 1.0:  # redo the batch eagerly: it raises the usual error
            return None
        if z.shape[0] - self._n_extra != self.grid_size:  # a one-point range
            point = float(points[0])
            self._point = point if self._point == point else None
        else:
            self._point = None
        width = self.grid_size + self._n_extra
        self._fold_step(smoother, cfg.ema, res.raw, res.sq_dev,
                        lambda: torch.stack([res.points.expand(b, width), res.ice], 1), b)
        self._keep_ice(res.ice, res.points)
        return host

    def _keep_ice(self, ice: torch.Tensor, points: torch.Tensor) -> None:
        """The last ``n_ice`` ICE curves ``ice [B, w]`` and their points ``[w]``."""
        if self.n_ice:
            b, width = ice.shape
            keep = min(b, self.n_ice)
            self._ice = torch.cat([self._ice, ice[-keep:]])[-self.n_ice :]
            self._ice_grid = torch.cat([self._ice_grid, points.expand(keep, width)])[-self.n_ice :]

    def _move(self, device: torch.device, dtype: torch.dtype) -> None:
        self._ema.raw = self._ema.raw.to(device, dtype)
        self._ema.sq_dev = self._ema.sq_dev.to(device, dtype)
        self._ice = self._ice.to(device, dtype)
        self._ice_grid = self._ice_grid.to(device, dtype)

    def _snapshot(self) -> None:
        block = self.n_seen // self.history_every
        if block > self._last_snapshot and self.n_explained > 0:
            self._last_snapshot = block
            if self.history_size:
                self.history.append((self.n_seen, self.grid.cpu(), self.pd.cpu()))

    # ------------------------------------------------------------------ plug-in
    def on_batch(self, batch: BatchView) -> dict[str, float]:
        """Plug-in hook: explain ``batch.X`` with ``model_fn`` (or ``batch.learner`` when it is
        None); returns ``{"ipdp/<feature_name>/importance": score}``, empty during warm-up."""
        model_fn = self.model_fn if self.model_fn is not None else batch.learner
        self._explain(batch.X, model_fn)
        if self.n_explained == 0:
            return {}
        return {f"{self.name}/importance": self.score}

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume bit-exactly."""
        return {
            "class": type(self).__name__,
            "feature": self.feature,
            "grid_size": self.grid_size,
            "grid_rule": self.grid_rule,
            "ema": self._ema.state_dict(),
            "storage": None if self.storage is None else self.storage.state_dict(),
            "ice": self._ice.clone(),
            "ice_grid": self._ice_grid.clone(),
            "history": [(r, g.clone(), p.clone()) for r, g, p in self.history],
            "n_features": self.n_features,
            "n_seen": self.n_seen,
            "n_batches": self.n_batches,
            "last_snapshot": self._last_snapshot,
            "point": self._point,
            "group": None if self._spec is None else self._spec.name,
            "kind": self.kind,
            "present_sum": self._present_sum,
            "present_n": self._present_n,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        own = {"class": type(self).__name__,
               "group": None if self._spec is None else self._spec.name,
               "feature": self.feature, "grid_size": self.grid_size,
               "grid_rule": self.grid_rule}
        check_settings(state, own, "IncrementalPDP")
        device = self._ema.device
        raw = state["ema"]["raw"]
        self._ema.raw = self._ema.raw.to(raw.dtype)  # keep the saved precision exactly
        self._ema.sq_dev = self._ema.sq_dev.to(raw.dtype)
        self._ema.load_state_dict(state["ema"])
        if self.storage is not None:
            self.storage.load_state_dict(state["storage"])
        self._ice = state["ice"].to(device).clone()
        self._ice_grid = state["ice_grid"].to(device).clone()
        self.history = deque(
            ((int(r), g.clone(), p.clone()) for r, g, p in state["history"]),
            maxlen=self.history_size,
        )
        self.n_features = state["n_features"]
        self.n_seen = int(state["n_seen"])
        self.n_batches = int(state["n_batches"])
        self._last_snapshot = int(state["last_snapshot"])
        point = state.get("point")
        self._point = None if point is None else float(point)
        self._present_sum = float(state.get("present_sum", 0.0))
        self._present_n = int(state.get("present_n", 0))

    def __repr__(self) -> str:
        return (
            f"IncrementalPDP(feature={self.feature_name!r}, grid={self.grid_rule!r}, "
            f"grid_size={self.grid_size}, alpha={self.alpha}, n_explained={self.n_explained})"
        )

