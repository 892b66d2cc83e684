"""The statistics of a drift report: importance intervals, input shifts, the distance between two
PD curves and the recovery of the metric (used by :mod:`torchstream.report.reporter`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import NamedTuple, TypedDict

import numpy as np
import torch
from scipy import stats

__all__ = ["Column", "Distribution", "GapDrop", "Shift", "chi2_test", "curve_difference",
           "group_columns", "input_shift", "kept_rows", "ks_test", "mean_bound", "quantile_cells",
           "reweighted_gap", "sample_mean_se", "z_quantile"]


class Column(TypedDict):
    """How one feature's input moved between the two windows (a feature of several encoded
    columns: its column with the largest ``|t|``, named in ``input_column``)."""

    input_column: str
    input_shift: float
    smd: float
    input_moved: bool
    mean_before: float
    mean_after: float
    var_before: float
    var_after: float


class Distribution(TypedDict):
    """A feature's distribution test between the two windows: ``test`` ``"ks"`` (numeric: the
    two-sample Kolmogorov-Smirnov statistic ``D`` on the windows' row samples), ``"chi2"`` (a
    one-hot block or a missing indicator: Pearson's chi-squared on the category counts, the
    statistic reported is the total variation distance) or ``"ks+chi2"`` (a numeric feature
    with a missing indicator: the larger statistic, twice the smaller p-value); ``moved`` when
    ``p`` is below the level (Bonferroni over the features) and the statistic is at least the
    effect floor; ``labels`` / ``before`` / ``after``: the deciles (numeric) or the category
    shares, for the figure."""

    input_test: str
    input_statistic: float
    input_p: float
    input_moved: bool
    input_labels: list[str]
    input_before: list[float]
    input_after: list[float]


def ks_test(a: torch.Tensor, b: torch.Tensor) -> tuple[float, float]:
    """Two-sample Kolmogorov-Smirnov: ``D = max_x |F_a(x) - F_b(x)|`` over the pooled values and
    its p-value from the one-sample distribution of ``D`` at the effective size
    ``n_e = round(n m / (n + m))`` (``P(D_{n_e} >= D)``, close to Kolmogorov's limit
    ``Q_KS(sqrt(n_e) D)`` for large samples); NaN when a sample is empty."""
    n, m = int(a.numel()), int(b.numel())
    if n == 0 or m == 0:
        return math.nan, math.nan
    a, b = a.to(torch.float64).sort().values, b.to(torch.float64).sort().values
    x = torch.cat([a, b])
    fa = torch.searchsorted(a, x, right=True).to(torch.float64) / n
    fb = torch.searchsorted(b, x, right=True).to(torch.float64) / m
    d = float((fa - fb).abs().max())
    return d, float(stats.kstwo.sf(d, round(n * m / (n + m))))


def chi2_test(before: Sequence[float], after: Sequence[float]) -> tuple[float, float, float]:
    """Pearson's chi-squared test of homogeneity on the ``2 x k`` table of category counts
    ``before`` / ``after`` (categories seen in neither window left out; ``k - 1`` degrees of
    freedom): ``(chi2, p, total variation distance of the shares)``; NaN when a window is
    empty, ``p = 1`` with a single category."""
    cb = torch.tensor(list(before), dtype=torch.float64)
    ca = torch.tensor(list(after), dtype=torch.float64)
    seen = (cb + ca) > 0
    cb, ca = cb[seen], ca[seen]
    nb, na = float(cb.sum()), float(ca.sum())
    if nb == 0 or na == 0:
        return math.nan, math.nan, math.nan
    tv = 0.5 * float((cb / nb - ca / na).abs().sum())
    if cb.numel() < 2:
        return 0.0, 1.0, tv
    total = cb + ca
    eb, ea = total * nb / (nb + na), total * na / (nb + na)
    chi2 = float(((cb - eb) ** 2 / eb).sum() + ((ca - ea) ** 2 / ea).sum())
    return chi2, float(stats.chi2.sf(chi2, cb.numel() - 1)), tv


_HASH = 2654435761  # Knuth's multiplicative hash: rows kept look random, whatever the order


def kept_rows(start: int, n: int, share: float) -> torch.Tensor:
    """Which of the rows ``start .. start + n - 1`` a window's bounded sample keeps: a row
    ``r`` when ``(r * 2654435761 mod 2^32) / 2^32 < share`` — about ``share`` of the rows,
    the same rows after a resume (no state), no periodic pattern of the stream followed."""
    r = torch.arange(start, start + n, dtype=torch.int64)
    return ((r * _HASH) % (1 << 32)).to(torch.float64) / float(1 << 32) < share


def z_quantile(level: float, m: int) -> float:
    """Two-sided normal quantile with a Bonferroni correction over ``m`` tests."""
    return NormalDist().inv_cdf(1.0 - level / (2.0 * max(m, 1)))


def mean_bound(snaps: list[list[float]], d: int, z: float, n_eff: float
               ) -> tuple[list[float], list[float]]:
    """Per-feature mean of the snapshots and the half-width ``z * s / sqrt(n_eff)``."""
    if not snaps:
        return [math.nan] * d, [math.nan] * d
    t = torch.tensor(snaps, dtype=torch.float64)
    mean = t.mean(0)
    sd = t.std(0, correction=1) if t.shape[0] > 1 else torch.zeros(d, dtype=torch.float64)
    return mean.tolist(), (z * sd / math.sqrt(n_eff)).tolist()


@dataclass(frozen=True)
class Shift:
    """Row means and variances of every input column in the two windows and Welch's t
    ``(m_a - m_b) / sqrt(v_a / n_a + v_b / n_b)`` (``t`` is None when a window is empty)."""

    mean_before: torch.Tensor
    mean_after: torch.Tensor
    var_before: torch.Tensor
    var_after: torch.Tensor
    t: torch.Tensor | None
    smd: torch.Tensor | None
    moved: torch.Tensor | None

    @property
    def any_moved(self) -> bool:
        return self.moved is not None and bool(self.moved.any())

    def column(self, columns: Sequence[int], names: Sequence[str]) -> Column:
        """The entry of a feature made of the input ``columns`` (the one with the largest
        ``|t|``); NaN when a window is empty or the columns are not inputs."""
        d = 0 if self.t is None else self.t.numel()
        if self.t is None or not columns or max(columns) >= d:
            nan = math.nan
            return {"input_column": "", "input_shift": nan, "smd": nan, "input_moved": False,
                    "mean_before": nan, "mean_after": nan, "var_before": nan, "var_after": nan}
        assert self.smd is not None and self.moved is not None
        j = max(columns, key=lambda c: abs(float(self.t[c])))  # type: ignore[index]
        return {"input_column": names[j] if j < len(names) else f"x{j}",
                "input_shift": float(self.t[j]), "smd": float(self.smd[j]),
                "input_moved": bool(self.moved[list(columns)].any()),
                "mean_before": float(self.mean_before[j]), "mean_after": float(self.mean_after[j]),
                "var_before": float(self.var_before[j]), "var_after": float(self.var_after[j])}


def _pooled(sums: list[list[float]], squares: list[list[float]], n: int
            ) -> tuple[torch.Tensor, torch.Tensor]:
    s = torch.tensor(sums, dtype=torch.float64).sum(0)
    q = torch.tensor(squares, dtype=torch.float64).sum(0)
    mean = s / n
    return mean, (q - n * mean * mean).clamp_min(0.0) / max(n - 1, 1)


def input_shift(before: tuple[list[list[float]], list[list[float]], int],
                after: tuple[list[list[float]], list[list[float]], int], z: float) -> Shift:
    """Welch's t per column from each window's per-batch ``(sums, sums of squares, rows)``;
    a column has moved when ``|t| > z`` (large-sample test; rows taken as independent)."""
    (sb, qb, nb), (sa, qa, na) = before, after
    if nb == 0 or na == 0:
        empty = torch.empty(0, dtype=torch.float64)
        return Shift(empty, empty, empty, empty, None, None, None)
    mb, vb = _pooled(sb, qb, nb)
    ma, va = _pooled(sa, qa, na)
    se = torch.sqrt(vb / nb + va / na)
    diff = ma - mb
    t = torch.where(se > 0, diff / se, torch.where(diff == 0, 0.0, math.inf * diff.sign()))
    sd = torch.sqrt((vb + va) / 2)
    smd = torch.where(sd > 0, diff / sd, torch.zeros_like(diff))
    return Shift(mb, ma, vb, va, t, smd, t.abs() > z)


def curve_difference(grid_b: Sequence[float], pd_b: Sequence[float], grid_a: Sequence[float],
                     pd_a: Sequence[float], *, points: int = 50) -> tuple[float, float]:
    """How a PD curve moved: ``(distance, level_shift)``.

    The curves are compared at common points: numeric points (finite grid values) on
    ``points`` evenly spaced values over the range both grids cover, each curve linearly
    interpolated; points without a place on the axis (categories, a "missing" point: NaN grid
    values) one to one. ``level_shift`` is the mean of the differences (after minus before: the
    whole curve moved, e.g. with the class balance); ``distance`` the root mean square of the
    differences once that level is removed, the change of the curve's shape (the relationship).
    Both NaN when the curves share no point.
    """
    gb, yb = np.asarray(grid_b, dtype=np.float64), np.asarray(pd_b, dtype=np.float64)
    ga, ya = np.asarray(grid_a, dtype=np.float64), np.asarray(pd_a, dtype=np.float64)
    diffs: list[np.ndarray] = []
    nb, na = np.isfinite(gb), np.isfinite(ga)
    if nb.sum() >= 1 and na.sum() >= 1:
        lo = max(gb[nb].min(), ga[na].min())
        hi = min(gb[nb].max(), ga[na].max())
        if hi >= lo:
            x = np.linspace(lo, hi, points) if hi > lo else np.array([lo])
            ob, oa = np.argsort(gb[nb]), np.argsort(ga[na])
            cb = np.interp(x, gb[nb][ob], yb[nb][ob])
            ca = np.interp(x, ga[na][oa], ya[na][oa])
            diffs.append(ca - cb)
    eb, ea = yb[~nb], ya[~na]
    k = min(eb.size, ea.size)
    if k:
        diffs.append(ea[:k] - eb[:k])
    d = np.concatenate(diffs) if diffs else np.empty(0)
    d = d[np.isfinite(d)]
    if not d.size:
        return math.nan, math.nan
    level = float(d.mean())
    return float(np.sqrt(np.mean((d - level) ** 2))), level


def sample_mean_se(total: float, squares: float, n: int) -> tuple[float, float]:
    """Mean and standard error of ``n`` values given their sum and sum of squares."""
    if n == 0:
        return math.nan, math.nan
    mean = total / n
    var = max(squares - n * mean * mean, 0.0) / max(n - 1, 1)
    return mean, math.sqrt(var / n)


class GapDrop(NamedTuple):
    """The drop of a fixed model's calibration gap from the before rows to the after rows
    (:func:`reweighted_gap`): ``gap_before`` the before rows' mean, ``expected`` the mean the
    after rows would have under the before rows' ``P(y|x)`` (the before rows' cell means
    weighted by the after rows' cell shares; ``gap_before`` without cells), ``gap_after`` the
    after rows' mean, ``drop = expected - gap_after``, ``se`` its standard error, and the rows
    used (``rows_left_out``: after rows in a cell with fewer than ``min_rows`` before rows)."""

    gap_before: float
    expected: float
    gap_after: float
    drop: float
    se: float
    rows_before: int
    rows_after: int
    rows_left_out: int


def quantile_cells(before: torch.Tensor, after: torch.Tensor, q: int
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """The cells of a numeric column's rows for :func:`reweighted_gap`: ``q`` bins whose inner
    edges are the before rows' ``k / q`` quantiles (``k = 1 .. q - 1``, linear interpolation;
    a value on an edge goes to the bin above it), the same edges for the after rows; an after
    row below the before rows' smallest value or above their largest gets cell ``-1`` (the
    before rows say nothing there)."""
    before = before.to(torch.float64)
    after = after.to(torch.float64)
    if before.numel() == 0:
        return (torch.empty(0, dtype=torch.int64),
                torch.full((after.numel(),), -1, dtype=torch.int64))
    inner = torch.linspace(0.0, 1.0, q + 1, dtype=torch.float64)[1:-1]
    edges = torch.quantile(before, inner).contiguous()
    cb = torch.searchsorted(edges, before.contiguous(), right=True)
    ca = torch.searchsorted(edges, after.contiguous(), right=True)
    outside = (after < before.min()) | (after > before.max())
    return cb, torch.where(outside, torch.full_like(ca, -1), ca)


def reweighted_gap(before: torch.Tensor, after: torch.Tensor,
                   cells_before: torch.Tensor | None = None,
                   cells_after: torch.Tensor | None = None, *, min_rows: int = 2) -> GapDrop:
    """How far the per-row values ``after`` (a fixed model's calibration gaps on the rows after
    a change) fall below what the values ``before`` predict for them.

    Without cells: ``expected`` is the mean of ``before`` and ``se`` Welch's
    ``sqrt(s_b^2 / n_b + s_a^2 / n_a)``. With cells (one per row, e.g. the bins of a moved input
    column, :func:`quantile_cells`; ``-1``: no cell) the before rows are reweighted to the after
    rows' cells (post-stratification, a histogram estimate of the density ratio
    ``p_after(x) / p_before(x)`` on the cells): ``expected = sum_c w_c mean_b(c)`` with
    ``w_c = n_a(c) / n_a`` over the cells holding at least ``min_rows`` before rows (after
    rows elsewhere are left out: their inputs were not seen before) and
    ``se^2 = sum_c w_c^2 s_b(c)^2 / n_b(c) + s_a^2 / n_a`` (``s_a``: the after rows' standard
    deviation, which also holds their spread between the cells). NaN with fewer than two rows
    a side.
    """
    b = before.to(torch.float64).reshape(-1)
    a = after.to(torch.float64).reshape(-1)
    n_all = int(a.numel())
    nan = math.nan
    if cells_before is None or cells_after is None:
        cb = torch.zeros(b.numel(), dtype=torch.int64)
        ca = torch.zeros(n_all, dtype=torch.int64)
    else:
        cb, ca = cells_before.reshape(-1).to(torch.int64), cells_after.reshape(-1).to(torch.int64)
    if cb.numel() != b.numel() or ca.numel() != n_all:
        raise ValueError(f"cells: {cb.numel()} before and {ca.numel()} after for {b.numel()} "
                         f"and {n_all} values")
    g_b = float(b.mean()) if b.numel() else nan
    keys, counts = torch.unique(cb[cb >= 0], return_counts=True)
    kept_cells = keys[counts >= min_rows]
    used = torch.isin(ca, kept_cells)
    a_used = a[used]
    n_a, n_b = int(a_used.numel()), int(b.numel())
    if n_a < 2 or n_b < 2:
        return GapDrop(g_b, nan, nan, nan, nan, n_b, n_a, n_all - n_a)
    expected, var = 0.0, 0.0
    for c in torch.unique(ca[used]).tolist():
        rows = b[cb == c]
        w = float((ca[used] == c).sum()) / n_a
        expected += w * float(rows.mean())
        var += w * w * float(rows.var(correction=1)) / rows.numel()
    g_a = float(a_used.mean())
    var += float(a_used.var(correction=1)) / n_a
    return GapDrop(g_b, expected, g_a, expected - g_a, math.sqrt(var), n_b, n_a, n_all - n_a)


def group_columns(members: Sequence[Sequence[int]] | None, d: int) -> list[list[int]]:
    """The input columns of each of ``d`` explained features: its group's columns
    (``members``), or the column of the same index when the explainer explains columns."""
    if members is None:
        return [[j] for j in range(d)]
    return [list(m) for m in members]
