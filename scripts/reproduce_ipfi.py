"""iPFI approximates batch PFI on a static model (iPFI paper, Exp. A, Table 1): a gradient-boosted
model pre-trained on the data, the data streamed once in random order, iPFI (alpha = 0.001,
uniform or geometric reservoir of 100 rows, 0-1 loss) against batch PFI with 10 permutations.
Both are normalised to shares of their sum; the error is ``sum_j |iPFI_j - PFI_j|``, median over
random orderings.

    python scripts/reproduce_ipfi.py [--quick]

Agrawal: river's generator with ``classification_function=1`` (the paper's "Class A"), 20,000
rows, scikit-learn's ``HistGradientBoostingClassifier`` (the paper's "LGBM"). Full mode adds
elec2 (``../shared/data/electricity.csv``, 45,312 rows). Quick mode: Agrawal, 3 orderings.
"""

from __future__ import annotations

import argparse

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingClassifier

from torchstream.explain import IncrementalPFI
from torchstream.learners import SklearnModelFn
from torchstream.reproduce import Comparison
from torchstream.streams import Agrawal, data_path, read_csv

#: Table 1 of the iPFI paper: median error (uniform, geometric).
#: Shared data files this reproduction reads.
DATA = ()

PUBLISHED = {"agrawal": (0.011, 0.010), "elec2": (0.038, 0.037)}
#: The paper's medians are below the sampling noise of one iPFI realisation. With alpha = 0.001 a
#: feature's estimate has sd sqrt(alpha / (2 - alpha) * p (1 - p)) (0-1 loss, p = its PFI),
#: times about sqrt(2) for a 100-row reservoir (explainer spec, §8 check 4): 0.015, 0.015 and
#: 0.010 for salary, age and commission on Agrawal. E|N(0, sd)| = 0.8 sd, summed and divided by
#: the total importance (0.85) gives an expected error of 0.03-0.04 whatever the implementation;
#: tolerance: 0.04 above the paper's value (agrawal), 0.06 (elec2, more important features).
TOLERANCE = {"agrawal": 0.04, "elec2": 0.06}


def load(name: str):
    if name == "agrawal":
        stream = Agrawal(classification_function=1, seed=0, n_samples=20_000)
    else:
        stream = read_csv(data_path("electricity.csv"), "class", task="classification")
    X, y = zip(*stream.batches(100_000, dtype=torch.float64))
    return torch.cat(X), torch.cat(y)


def normalise(v: np.ndarray) -> np.ndarray:
    """Shares of the total (the reference code's "sum" normalisation)."""
    total = v.sum()
    return v / total if total > 0 else np.zeros_like(v)


def batch_pfi(model, X: np.ndarray, y: np.ndarray, repeats: int, rng) -> np.ndarray:
    base = np.mean(model.predict(X) != y)
    out = np.zeros(X.shape[1])
    for j in range(X.shape[1]):
        for _ in range(repeats):
            Z = X.copy()
            Z[:, j] = Z[rng.permutation(len(Z)), j]
            out[j] += np.mean(model.predict(Z) != y) - base
    return out / repeats


def errors(name: str, orderings: int) -> dict[str, float]:
    X, y = load(name)
    Xn, yn = X.numpy(), y.numpy()
    model = HistGradientBoostingClassifier(random_state=0).fit(Xn, yn)
    reference = normalise(batch_pfi(model, Xn, yn, 10, np.random.default_rng(0)))
    fn = SklearnModelFn(model)
    out: dict[str, list[float]] = {"uniform": [], "geometric": []}
    for seed in range(orderings):
        order = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))
        for storage, values in out.items():
            exp = IncrementalPFI(fn, "zero_one", X.shape[1], alpha=0.001, storage=storage,
                                 storage_size=100, seed=seed)
            for start in range(0, len(X), 50):
                idx = order[start:start + 50]
                exp.explain(X[idx], y[idx])
            ours = normalise(exp.importance.numpy())
            values.append(float(np.abs(ours - reference).sum()))
    return {k: float(np.median(v)) for k, v in out.items()}


def reproduce(quick: bool = True) -> list[Comparison]:
    torch.set_num_threads(1)
    rows = []
    for name in (["agrawal"] if quick else ["agrawal", "elec2"]):
        err = errors(name, 3 if quick else 10)
        for (kind, value), paper in zip(err.items(), PUBLISHED[name]):
            rows.append(Comparison(f"{name}: median error, {kind} reservoir", value, paper,
                                   TOLERANCE[name], "HistGradientBoosting as the 'LGBM'"))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for r in reproduce(args.quick):
        print(f"{r.measure:<42}{r.ours:>8.3f}  (paper {r.paper:.3f})")


if __name__ == "__main__":
    main()
