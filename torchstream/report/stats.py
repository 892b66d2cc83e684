"""The statistics of a drift report: importance intervals, input shifts, the distance between two
PD curves and the recovery of the metric (used by :mod:`torchstream.report.reporter`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import TypedDict

import numpy as np
import torch
from scipy import stats

__all__ = ["Column", "Distribution", "Shift", "chi2_test", "curve_difference", "group_columns",
           "input_shift", "kept_rows", "ks_test", "mean_bound", "sample_mean_se", "z_quantile"]


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


def group_columns(members: Sequence[Sequence[int]] | None, d: int) -> list[list[int]]:
    """The input columns of each of ``d`` explained features: its group's columns
    (``members``), or the column of the same index when the explainer explains columns."""
    if members is None:
        return [[j] for j in range(d)]
    return [list(m) for m in members]
