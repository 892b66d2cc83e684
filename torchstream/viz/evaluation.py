"""Plots of an evaluation (A.6 §7 [^1]): scores over time with drifts, detections, feature
selections and a spider chart comparing predictors.

Every function draws on a new Agg figure (no pyplot state, nothing to close), saves it as PNG
when ``path`` is given and returns it. Positions of drifts and detections are **observation
indices** into the full data set (as in :mod:`torchstream.evaluate.measures.detection`); a score
series of time steps is placed at the observation index of each step's first row,
``n_pretrain + step * batch_size``, so both share one axis.

The spider chart's radii come from :func:`spider_radii`, which can be checked without drawing.
Each axis has fixed bounds (``[0, 1]`` for accuracy, F1, ...) or, for a measure without bounds
such as a loss or a time, is the ratio to the best predictor on a scale anchored at 0, so the
worst predictor does not collapse to the centre; lower-is-better measures are inverted:

>>> spider_radii([[0.9, 2.0], [0.7, 1.0]], ranges=[(0, 1), None], invert=[False, True]).tolist()
[[0.9, 0.5], [0.7, 1.0]]

References
----------
[^1]: Haug, J., Tramountani, E. and Kasneci, G. (2022). Standardized evaluation of machine
    learning methods for evolving data streams. arXiv:2204.13625.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from matplotlib import colormaps
from matplotlib.lines import Line2D

from torchstream.evaluate.measures.detection import observation_index
from torchstream.select.stability import selection_matrix
from torchstream.viz._figure import agg_figure, finish_figure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "SMOOTH_STEPS",
    "UNIT_MEASURES",
    "detector_colors",
    "plot_detections",
    "plot_feature_weights",
    "plot_metric_over_time",
    "plot_selected_features",
    "plot_selection_frequency",
    "plot_spider",
    "selection_frequency",
    "smooth_steps",
    "spider_radii",
    "spider_ranges",
]

Drift = int | tuple[int, int]
PathLike = str | os.PathLike[str] | None

SMOOTH_STEPS = 10
"""Steps averaged by the smoothed score plots (``smooth`` of :func:`plot_metric_over_time`)."""





def _drift_bounds(drift: Any, name: str) -> tuple[int, int]:
    if isinstance(drift, (tuple, list)):
        if len(drift) != 2 or drift[1] < drift[0]:
            raise ValueError(f"{name} must be an int or a (start, end) pair, got {drift!r}")
        return int(drift[0]), int(drift[1])
    return int(drift), int(drift)


def _mark_known(ax: Any, known_drifts: Sequence[Drift], label: bool = True) -> None:
    for i, d in enumerate(known_drifts):
        a, b = _drift_bounds(d, f"known_drifts[{i}]")
        kw = {"label": "known drift"} if label and i == 0 else {}
        if a == b:
            ax.axvline(a, color="red", ls="--", lw=1, **kw)
        else:
            ax.axvspan(a, b, color="red", alpha=0.15, **kw)


def _series_dict(series: Mapping[str, Any] | Any, name: str) -> dict[str, np.ndarray]:
    if not isinstance(series, Mapping):
        series = {"": series}
    out = {}
    for k, v in series.items():
        arr = np.asarray(v, dtype=np.float64)
        if arr.ndim != 1:
            raise ValueError(f"{name}[{k!r}] must be 1-d (one value per step), got {arr.shape}")
        out[str(k)] = arr
    if not out:
        raise ValueError(f"{name} is empty")
    return out


def smooth_steps(values: Sequence[float] | np.ndarray, window: int) -> np.ndarray:
    """Trailing mean of the finite values among the last ``window`` steps, ``[T]``.

    Step ``t`` gets the mean of the finite ``values[s]`` for ``t - window < s <= t``; a step
    without a value (NaN: not tested, e.g. between the tests of a periodic holdout) stays NaN.
    On a series without gaps this is pandas' ``rolling(window, min_periods=1).mean()``.

    >>> smooth_steps([1.0, 3.0, float("nan"), 5.0], 2).tolist()
    [1.0, 2.0, nan, 5.0]
    """
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(f"window must be a positive integer (steps), got {window!r}")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"values must be 1-d (one value per step), got shape {v.shape}")
    finite = np.isfinite(v)
    csum = np.concatenate([[0.0], np.cumsum(np.where(finite, v, 0.0))])
    ccnt = np.concatenate([[0], np.cumsum(finite)])
    hi = np.arange(1, v.size + 1)
    lo = np.maximum(hi - window, 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = (csum[hi] - csum[lo]) / (ccnt[hi] - ccnt[lo])
    return np.where(finite, mean, np.nan)


def detector_colors(n: int) -> list[tuple[float, float, float, float]]:
    """``n`` distinct RGBA colours for detectors: the eight of ``Dark2``, or evenly spaced on
    ``viridis`` for more (neither includes the red of the known drifts)."""
    if n <= 8:
        return [colormaps["Dark2"](i) for i in range(n)]
    return [colormaps["viridis"](x) for x in np.linspace(0.0, 0.9, n)]


def _mark_detections(
    ax: Axes, detected: Sequence[int] | Mapping[str, Sequence[int]]
) -> tuple[list[Line2D], list[str]]:
    """Dotted vertical lines at the detections; legend handles and labels for them."""
    if not isinstance(detected, Mapping):
        for i, p in enumerate(detected):
            label = "detected drift" if i == 0 else None
            ax.axvline(int(p), color="orange", ls=":", lw=1, label=label)
        return [], []
    handles: list[Line2D] = []
    labels: list[str] = []
    for (name, positions), color in zip(detected.items(), detector_colors(len(detected))):
        pos = np.asarray(positions, dtype=np.int64).reshape(-1)
        for p in pos:
            ax.axvline(int(p), color=color, ls=":", lw=1.2)
        handles.append(Line2D([], [], color=color, ls=":", lw=1.2))
        labels.append(f"{name} ({pos.size} detection{'' if pos.size == 1 else 's'})")
    return handles, labels


def plot_metric_over_time(
    series: Mapping[str, Any] | Any,
    *,
    known_drifts: Sequence[Drift] = (),
    detected_drifts: Sequence[int] | Mapping[str, Sequence[int]] = (),
    n_pretrain: int = 0,
    batch_size: int = 1,
    variances: Mapping[str, Any] | None = None,
    smooth: int = 1,
    y_label: str = "",
    path: PathLike = None,
) -> Figure:
    """Per-step scores (one line per entry of ``series``) over observation indices.

    Only the finite values are drawn, joined by a line, so a series that is NaN at the steps
    without a test (periodic holdout) shows its tested steps. ``smooth > 1`` draws
    :func:`smooth_steps` of each series (and of its variance) instead of the raw values and says
    so in the y label. Entries of ``variances`` add a ``± sqrt(variance)`` band; known drifts are
    dashed lines (spans for ``(start, end)``). ``detected_drifts`` are dotted lines: a list of
    positions, or ``{detector: positions}`` with one colour and one legend entry per detector.
    """
    data = _series_dict(series, "series")
    var = _series_dict(variances, "variances") if variances else {}
    unknown = sorted(set(var) - set(data))
    if unknown:
        raise ValueError(f"variances has series {unknown} that are not in series")
    if smooth != 1:
        data = {k: smooth_steps(v, smooth) for k, v in data.items()}
        var = {k: smooth_steps(v, smooth) for k, v in var.items()}
    fig = agg_figure((10, 4))
    ax = fig.add_subplot(1, 1, 1)
    for k, v in data.items():
        x = np.asarray([observation_index(t, n_pretrain, batch_size) for t in range(v.size)])
        keep = np.isfinite(v)
        (line,) = ax.plot(x[keep], v[keep], lw=1, label=k or None)
        if keep.sum() == 1:
            line.set_marker(".")  # a single tested step: a point, not an invisible line
        if k in var:
            if var[k].shape != v.shape:
                raise ValueError(f"variances[{k!r}] has shape {var[k].shape}, series {v.shape}")
            band = keep & np.isfinite(var[k])
            sd = np.sqrt(var[k][band])
            ax.fill_between(x[band], v[band] - sd, v[band] + sd, alpha=0.2)
    _mark_known(ax, known_drifts)
    extra_handles, extra_labels = _mark_detections(ax, detected_drifts)
    ax.set_xlabel("observation")
    ax.set_ylabel(y_label if smooth == 1 else f"{y_label} (mean of last {smooth} steps)".strip())
    handles, labels = ax.get_legend_handles_labels()
    if handles or extra_handles:
        ax.legend(
            handles + extra_handles,
            labels + extra_labels,
            fontsize="small",
            loc="upper left",
            bbox_to_anchor=(1.01, 1.0),
        )
    return finish_figure(fig, path)


def plot_detections(
    detections: Mapping[str, Sequence[int]],
    *,
    known_drifts: Sequence[Drift],
    n_total: int,
    path: PathLike = None,
) -> Figure:
    """One row per detector: its detections (observation indices) as tick marks, with the
    known drifts as vertical lines (spans for ``(start, end)``), over ``[0, n_total)``."""
    if not detections:
        raise ValueError("detections is empty: pass {detector name: detected positions}")
    names = list(detections)
    fig = agg_figure((10, 1 + 0.6 * len(names)))
    ax = fig.add_subplot(1, 1, 1)
    _mark_known(ax, known_drifts)
    for row, name in enumerate(names):
        pos = np.asarray(detections[name], dtype=np.int64).reshape(-1)
        bad = pos[(pos < 0) | (pos >= n_total)]
        if bad.size:
            raise ValueError(f"detections[{name!r}] has {int(bad[0])} outside [0, {n_total})")
        ax.scatter(pos, np.full(pos.size, row), marker="|", s=300, color="black")
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(-0.5, len(names) - 0.5)
    ax.set_xlim(0, n_total)
    ax.set_xlabel("observation")
    return finish_figure(fig, path)


def _selection_mask(selections: Any, n_features: int | None) -> np.ndarray:
    if isinstance(selections, np.ndarray):
        selections = torch.from_numpy(selections)
    return selection_matrix(selections, n_features).numpy()


def selection_frequency(
    selections: Sequence[Iterable[int]] | Any, n_features: int | None = None
) -> np.ndarray:
    """Share of steps at which each feature was selected, ``[m]`` (index collections with
    ``n_features``, or a 0/1 matrix ``[T, m]``)."""
    Z = _selection_mask(selections, n_features)
    if Z.shape[0] == 0:
        raise ValueError("selections is empty")
    return Z.mean(0)


def plot_selected_features(
    selections: Sequence[Iterable[int]] | Any,
    n_features: int | None = None,
    *,
    path: PathLike = None,
) -> Figure:
    """Scatter of the selected feature indices (y) at every step (x)."""
    Z = _selection_mask(selections, n_features)
    t, j = np.nonzero(Z)
    fig = agg_figure((10, 4))
    ax = fig.add_subplot(1, 1, 1)
    ax.scatter(t, j, marker="s", s=4, color="tab:blue")
    ax.set_xlabel("time step")
    ax.set_ylabel("selected feature")
    ax.set_ylim(-0.5, Z.shape[1] - 0.5)
    return finish_figure(fig, path)


def _names(feature_names: Sequence[str] | None, m: int) -> list[str]:
    if feature_names is None:
        return [str(j) for j in range(m)]
    if len(feature_names) != m:
        raise ValueError(f"feature_names has {len(feature_names)} names for {m} features")
    return [str(n) for n in feature_names]


def _top(scores: np.ndarray, top_n: int | None) -> np.ndarray:
    order = np.argsort(-scores, kind="stable")
    if top_n is None:
        return order
    if not isinstance(top_n, int) or top_n < 1:
        raise ValueError(f"top_n must be a positive integer or None, got {top_n!r}")
    return order[:top_n]


def plot_selection_frequency(
    selections: Mapping[str, Any],
    n_features: int | None = None,
    *,
    feature_names: Sequence[str] | None = None,
    top_n: int | None = None,
    path: PathLike = None,
) -> Figure:
    """Bars of :func:`selection_frequency` per feature, one group of bars per model; with
    ``top_n``, the features most often selected (over all models) only."""
    if not selections:
        raise ValueError("selections is empty: pass {model name: selections}")
    freq = {k: selection_frequency(v, n_features) for k, v in selections.items()}
    widths = {f.size for f in freq.values()}
    if len(widths) != 1:
        raise ValueError(f"the models' selections have different feature counts {sorted(widths)}")
    m = widths.pop()
    names = _names(feature_names, m)
    cols = _top(np.mean(list(freq.values()), axis=0), top_n)
    fig = agg_figure((max(6, 0.4 * cols.size * len(freq)), 4))
    ax = fig.add_subplot(1, 1, 1)
    w = 0.8 / len(freq)
    for i, (k, f) in enumerate(freq.items()):
        ax.bar(np.arange(cols.size) + i * w, f[cols], width=w, label=k)
    ax.set_xticks(np.arange(cols.size) + 0.4 - w / 2, [names[j] for j in cols], rotation=90)
    ax.set_ylabel("selection frequency")
    ax.legend(fontsize="small")
    return finish_figure(fig, path)


def plot_feature_weights(
    weights: Mapping[str, Any],
    *,
    feature_names: Sequence[str] | None = None,
    top_n: int | None = None,
    path: PathLike = None,
) -> Figure:
    """Box plots of each feature's weights over time (``weights[model]``: ``[T, m]``), one box
    per model and feature; with ``top_n``, the features with the largest mean ``|weight|``."""
    if not weights:
        raise ValueError("weights is empty: pass {model name: [T, m] weights}")
    arrs = {}
    for k, v in weights.items():
        a = np.asarray(v.detach().cpu() if hasattr(v, "detach") else v, dtype=np.float64)
        if a.ndim != 2:
            raise ValueError(f"weights[{k!r}] must be [T, m], got shape {a.shape}")
        arrs[k] = a
    ms = {a.shape[1] for a in arrs.values()}
    if len(ms) != 1:
        raise ValueError(f"the models' weights have different feature counts {sorted(ms)}")
    m = ms.pop()
    names = _names(feature_names, m)
    cols = _top(np.mean([np.abs(a).mean(0) for a in arrs.values()], axis=0), top_n)
    fig = agg_figure((max(6, 0.4 * cols.size * len(arrs)), 4))
    ax = fig.add_subplot(1, 1, 1)
    w = 0.8 / len(arrs)
    for i, (k, a) in enumerate(arrs.items()):
        box = ax.boxplot(
            [a[:, j] for j in cols],
            positions=np.arange(cols.size) + i * w,
            widths=w * 0.9,
            patch_artist=True,
            manage_ticks=False,
        )
        color = f"C{i}"
        for patch in box["boxes"]:
            patch.set_facecolor(color)
        ax.plot([], [], color=color, lw=6, label=k)
    ax.set_xticks(np.arange(cols.size) + 0.4 - w / 2, [names[j] for j in cols], rotation=90)
    ax.set_ylabel("feature weight")
    ax.legend(fontsize="small")
    return finish_figure(fig, path)


UNIT_MEASURES = ("accuracy", "f1", "precision", "recall", "kappa")
"""Measures that live in ``[0, 1]``: their spider axis spans ``[0, 1]`` (a ``_window`` or other
``_`` suffix, e.g. ``accuracy_window``, and upper case, e.g. ``F1``, name the same measure)."""


def spider_ranges(measure_names: Sequence[str]) -> list[tuple[float, float] | None]:
    """The fixed bounds of each spider axis: ``(0, 1)`` for the :data:`UNIT_MEASURES`, ``None``
    (ratio to the best predictor, see :func:`spider_radii`) for every other measure."""
    out: list[tuple[float, float] | None] = []
    for name in measure_names:
        base = str(name).lower().replace(" ", "_")
        unit = any(base == m or base.startswith(m + "_") for m in UNIT_MEASURES)
        out.append((0.0, 1.0) if unit else None)
    return out


def spider_radii(
    values: Any,
    *,
    ranges: Sequence[tuple[float, float] | None] | None = None,
    invert: Sequence[bool] | None = None,
    scale: str = "ratio",
) -> np.ndarray:
    """Radii ``[n_models, n_measures]`` in ``[0, 1]`` for a spider chart.

    ``values[i, j]`` is model ``i``'s value of measure ``j``. A measure with bounds
    ``(lo, hi) = ranges[j]`` is scaled by ``r = (v - lo) / (hi - lo)``, and ``1 - r`` when lower
    is better (``invert[j]`` true), so the better model is always drawn farther out; a value
    outside its bounds raises (nothing is clipped). A measure without bounds (``ranges`` or
    ``ranges[j]`` ``None``) is scaled by ``scale``:

    * ``"ratio"`` (default): the ratio to the best model on a scale anchored at 0, ``v / max``,
      or ``min / v`` when lower is better (a model twice as slow as the best gets 0.5). The
      values must be non-negative; only a model infinitely worse than the best reaches 0.
    * ``"minmax"``: ``(v - min) / (max - min)`` over the models, so the worst model sits at 0.

    When all models tie, every radius is 1.
    """
    if scale not in ("ratio", "minmax"):
        raise ValueError(f"scale must be 'ratio' or 'minmax', got {scale!r}")
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2 or v.size == 0:
        raise ValueError(f"values must be a non-empty [n_models, n_measures] array, got {v.shape}")
    if not np.isfinite(v).all():
        i, j = np.argwhere(~np.isfinite(v))[0]
        raise ValueError(f"values[{i}, {j}] = {v[i, j]} is not finite")
    n_meas = v.shape[1]
    if ranges is not None and len(ranges) != n_meas:
        raise ValueError(f"ranges has {len(ranges)} entries for {n_meas} measures")
    if invert is not None and len(invert) != n_meas:
        raise ValueError(f"invert has {len(invert)} entries for {n_meas} measures")
    out = np.empty_like(v)
    for j in range(n_meas):
        col = v[:, j]
        inv = invert is not None and bool(invert[j])
        rng = None if ranges is None else ranges[j]
        if rng is not None:
            lo, hi = (float(b) for b in rng)
            if not hi > lo:
                raise ValueError(f"ranges[{j}] = {rng!r} must have low < high")
            bad = np.flatnonzero((col < lo) | (col > hi))
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"values[{i}, {j}] = {col[i]} lies outside ranges[{j}] = {rng!r}")
            r = (col - lo) / (hi - lo)
            out[:, j] = 1.0 - r if inv else r
        elif scale == "minmax":
            lo, hi = float(col.min()), float(col.max())
            r = np.ones_like(col) if hi == lo else (col - lo) / (hi - lo)
            out[:, j] = 1.0 - r if inv and hi != lo else r
        else:
            out[:, j] = _ratio_to_best(col, j, inv)
    return out


def _ratio_to_best(col: np.ndarray, j: int, invert: bool) -> np.ndarray:
    neg = np.flatnonzero(col < 0)
    if neg.size:
        i = int(neg[0])
        raise ValueError(
            f"values[{i}, {j}] = {col[i]} is negative: the ratio scale needs values >= 0; "
            f"give ranges[{j}] = (low, high) for this measure"
        )
    best = float(col.min() if invert else col.max())
    if best == 0.0:
        # all at 0 tie when higher is better; lower is better: the rest is infinitely worse
        return np.ones_like(col) if not invert else (col == 0.0).astype(np.float64)
    return best / col if invert else col / best  # col >= best > 0 when inverted


def plot_spider(
    values: Any,
    measure_names: Sequence[str],
    model_names: Sequence[str],
    *,
    ranges: Sequence[tuple[float, float] | None] | None = None,
    invert: Sequence[bool] | None = None,
    scale: str = "ratio",
    path: PathLike = None,
) -> Figure:
    """Spider (radar) chart of the models on several measures, radii from
    :func:`spider_radii` with ``ranges`` (default :func:`spider_ranges` of the measure names:
    ``[0, 1]`` for accuracy, F1, ..., the ratio to the best model otherwise); inverted measures
    are labelled with ``(inv.)``, ratio-scaled ones with ``(value ÷ best)`` or
    ``(best ÷ value)``."""
    n_meas = np.shape(values)[1] if np.ndim(values) == 2 else -1
    if n_meas >= 0 and len(measure_names) != n_meas:
        raise ValueError(f"measure_names has {len(measure_names)} names for {n_meas} measures")
    if ranges is None:
        ranges = spider_ranges(measure_names)
    r = spider_radii(values, ranges=ranges, invert=invert, scale=scale)
    n_models = r.shape[0]
    if len(model_names) != n_models:
        raise ValueError(f"model_names has {len(model_names)} names for {n_models} models")
    angles = np.linspace(0, 2 * np.pi, n_meas, endpoint=False)
    closed = np.append(angles, angles[0])
    fig = agg_figure((6, 6))
    ax = fig.add_subplot(1, 1, 1, projection="polar")
    for i, name in enumerate(model_names):
        ax.plot(closed, np.append(r[i], r[i, 0]), lw=1.5, label=name)
        ax.fill(closed, np.append(r[i], r[i, 0]), alpha=0.1)
    labels = []
    for j, n in enumerate(measure_names):
        inv = invert is not None and bool(invert[j])
        if ranges[j] is None and scale == "ratio":
            labels.append(f"{n}\n(best ÷ value)" if inv else f"{n}\n(value ÷ best)")
        else:
            labels.append(f"{n} (inv.)" if inv else n)
    ax.set_xticks(angles, labels)
    ax.set_rlabel_position(180.0 / n_meas)  # radial ticks between the first two axes
    ax.set_ylim(0, 1)
    ax.legend(loc="upper right", bbox_to_anchor=(1.25, 1.1), fontsize="small")
    return finish_figure(fig, path)
