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
and 80-90 %). The paper's synthetic streams have 1,000,000 rows; ``n_synthetic`` sets ours
(default 100,000; quick: 20,000); Electricity always whole (45,312 rows).

Competitors (river): Hoeffding tree with majority-class leaves (VFDT (MC)), Hoeffding adaptive
tree, EFDT, adaptive random forest with 3 trees; split confidence 0.01 for the trees as in the
paper's code.

Comparison with the paper (``reproduce``; quick: Electricity, DMT and VFDT (MC), about a
minute): the mean F1 of both and VFDT (MC)'s number of splits are checked (same data, same
protocol); the DMT's number of splits is reported only (this package's AIC thresholds follow the
paper's eq. 11, which is stricter than the reference code that produced the table); the
ordering "DMT has fewer splits than VFDT (MC)" is checked on every data set run.

Usage: ``torchstream reproduce dmt [--quick]``; from Python, other data sets and models::

    from torchstream.reproductions import run
    run("dmt", quick=True, datasets=["electricity", "sea", "agrawal"],
        models=["dmt", "vfdt", "hat", "efdt", "arf"])  # all, synthetic streams of 20,000 rows
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch
from river import forest, tree
from river.datasets import synth

from torchstream.evaluate.measures import tree_complexity
from torchstream.reproductions._comparison import Comparison
from torchstream.streams import data_path
from torchstream.trees import DynamicModelTree

#: Shared data files this reproduction reads.
DATA = ("electricity.csv",)

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
    data = np.loadtxt(data_path("electricity.csv"), delimiter=",", skiprows=1)
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


#: Tolerances of the checked numbers (Electricity only: the same data and protocol as the
#: paper; the synthetic streams here are 10x shorter than the paper's and are reported only).
#: Mean F1: the paper's +- is the sd over the 999 test batches; 3 standard errors of a mean of
#: 999 batches (3 * 0.20 / sqrt(999) = 0.019) plus the rounding of the paper's two decimals (0.005).
F1_TOLERANCE = 3 * 0.20 / math.sqrt(999) + 0.005
#: VFDT (MC) splits: river's tree has the paper's settings (delta 0.01, grace period 200, tie
#: threshold 0.05, 10 candidate thresholds per numeric feature) but not scikit-multiflow's
#: numeric observer; refining river's candidates from 10 to 20 thresholds moves the mean number
#: of splits on Electricity by 1.2 (37.2 -> 36.0): tolerance twice that.
VFDT_SPLITS_TOLERANCE = 2.5
ELECTRICITY_ROWS = 45_312  # checked only on the whole data set
CHECKED_F1 = {("electricity", "dmt"), ("electricity", "vfdt")}
QUICK_PLAN = (("electricity",), ("dmt", "vfdt"))
FULL_PLAN = (("electricity", "sea", "agrawal"), ("dmt", "vfdt", "hat", "efdt", "arf"))


def evaluate(
    datasets,
    models,
    n_synthetic: int,
    n_electricity: int | None = None,
    echo: Callable[[str], None] | None = None,
) -> dict[tuple[str, str], dict[str, float]]:
    """Run ``models`` on ``datasets`` with the paper's protocol; results by (data set, model)."""
    torch.set_num_threads(1)
    loaders = {
        "electricity": lambda: electricity(n_electricity),
        "sea": lambda: sea(n_synthetic),
        "agrawal": lambda: agrawal(n_synthetic),
    }
    out: dict[tuple[str, str], dict[str, float]] = {}
    for ds in datasets:
        if ds not in loaders:
            raise ValueError(f"datasets: unknown data set {ds!r}; known: {', '.join(loaders)}")
        X, y = loaders[ds]()
        if echo:
            echo(
                f"\n== {ds}: {len(y):,} rows, {X.shape[1]} features, batch "
                f"{math.ceil(len(y) / 1000)} rows (0.1 %)"
            )
            echo(
                f"{'model':<10} {'F1 (ours)':>14} {'F1 (paper)':>12} {'splits (ours)':>15} "
                f"{'splits (paper)':>15} {'us / row':>9}"
            )
        for name in models:
            if name not in NAMES:
                raise ValueError(f"models: unknown model {name!r}; known: {', '.join(NAMES)}")
            model = (
                DMTModel(X.shape[1], int(y.max()) + 1)
                if name == "dmt"
                else RiverModel(name, X.shape[1])
            )
            r = run(model, X, y)
            r["rows"] = len(y)
            out[ds, name] = r
            if echo:
                f1p, spp = PAPER[ds][name]
                sp = "-" if spp is None else f"{spp[0]:.1f} ± {spp[1]:.1f}"
                ours_sp = (
                    "-" if math.isnan(r["splits"]) else f"{r['splits']:.1f} ± {r['splits_std']:.1f}"
                )
                echo(
                    f"{NAMES[name]:<10} {r['f1']:.3f} ± {r['f1_std']:.3f} "
                    f"{f1p[0]:.2f} ± {f1p[1]:.2f} {ours_sp:>15} {sp:>15} "
                    f"{r['us_per_row']:>9.1f}"
                )
    return out


def why_reported(ds: str, name: str, whole: bool) -> str:
    """Why a number is reported without a tolerance."""
    if ds != "electricity":
        return "reported only (a 10x shorter stream than the paper's)"
    if not whole:
        return "reported only (part of Electricity)"
    return f"reported only (river's {NAMES[name]}, whose details differ from scikit-multiflow's)"


def comparisons(results: dict[tuple[str, str], dict[str, float]]) -> list[Comparison]:
    """Our numbers next to Tables II and III of the paper."""
    rows = []
    for (ds, name), r in results.items():
        (f1p, _), spp = PAPER[ds][name]
        whole = r["rows"] == ELECTRICITY_ROWS or ds != "electricity"
        checked = (ds, name) in CHECKED_F1 and whole
        rows.append(
            Comparison(
                f"{ds}: {NAMES[name]} mean F1",
                r["f1"],
                f1p,
                round(F1_TOLERANCE, 3) if checked else None,
                "3 standard errors of a mean over 999 batches (paper sd 0.20) + rounding"
                if checked
                else why_reported(ds, name, whole),
            )
        )
        if spp is None:
            continue
        checked = (ds, name) == ("electricity", "vfdt") and whole
        why = {
            "dmt": "reported only: paper-consistent AIC thresholds (eq. 11), stricter than the "
            "reference code's (thresholds='reference' gives 4.5 on Electricity)",
            "vfdt": "river's Gaussian observer in place of scikit-multiflow's; its resolution "
            "(10 vs 20 candidates) moves this by 1.2",
        }.get(name, "")
        if not (why and whole and ds == "electricity"):
            why = why_reported(ds, name, whole)
        rows.append(
            Comparison(
                f"{ds}: {NAMES[name]} mean number of splits",
                r["splits"],
                spp[0],
                VFDT_SPLITS_TOLERANCE if checked else None,
                why,
            )
        )
    for ds in dict.fromkeys(ds for ds, _ in results):
        if (ds, "dmt") in results and (ds, "vfdt") in results:
            fewer = results[ds, "dmt"]["splits"] < results[ds, "vfdt"]["splits"]
            rows.append(
                Comparison(
                    f"{ds}: DMT has fewer splits than VFDT (MC) (1 = yes)",
                    float(fewer),
                    1.0,
                    0.0,
                    f"the paper's Table III ({PAPER[ds]['dmt'][1][0]} vs "
                    f"{PAPER[ds]['vfdt'][1][0]})",
                )
            )
    return rows


def reproduce(
    quick: bool = True,
    *,
    datasets: Sequence[str] | None = None,
    models: Sequence[str] | None = None,
    n_synthetic: int | None = None,
    n_electricity: int | None = None,
    echo: Callable[[str], None] | None = None,
) -> list[Comparison]:
    """Quick: Electricity (whole), DMT and VFDT (MC). Full: the three data sets (synthetic
    streams of 100,000 rows) and the five models. ``datasets``, ``models``, ``n_synthetic``
    (rows of SEA and Agrawal) and ``n_electricity`` (default: all) replace the mode's; ``echo``
    receives the per-model table lines."""
    plan_datasets, plan_models = QUICK_PLAN if quick else FULL_PLAN
    n_syn = n_synthetic or (20_000 if quick else 100_000)
    return comparisons(evaluate(plan_datasets if datasets is None else datasets,
                                plan_models if models is None else models,
                                n_syn, n_electricity, echo=echo))
