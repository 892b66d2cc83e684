"""Partial dependence curves of a model at one moment, over the recent rows of a stream (used by
:mod:`torchstream.report.reporter` for the curves at an alarm and at the end of its after
window).

For a feature ``S`` and grid points ``g_1..g_G`` the PD of the model ``f`` over rows ``x_1..x_n``
is ``PD(g) = (1/n) sum_i f(x_i with x_S := g)`` (Friedman 2001), the quantity an iPDP tracks
online (Muschalik et al. 2023). The grid: ``G`` evenly spaced quantiles (5 % .. 95 %) of a
numeric column; each category of a one-hot block (the block set to that category); for a
numeric feature with a missing-value indicator, the value grid with the indicator 0 and a
``"missing"`` point (the indicator 1, the value at its mean). All features' modified rows go to
the model in chunks of at most ``chunk`` rows, under ``torch.no_grad()``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TypedDict

import torch

from torchstream.explain.pdp_grid import MISSING_LABEL, group_spec, select_output

__all__ = ["PDCurve", "pd_curves", "pd_grids"]


class PDCurve(TypedDict):
    """A feature's grid (NaN where a point has no place on an axis), labels and PD values."""

    grid: list[float]
    labels: list[str]
    pd: list[float]


class _Grid(TypedDict):
    """Where each point puts the feature's columns: ``values[p][c]`` for ``columns[c]``."""

    columns: list[int]
    values: list[list[float]]
    grid: list[float]
    labels: list[str]


def pd_grids(rows: torch.Tensor, features: Sequence[str],
             groups: Mapping[str, Sequence[int]], columns: Sequence[str],
             grid_size: int) -> dict[str, _Grid]:
    """The grid of each of ``features`` (a subset of ``groups``, in any order) from
    ``rows [n, d]``; ``groups`` maps every feature of the explainer to its columns, and each
    feature's grid is taken from its own columns, never from its position in ``features``."""
    out: dict[str, _Grid] = {}
    X = rows.to(torch.float64)
    qs = torch.linspace(0.05, 0.95, grid_size, dtype=torch.float64)
    for name in features:
        spec = group_spec(name, groups, list(columns))
        kind, cols, labels = spec.kind, spec.columns, spec.labels
        if kind == "categorical":
            k = len(cols)
            values = [[1.0 if c == p else 0.0 for c in range(k)] for p in range(k)]
            out[name] = {"columns": list(cols), "values": values, "grid": [math.nan] * k,
                         "labels": list(labels)}
            continue
        value = X[:, cols[0]]
        if kind == "nullable":
            value = value[X[:, cols[1]] == 0]
        points = torch.quantile(value, qs).unique().tolist() if value.numel() else []
        vals = [[g] + [0.0] * (len(cols) - 1) for g in points]
        grid, names = list(points), [f"{g:.4g}" for g in points]
        if kind == "nullable":
            mean = float(value.mean()) if value.numel() else 0.0
            vals.append([mean, 1.0])
            grid.append(math.nan)
            names.append(MISSING_LABEL)
        out[name] = {"columns": list(cols), "values": vals, "grid": grid, "labels": names}
    return out


def pd_curves(model: Callable[[torch.Tensor], torch.Tensor], rows: torch.Tensor,
              grids: Mapping[str, _Grid], *, output: int | None = None, chunk: int = 65_536
              ) -> dict[str, PDCurve]:
    """The PD of ``model`` over ``rows [n, d]`` at each feature's grid points (``grids`` from
    :func:`pd_grids`); for an ``[n, k]`` output its column ``output`` (default: class 1 for
    ``k >= 2``)."""
    n = int(rows.shape[0])
    if n == 0:
        return {}
    blocks: list[torch.Tensor] = []
    spans: list[tuple[str, int]] = []
    for name, g in grids.items():
        cols = torch.tensor(g["columns"])
        for point in g["values"]:
            block = rows.clone()
            block[:, cols] = torch.tensor(point, dtype=rows.dtype).to(rows.device)
            blocks.append(block)
        spans.append((name, len(g["values"])))
    if not blocks:
        return {}
    big = torch.cat(blocks)
    outs = []
    with torch.no_grad():
        for start in range(0, big.shape[0], chunk):
            part = big[start:start + chunk]
            outs.append(select_output(model(part), part.shape[0], output, 0).detach())
    means = torch.cat(outs).to("cpu", torch.float64).reshape(-1, n).mean(1).tolist()
    curves: dict[str, PDCurve] = {}
    at = 0
    for name, count in spans:
        g = grids[name]
        curves[name] = {"grid": list(g["grid"]), "labels": list(g["labels"]),
                        "pd": means[at:at + count]}
        at += count
    return curves
