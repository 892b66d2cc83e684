"""Reproduce the Dynamic Model Tree experiments (Haug et al., ICDE 2022, Tables II and III).

Protocol of the paper: prequential (test, then train) over batches of 0.1 % of the data, the
first batch used for training only; per batch the F1 score = harmonic mean of the *weighted*
precision and the *weighted* recall; mean +- std over the batches. The number of splits is
counted after every batch by the paper's rules (inner nodes + 1 per binary model leaf;
majority-class leaves add 0) and averaged the same way. Features are min-max scaled to [0, 1]
over the whole data set, as in the paper.

Data: Electricity (``../shared/data/electricity.csv``); river's SEA (noise 0.1; functions
0 -> 1 -> 2 -> 3 -> 0 with abrupt drifts at 20/40/60/80 % of the stream) and Agrawal
(perturbation 0.1; functions 0 -> 1 -> 2 -> 3 with incremental drifts over 10-20 %, 30-50 %
and 80-90 %). The paper's synthetic streams have 1,000,000 rows; ``--n-synthetic`` sets ours
(default 100,000; ``--quick``: 20,000); Electricity always whole (45,312 rows).

Competitors (river): Hoeffding tree with majority-class leaves (VFDT (MC)), Hoeffding adaptive
tree, EFDT, adaptive random forest with 3 trees; split confidence 0.01 for the trees as in the
paper's code.

Usage::

    python scripts/reproduce_dmt.py --quick
    python scripts/reproduce_dmt.py --datasets electricity --models dmt,vfdt
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from torchstream.evaluate.measures import tree_complexity
from torchstream.trees import DynamicModelTree

# Table II (F1) and Table III (number of splits) of the paper: (mean, std)
PAPER = {
    "electricity": {
        "dmt": ((0.76, 0.20), (6.5, 3.1)),
        "vfdt": ((0.76, 0.20), (37.8, 22.3)),
        "hat": ((0.77, 0.21), (3.4, 2.1)),
        "efdt": ((0.77, 0.20), (10.9, 4.5)),
        "arf": ((0.81, 0.14), None),
    },
    "sea": {
        "dmt": ((0.88, 0.02), (35.1, 25.3)),
        "vfdt": ((0.86, 0.03), (588.4, 339.8)),
        "hat": ((0.89, 0.02), (131.4, 69.8)),
        "efdt": ((0.87, 0.04), (109.9, 70.3)),
        "arf": ((0.90, 0.02), None),
    },
    "agrawal": {
        "dmt": ((0.82, 0.08), (75.4, 34.4)),
        "vfdt": ((0.77, 0.11), (628.3, 371.0)),
        "hat": ((0.84, 0.08), (158.2, 79.2)),
        "efdt": ((0.82, 0.09), (89.7, 66.2)),
        "arf": ((0.80, 0.08), None),
    },
}
NAMES = {"dmt": "DMT", "vfdt": "VFDT (MC)", "hat": "HT-Ada", "efdt": "EFDT", "arf": "ARF (3)"}


# ------------------------------------------------------------------------------------ data
def _minmax(X: np.ndarray) -> np.ndarray:
    lo, hi = X.min(0), X.max(0)
    return (X - lo) / np.where(hi > lo, hi - lo, 1.0)


def electricity(n: int | None) -> tuple[np.ndarray, np.ndarray]:
    root = Path(
        os.environ.get("TORCHSTREAM_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
    )
    data = np.loadtxt(root / "electricity.csv", delimiter=",", skiprows=1)
    if n is not None:
        data = data[:n]
    return _minmax(data[:, :-1]), data[:, -1].astype(int)


def _river_rows(stream, n: int) -> tuple[np.ndarray, np.ndarray]:
    X, y = [], []
    for x, label in stream.take(n):
        X.append([float(x[k]) for k in sorted(x)])
        y.append(int(label))
    return _minmax(np.asarray(X)), np.asarray(y)


def sea(n: int, seed: int = 42) -> tuple[np.ndarray, np.ndarray]:
    """Five segments of 20 % with functions 0, 1, 2, 3, 0: abrupt drifts (exact switches)."""
    from river.datasets import synth

    X, y = [], []
    bounds = [int(0.2 * n * i) for i in range(6)]
    for i, variant in enumerate([0, 1, 2, 3, 0]):
        for x, label in synth.SEA(variant=variant, noise=0.1, seed=seed + i).take(
            bounds[i + 1] - bounds[i]
        ):
            X.append([float(x[k]) for k in sorted(x)])
            y.append(int(label))
    return _minmax(np.asarray(X)), np.asarray(y)


def agrawal(n: int, seed: int = 42) -> tuple[np.ndarray, np.ndarray]:
    from river.datasets import synth

    def gen(f: int, s: int):
        return synth.Agrawal(classification_function=f, perturbation=0.1, seed=s)

    # incremental drifts over [10, 20] %, [30, 50] % and [80, 90] % (position = the midpoint);
    # nested streams count their own rows, so each position is relative to its start
    spans = [(0.10, 0.20), (0.30, 0.50), (0.80, 0.90)]
    stream = gen(3, seed + 3)
    for i in range(2, -1, -1):
        start = spans[i - 1][0] + (spans[i - 1][1] - spans[i - 1][0]) / 2 if i else 0.0
        mid = (spans[i][0] + spans[i][1]) / 2
        width = int((spans[i][1] - spans[i][0]) * n)
        stream = synth.ConceptDriftStream(
            gen(i, seed + i),
            stream,
            position=int((mid - start) * n),
            width=width,
            seed=seed + 10 + i,
        )
    return _river_rows(stream, n)


# ------------------------------------------------------------------------------------ models
class RiverModel:
    def __init__(self, name: str, n_features: int) -> None:
        from river import forest, tree

        self.name = name
        if name == "vfdt":
            self.model = tree.HoeffdingTreeClassifier(leaf_prediction="mc", delta=0.01)
        elif name == "hat":
            self.model = tree.HoeffdingAdaptiveTreeClassifier(
                delta=0.01, bootstrap_sampling=False, seed=0
            )
        elif name == "efdt":
            self.model = tree.ExtremelyFastDecisionTreeClassifier(
                delta=0.01, min_samples_reevaluate=1000
            )
        elif name == "arf":
            self.model = forest.ARFClassifier(n_models=3, seed=0)
        else:
            raise ValueError(f"unknown model {name!r}")
        self.keys = list(range(n_features))

    def predict(self, X: np.ndarray) -> np.ndarray:
        out = []
        for row in X:
            p = self.model.predict_one(dict(zip(self.keys, row.tolist())))
            out.append(0 if p is None else int(p))
        return np.asarray(out)

    def learn(self, X: np.ndarray, y: np.ndarray) -> None:
        for row, label in zip(X, y):
            self.model.learn_one(dict(zip(self.keys, row.tolist())), int(label))

    def splits(self) -> float:
        if self.name == "arf":
            return math.nan
        m = self.model
        leaf = "majority" if self.name == "vfdt" else "naive_bayes"
        return tree_complexity(
            m.n_branches, m.n_leaves, leaf_model=leaf, n_features=len(self.keys)
        )["splits"]


class DMTModel:
    name = "dmt"

    def __init__(self, n_features: int, n_classes: int) -> None:
        self.model = DynamicModelTree(n_classes=n_classes)

    def predict(self, X: np.ndarray) -> np.ndarray:
        return self.model.predict(torch.from_numpy(X).float()).numpy()

    def learn(self, X: np.ndarray, y: np.ndarray) -> None:
        self.model.learn(torch.from_numpy(X).float(), torch.from_numpy(y))

    def splits(self) -> float:
        return float(self.model.complexity()["splits"])


# ------------------------------------------------------------------------------------ protocol
def f1_weighted_pr(y: np.ndarray, pred: np.ndarray) -> float:
    from sklearn.metrics import precision_score, recall_score

    p = precision_score(y, pred, average="weighted", zero_division=0)
    r = recall_score(y, pred, average="weighted", zero_division=0)
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def run(model, X: np.ndarray, y: np.ndarray) -> dict[str, float]:
    size = max(1, math.ceil(0.001 * len(y)))
    f1s, splits, seconds = [], [], 0.0
    for b, start in enumerate(range(0, len(y), size)):
        Xb, yb = X[start : start + size], y[start : start + size]
        t = time.perf_counter()
        if b > 0:  # the first batch trains only
            pred = model.predict(Xb)
        model.learn(Xb, yb)
        seconds += time.perf_counter() - t
        if b > 0:
            f1s.append(f1_weighted_pr(yb, pred))
            splits.append(model.splits())
    return {
        "f1": float(np.mean(f1s)),
        "f1_std": float(np.std(f1s)),
        "splits": float(np.mean(splits)),
        "splits_std": float(np.std(splits)),
        "us_per_row": 1e6 * seconds / len(y),
        "batch": size,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="short streams (about a minute)")
    ap.add_argument("--datasets", default="electricity,sea,agrawal")
    ap.add_argument("--models", default="dmt,vfdt,hat,efdt,arf")
    ap.add_argument("--n-synthetic", type=int, default=None)
    ap.add_argument("--n-electricity", type=int, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    n_syn = args.n_synthetic or (20_000 if args.quick else 100_000)
    n_elec = args.n_electricity  # the whole data set: 1,000 batches of 45 rows
    loaders = {
        "electricity": lambda: electricity(n_elec),
        "sea": lambda: sea(n_syn),
        "agrawal": lambda: agrawal(n_syn),
    }
    print("command: python scripts/reproduce_dmt.py " + " ".join(argv or sys.argv[1:]))
    for ds in args.datasets.split(","):
        X, y = loaders[ds]()
        print(
            f"\n== {ds}: {len(y):,} rows, {X.shape[1]} features, batch {math.ceil(len(y) / 1000)}"
            f" rows (0.1 %)"
        )
        print(
            f"{'model':<10} {'F1 (ours)':>14} {'F1 (paper)':>12} {'splits (ours)':>15} "
            f"{'splits (paper)':>15} {'us / row':>9}"
        )
        for name in args.models.split(","):
            model = (
                DMTModel(X.shape[1], int(y.max()) + 1)
                if name == "dmt"
                else RiverModel(name, X.shape[1])
            )
            r = run(model, X, y)
            f1p, spp = PAPER[ds][name]
            sp = "-" if spp is None else f"{spp[0]:.1f} ± {spp[1]:.1f}"
            ours_sp = (
                "-" if math.isnan(r["splits"]) else f"{r['splits']:.1f} ± {r['splits_std']:.1f}"
            )
            print(
                f"{NAMES[name]:<10} {r['f1']:.3f} ± {r['f1_std']:.3f} "
                f"{f1p[0]:.2f} ± {f1p[1]:.2f} {ours_sp:>15} {sp:>15} {r['us_per_row']:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
