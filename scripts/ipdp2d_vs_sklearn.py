"""Friedman's H² of ``IncrementalPDP2D`` against scikit-learn's two-way ``partial_dependence``.

A static model: scikit-learn's ``GradientBoostingRegressor`` (60 trees of depth 3) fit on 2,000
rows of the shared California housing data (the 8 numeric features, the counts logged,
standardised; target: the standardised log house value). The stream: all complete rows in a
fixed shuffled order (20,433), batches of 100. For each pair, three comparisons:

* ``weighted``: the explainer on scikit-learn's own grid (``grid="fixed"``, the grid of
  ``partial_dependence(grid_resolution=--grid)``) against ``partial_dependence`` of the
  streamed rows with ``sample_weight`` = the EMA's weights: the same weighted mean, so the
  PDs and H² agree to float rounding (the largest |difference| is printed);
* ``uniform``: the same explainer against the unweighted ``partial_dependence`` of all
  streamed rows (what a batch analysis of the stream computes): the EMA's weights favour the
  last ``~2 / alpha`` rows, so the two differ by the EMA's noise;
* ``quantile``: the explainer with its own moving grid (``grid="quantile"``, 5-95 %, a
  frequency storage of 500 rows) against the unweighted batch H² on scikit-learn's 5-95 %
  grid of all rows.

Run it from the repository root (about 20 s)::

    python scripts/ipdp2d_vs_sklearn.py [--alpha 0.002] [--grid 8]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import numpy as np
import torch
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.inspection import partial_dependence

from torchstream.explain.ipdp2d import IncrementalPDP2D, h_squared

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "california_housing.csv"
PAIRS = ((0, 1), (7, 2), (7, 5), (3, 6))


def load() -> tuple[list[str], np.ndarray, np.ndarray]:
    with DATA.open() as fh:
        reader = csv.reader(fh)
        header = next(reader)
        rows = [[float(v) for v in line[:9]] for line in reader if line[4] != ""]
    data = np.array(rows)[np.random.default_rng(0).permutation(len(rows))]
    X, y = data[:, :8].copy(), np.log(data[:, 8])
    X[:, 3:7] = np.log(X[:, 3:7])
    return header[:8], (X - X.mean(0)) / X.std(0), (y - y.mean()) / y.std()


def sklearn_pds(model: GradientBoostingRegressor, X: np.ndarray, pair: tuple[int, int],
                grids: list[np.ndarray], weights: np.ndarray | None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    custom = dict(zip(pair, grids))
    two = partial_dependence(model, X, list(pair), custom_values=custom, sample_weight=weights,
                             method="brute")["average"][0]
    one = [partial_dependence(model, X, [j], custom_values={j: custom[j]},
                              sample_weight=weights, method="brute")["average"][0]
           for j in pair]
    return two, one[0], one[1]


def h2_of(pds: tuple[np.ndarray, np.ndarray, np.ndarray]) -> float:
    return h_squared(*(torch.from_numpy(p) for p in pds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--alpha", type=float, default=0.002)
    parser.add_argument("--grid", type=int, default=8)
    args = parser.parse_args()
    torch.set_num_threads(1)
    names, X, y = load()
    model = GradientBoostingRegressor(n_estimators=60, max_depth=3, random_state=0)
    model.fit(X[:2000], y[:2000])
    n = X.shape[0]

    def predict(Z: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(model.predict(Z.numpy()))

    w = args.alpha * (1 - args.alpha) ** np.arange(n - 1, -1, -1, dtype=np.float64)
    w /= w.sum()
    rows = torch.from_numpy(X)
    print(f"{n:,} rows, batches of 100, alpha = {args.alpha}, {args.grid} points per axis")
    print(f"{'pair':<36} {'sklearn':>8} {'weighted':>9} {'|dPD|':>8} {'|dH2|':>8}   "
          f"{'uniform':>8} {'ours':>7}   {'quantile':>8} {'ours':>7}")
    began = time.perf_counter()
    for pair in PAIRS:
        grids = partial_dependence(model, X, list(pair), grid_resolution=args.grid,
                                   method="brute")["grid_values"]
        fixed = IncrementalPDP2D(predict, pair, feature_names=names, grid="fixed",
                                 fixed_range=[g.tolist() for g in grids], alpha=args.alpha)
        moving = IncrementalPDP2D(predict, pair, feature_names=names, grid="quantile",
                                  grid_size=args.grid, storage_size=500, alpha=args.alpha)
        for start in range(0, n, 100):
            fixed.explain(rows[start:start + 100])
            moving.explain(rows[start:start + 100])
        weighted = sklearn_pds(model, X, pair, grids, w)
        d_pd = max(float(np.abs(a - b).max()) for a, b in zip(
            (fixed.pd.numpy(), fixed.pd_a.numpy(), fixed.pd_b.numpy()), weighted))
        uniform = h2_of(sklearn_pds(model, X, pair, grids, None))
        label = f"({names[pair[0]]}, {names[pair[1]]})"
        print(f"{label:<36} {h2_of(weighted):8.4f} {fixed.h2:9.4f} {d_pd:8.1e} "
              f"{abs(fixed.h2 - h2_of(weighted)):8.1e}   {uniform:8.4f} {fixed.h2:7.4f}   "
              f"{uniform:8.4f} {moving.h2:7.4f}")
    print(f"{time.perf_counter() - began:.1f} s")


if __name__ == "__main__":
    main()
