"""What the windows around an alarm say: the entries the drift report records per batch, and the
verdicts built from them — the interval rule for a feature's importance and an interaction
pair's value, the distribution test of one feature, the metric of a window and the kind of
change (the rules are stated in :mod:`torchstream.report.reporter`'s docstring).

Every function here reads entries (or numbers) and returns a result: no state, no model calls.

>>> a = {"start": 0, "end": 4, "metric": 3.0, "metric_sq": 3.0}
>>> b = {"start": 4, "end": 8, "metric": 1.0, "metric_sq": 1.0}
>>> rows_in([a, b]), round(window_metric([a, b])[0], 3)  # 4 of 8 rows right
(8, 0.5)
>>> interval_verdict(1.0, 0.1, 2.0, 0.1, scale=2.0, min_effect=0.05)  # after - before > bounds
('gained', 5.0)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypedDict

import torch

from torchstream.explain.pdp_grid import GroupSpec
from torchstream.report.format import PairChange
from torchstream.report.stats import (
    Distribution,
    chi2_test,
    ks_test,
    mean_bound,
    quantile_cells,
    sample_mean_se,
    z_quantile,
)

__all__ = ["CELLS", "Entry", "cells", "classify", "distribution_test", "interval_verdict",
           "pair_changes", "rows_in", "sample_rows", "window_labels", "window_metric"]


class Entry(TypedDict):
    """One recorded batch (or a block of consecutive short ones) of the drift report."""

    start: int
    end: int
    snapshots: list[list[float]]
    pairs: list[list[float]]  # per interaction explainer: its pairs' values (NaN: not explained)
    sums: list[float]
    squares: list[float]
    metric: float
    metric_sq: float
    sample: list[list[float]]  # the rows kept for the distribution tests (kept_rows)
    labels: list[float]  # their labels (the test of P(y|x) by the reference model)
    gap: float  # sum over rows of correct - confidence (NaN: not probabilities)
    gap_sq: float


_DECILES = torch.linspace(0.1, 0.9, 9, dtype=torch.float64)

#: Cells of the moved input column that the test of P(y|x) reweights by (about 50 before rows
#: a cell with the default 500 kept rows a window).
CELLS = 10


def rows_in(entries: Sequence[Entry]) -> int:
    """The rows the entries cover."""
    return sum(e["end"] - e["start"] for e in entries)


def window_metric(entries: Sequence[Entry]) -> tuple[float, float]:
    """The metric's mean over the entries' rows and its standard error."""
    return sample_mean_se(sum(e["metric"] for e in entries),
                          sum(e["metric_sq"] for e in entries), rows_in(entries))


def sample_rows(entries: Sequence[Entry]) -> torch.Tensor:
    """The rows a window kept for the distribution tests, ``[n, d]`` (``[0, 0]`` if none)."""
    rows = [r for e in entries for r in e["sample"]]
    return torch.tensor(rows, dtype=torch.float64) if rows else torch.empty(0, 0,
                                                                              dtype=torch.float64)


def window_labels(entries: Sequence[Entry]) -> torch.Tensor:
    """The labels of a window's kept rows, in the order of :func:`sample_rows`."""
    return torch.tensor([v for e in entries for v in e["labels"]], dtype=torch.float64)


def _column(sample: torch.Tensor, cols: list[int]) -> torch.Tensor:
    """A numeric feature's values in a window's kept rows (its value column; a nullable
    feature's present values only)."""
    if sample.numel() == 0:
        return torch.empty(0, dtype=torch.float64)
    if len(cols) == 2:  # value, missing indicator
        sample = sample[sample[:, cols[1]] == 0]
    return sample[:, cols[0]]


def _deciles(x: torch.Tensor) -> list[float]:
    return torch.quantile(x, _DECILES).tolist() if x.numel() else [math.nan] * 9


def cells(spec: GroupSpec, before: torch.Tensor, after: torch.Tensor
          ) -> tuple[torch.Tensor, torch.Tensor]:
    """The cells of the kept rows by one feature: the category of a one-hot block (an empty
    block: a cell of its own), else :func:`~torchstream.report.stats.quantile_cells` of the
    value column, a nullable feature's missing rows in a cell of their own."""
    cols = list(spec.columns)
    if spec.kind == "categorical":
        def category(X: torch.Tensor) -> torch.Tensor:
            block = X[:, cols]
            return torch.where(block.max(1).values > 0, block.argmax(1),
                               torch.full((X.shape[0],), len(cols), dtype=torch.int64))
        return category(before), category(after)
    if spec.kind == "nullable":
        out = []
        missing = (before[:, cols[1]] != 0, after[:, cols[1]] != 0)
        present = quantile_cells(before[~missing[0], cols[0]], after[~missing[1], cols[0]],
                                 CELLS)
        for X, m, found in zip((before, after), missing, present):
            full = torch.full((X.shape[0],), CELLS, dtype=torch.int64)
            full[~m] = found
            out.append(full)
        return out[0], out[1]
    return quantile_cells(before[:, cols[0]], after[:, cols[0]], CELLS)


def distribution_test(spec: GroupSpec, before: Sequence[Entry], after: Sequence[Entry],
                      samples: tuple[torch.Tensor, torch.Tensor], n_features: int, *,
                      level: float, min_shift: float) -> Distribution:
    """The distribution test of one feature between the windows (see
    :class:`~torchstream.report.stats.Distribution`): KS on the kept rows of a numeric column,
    chi-squared on the counts of a one-hot block (its columns' sums) or of a missing indicator;
    moved when ``p < level / n_features`` and the statistic is at least ``min_shift``."""
    cols = list(spec.columns)
    tests: list[tuple[str, float, float]] = []  # (test, statistic, p)
    if spec.kind == "categorical":
        cb = [sum(e["sums"][c] for e in before) for c in cols]
        ca = [sum(e["sums"][c] for e in after) for c in cols]
        _, p, tv = chi2_test(cb, ca)
        tests.append(("chi2", tv, p))
        labels = list(spec.labels)
        shares_b = [v / max(sum(cb), 1e-300) for v in cb]
        shares_a = [v / max(sum(ca), 1e-300) for v in ca]
    else:
        xb = _column(samples[0], cols)
        xa = _column(samples[1], cols)
        d, p = ks_test(xb, xa)
        tests.append(("ks", d, p))
        labels = [f"q{int(q * 100)}" for q in _DECILES.tolist()]
        shares_b = _deciles(xb)
        shares_a = _deciles(xa)
        if spec.kind == "nullable":
            nb, na = rows_in(before), rows_in(after)
            mb = sum(e["sums"][cols[1]] for e in before)
            ma = sum(e["sums"][cols[1]] for e in after)
            _, p2, tv = chi2_test([mb, nb - mb], [ma, na - ma])
            tests.append(("chi2", tv, p2))
    name = "+".join(t for t, _, _ in tests)
    finite = [(t, st, p) for t, st, p in tests if math.isfinite(p)]
    if not finite:
        statistic, p = math.nan, math.nan
    else:
        statistic = max(st for _, st, _ in finite)
        p = min(1.0, len(tests) * min(p for _, _, p in finite))
    moved = bool(math.isfinite(p) and p < level / max(n_features, 1) and statistic >= min_shift)
    return {"input_test": name, "input_statistic": statistic, "input_p": p,
            "input_moved": moved, "input_labels": labels, "input_before": shares_b,
            "input_after": shares_a}


def interval_verdict(before: float, bound_before: float, after: float, bound_after: float, *,
                     scale: float, min_effect: float) -> tuple[str, float]:
    """A feature's importance verdict between the windows and its evidence: ``"gained"`` /
    ``"lost"`` when the intervals ``value ± bound`` do not overlap and the change is at least
    ``min_effect * scale``, else ``"unchanged"``; evidence ``|after - before| / (bound_before +
    bound_after)``."""
    verdict = "unchanged"
    if abs(after - before) < min_effect * scale:
        pass
    elif after - bound_after > before + bound_before:
        verdict = "gained"
    elif after + bound_after < before - bound_before:
        verdict = "lost"
    width = bound_after + bound_before
    gap = abs(after - before)
    return verdict, (gap / width if width > 0 else (math.inf if gap > 0 else 0.0))


def pair_changes(names: Sequence[str], pairs: Sequence[list[list[str]]],
                 alphas: Sequence[float], before: Sequence[Entry], after: Sequence[Entry], *,
                 level: float, min_effect: float) -> list[PairChange]:
    """Every pair of every interaction explainer (``names``, their ``pairs`` and ``alphas``;
    the entries' ``pairs[k]``) by the interval rule, a pair gaining when its magnitude grows;
    changed verdicts first, then by evidence."""
    out: list[PairChange] = []
    for k, (name, pair_names, alpha) in enumerate(zip(names, pairs, alphas)):
        z = z_quantile(level, max(len(pair_names), 1))
        windows = []
        for entries in (before, after):
            means, bounds = [], []
            for q in range(len(pair_names)):
                kept = [e for e in entries if math.isfinite(e["pairs"][k][q])]
                mean, bound = mean_bound([[e["pairs"][k][q]] for e in kept], 1, z,
                                         max(1.0, rows_in(kept) * float(alpha) / 2.0))
                means.append(mean[0])
                bounds.append(bound[0])
            windows.append((means, bounds))
        (v_b, hw_b), (v_a, hw_a) = windows
        scale = max((abs(v) for v in v_b + v_a if math.isfinite(v)), default=0.0)
        for q, pair in enumerate(pair_names):
            gap = abs(v_a[q] - v_b[q])
            width = hw_a[q] + hw_b[q]
            if not (math.isfinite(v_b[q]) and math.isfinite(v_a[q])):
                verdict, evidence = "not compared", math.nan
            else:
                apart = (v_a[q] - hw_a[q] > v_b[q] + hw_b[q]
                         or v_a[q] + hw_a[q] < v_b[q] - hw_b[q])
                verdict = "unchanged"
                if apart and gap >= min_effect * scale:
                    verdict = "gained" if abs(v_a[q]) > abs(v_b[q]) else "lost"
                evidence = gap / width if width > 0 else (math.inf if gap > 0 else 0.0)
            out.append({"explainer": name, "features": pair,
                        "verdict": verdict, "value_before": v_b[q], "value_after": v_a[q],
                        "bound_before": hw_b[q], "bound_after": hw_a[q],
                        "evidence": evidence})
    out.sort(key=lambda p: (p["verdict"] not in ("gained", "lost"),
                            p["verdict"] == "not compared",
                            0.0 if math.isnan(p["evidence"]) else -p["evidence"]))
    return out


def classify(*, warm_up: bool, moved: bool, dropped: bool, improved: bool, changed: bool,
             lost: bool, conditional_changed: bool | None, accuracy_dropped: bool) -> str:
    """The kind of change: ``"warm-up"`` (less than a window before the alarm), then with a
    test of ``P(y|x)`` (``conditional_changed`` not None) ``"real"`` when it changed or, with no
    input moved, the metric or accuracy dropped or a feature lost reliance, ``"learning"``
    when nothing moved and the model improved or a verdict changed, else ``"virtual"`` when an
    input moved or ``"none"``; without one ``"learning"`` when better on unmoved inputs,
    ``"real"`` when a verdict changed or the metric dropped on unmoved inputs, else
    ``"virtual"`` / ``"none"``.

    >>> classify(warm_up=False, moved=True, dropped=True, improved=False, changed=True,
    ...          lost=False, conditional_changed=False, accuracy_dropped=True)
    'virtual'
    """
    if warm_up:
        return "warm-up"  # fewer than one window of rows before it: the model is new
    if conditional_changed is not None:  # classification: P(y|x) tested by the calibration gap
        fell = dropped or accuracy_dropped
        if conditional_changed or not moved and (fell or lost):
            return "real"  # the same inputs are labelled otherwise than the model expects
        if not moved and (improved or changed):
            return "learning"  # better, or more reliance gained, on unchanged data
        return "virtual" if moved else "none"  # a reliance change moved with P(x)
    if improved and not moved:
        return "learning"  # better on the same inputs: convergence, not a change of data
    if changed or (dropped and not moved):
        return "real"  # the reliance changed, or the same inputs are now predicted worse
    return "virtual" if moved else "none"
