"""iPFI against batch PFI on a static model (iPFI paper, Exp. A, Table 1) and against interval
PFI on an Agrawal stream with a function drift (Exp. B, Table 3).

    torchstream reproduce ipfi [--quick]
    run("ipfi", quick=True, data=["elec2", "adult"], drift=False)  # reproductions.run

**Exp. A (static).** A model is trained on the whole data set, then the data set is streamed in
random order and explained by iPFI (alpha = 0.001, a uniform or a geometric reservoir of 100
rows, batches of 25 rows) as the mean of ten independent realisations, each with its own
reservoir (as in the paper's experiments; one ``IncrementalPFI`` with ``n_samples=10`` and a
storage that holds the ten reservoirs, so one model call per batch). The reference is batch PFI
on the whole data set (ten permutations). Both are normalised to shares of their sum; the error is
``sum_j |iPFI_j - PFI_j|``, the median over random orderings. The paper's losses: 0-1 loss for
the classifiers, absolute error for the regressor (its norm loss ``||h(x) - y||``).

| data | rows | model | paper's model |
|---|---|---|---|
| agrawal | 20,000 (river, ``classification_function=1``) | scikit-learn ``HistGradientBoostingClassifier`` | "LGBM": the same class |
| elec2 | 45,312 (``electricity.csv``) | ``HistGradientBoostingClassifier`` | the same |
| adult | 32,561 (``adult.csv``, the UCI training part; the paper used about 45k rows) | ``GradientBoostingClassifier(n_estimators=200)``, categories as ordinal codes | the same class |
| bike | 17,379 (``bike_hour.csv``, UCI hourly) | ``HistGradientBoostingRegressor`` | the same class |

The paper's fifth data set, bank, is not among the shared data. Full mode: every data set
streamed whole, 10 orderings, reference with 10 permutations. Quick mode: agrawal and bike, 3
orderings, of which only the last 3,000 rows are explained, and a reference with 3 permutations.
The rows before pass through the reservoir without being explained (no model calls), so the
reservoir is in its end-of-stream state; this matters for the uniform reservoir, whose content
changes ever more slowly (about ``L ln(n / (n - 2000))`` of its rows are replaced during the
last 2,000 of ``n`` rows: 110 after 3,000 rows, 11 after 20,000), so that a long stream's
estimate draws its replacement values from fewer distinct rows. With alpha = 0.001 the estimate
is a weighted mean of the last ~2,000 explained rows: the sd of the debiased estimate after
3,000 rows is 5 % larger than after a whole stream.

**Exp. B (function drift).** Agrawal, 10,000 rows of concept 1 (salary and age; river function
1), then 10,000 rows of concept 2 (education ``elevel`` and age; river function 2). The paper
learns an adaptive random forest (river, 50 trees) on the stream; here the model is a
``HistGradientBoostingClassifier`` re-trained every 1,000 rows on the latest 2,000 rows (the
model changes in steps; river's forest would make the evaluations of this script hours long).
Test-then-explain: the rows of interval ``k`` are explained with the model trained before it.
Interval PFI = batch PFI of the current model on the interval's 1,000 rows, ``P`` permutations;
iPFI with ``M`` realisations (the paper: ``M = P = 10``, equal numbers of model evaluations).
The error at each interval end is the normalised error of Exp. A; the paper reports its median
over the stream, before and after the drift (Table 2/3, fu. 1, alpha = 0.001). The paper's
figure shows salary's importance falling and elevel's rising right after the drift; that is
the checked property. Full mode: 5 streams (seeds), ``M = P = 10``; quick mode: one stream,
``M = P = 1``.

**Findings (quick mode and checks with other seeds).** With the paper's ten realisations the
Exp. A errors are those of Table 1 within its spread: agrawal 0.011 / 0.013 (uniform /
geometric; paper 0.011 / 0.010), bike 0.020 / 0.022 (0.022 / 0.019); run with ``data=``, elec2
0.021 / 0.030 (0.038 / 0.037) and adult 0.19 / 0.16 (0.126 / 0.114; its importances are small
against the variance of the 0-1 loss; the reference's own noise is worth 0.03 there with 3
permutations, 0.02 with 10). The ten realisations matter: one realisation gives 0.02-0.03 on
agrawal, two to three times the paper's values, and ten draws from a single shared uniform
reservoir give a median of 0.017 over 9 orderings against 0.014 with ten reservoirs on the same
orderings. Under the function drift the property holds on every stream tried (6 seeds): before
the drift salary, age and commission share the importance, at the end age and elevel about one
half each and salary 0; the errors against interval PFI (0.03-0.06 over the whole stream with
``M = P = 1``) are of the size of the paper's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from sklearn.ensemble import (
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
)

from torchstream.explain import GeometricReservoir, IncrementalPFI, UniformReservoir
from torchstream.learners import SklearnModelFn
from torchstream.reproductions._comparison import Comparison
from torchstream.schema import Schema
from torchstream.streams import Agrawal, shared_data

#: Shared data files this reproduction reads.
DATA = ("electricity.csv", "bike_hour.csv", "adult.csv")

#: Table 1 of the iPFI paper: median error (IQR) for the uniform and the geometric reservoir.
TABLE1 = {
    "agrawal": ((0.011, 0.006), (0.010, 0.006)),
    "elec2": ((0.038, 0.012), (0.037, 0.011)),
    "adult": ((0.126, 0.040), (0.114, 0.025)),
    "bike": ((0.022, 0.005), (0.019, 0.008)),
}
#: The models' performance in Table 1 (accuracy; mean absolute error for bike).
PERFORMANCE = {"agrawal": 0.99, "elec2": 0.88, "adult": 0.86, "bike": 26.6}
#: Tolerances of the quick Exp. A numbers. The median of 3 orderings has about half the spread
#: of one ordering (sd of a median of 3 normal draws: 0.67 sd; sd = IQR / 1.35), so 3 times that
#: is 1.5 x the paper's IQR. To it comes what differs in the setting: the reference with 3
#: instead of 10 permutations (its noise in the shares, sum over the features of
#: E|N(0, sqrt(V[lambda_j] / (N P)))| / total PFI, is 0.005 on agrawal and 0.007 on bike, against
#: 0.003 and 0.004 with 10), the 3,000-row streams (+5 % sd) and another fit of the model
#: (another scikit-learn version and random state): +0.01. Agrawal 1.5 x 0.006 + 0.01 = 0.019
#: -> 0.02; bike 1.5 x 0.008 + 0.01 = 0.022. (Medians of 3 over 18 orderings and two references
#: ranged over 0.009-0.017 on agrawal and 0.009-0.024 on bike.) The same rule for a quick run of
#: elec2 and adult (``data=``, not in the default quick set): elec2 1.5 x 0.012 + 0.01 = 0.028
#: (reference noise 0.008 with 3 permutations, 0.004 with 10) -> 0.03; adult 1.5 x 0.040 + 0.01
#: + 0.015 for the reference, whose noise is large here (0.033 with 3 permutations, 0.018 with
#: 10: the importances are small against the 0-1 loss' variance) = 0.085.
TOLERANCE = {"agrawal": 0.02, "bike": 0.022, "elec2": 0.03, "adult": 0.085}
#: Table 3 (= Table 2, fu. 1, alpha = 0.001) of the paper: median error of iPFI against interval
#: PFI over the whole stream, before and after the drift.
TABLE3 = {"uniform": (0.050, 0.075, 0.024), "geometric": (0.052, 0.071, 0.022)}
ALPHA, RESERVOIR, BATCH = 0.001, 100, 25


class Realisations:
    """``K`` reservoirs of one kind, fed with the same rows, each with its own generator.

    With ``IncrementalPFI(..., n_samples=K, storage=Realisations(...))`` the ``K`` replacement
    draws for each row and feature come one from each reservoir (the explainer draws in the
    order row, feature, draw; draw ``t`` of :meth:`sample` comes from reservoir ``t mod K``), so
    the estimate is the mean of ``K`` independent realisations of iPFI, each with its own
    reservoir, in one model call per batch. (``n_samples=K`` with one shared reservoir averages
    ``K`` draws from the same ``L`` stored rows instead: the content of that one reservoir then
    does not average out, which matters for a uniform reservoir late in a long stream, whose
    content hardly changes.)
    """

    def __init__(self, kind: str, k: int, size: int, n_features: int, seed: int) -> None:
        cls = {"uniform": UniformReservoir, "geometric": GeometricReservoir}[kind]
        self.parts = [cls(size, n_features, seed=seed * 1000 + i) for i in range(k)]

    def __len__(self) -> int:
        return len(self.parts[0])

    def update(self, X: torch.Tensor) -> None:
        for part in self.parts:
            part.update(X)

    def sample(self, n: int) -> torch.Tensor:
        k = len(self.parts)
        if n % k:
            raise ValueError(f"n must be a multiple of the {k} realisations, got {n}")
        rows = torch.stack([part.sample(n // k) for part in self.parts], 1)  # [n / k, k, d]
        return rows.reshape(n, -1)


def pfi_explainer(model_fn, loss: str, d: int, kind: str, realisations: int,
                  seed: int) -> IncrementalPFI:
    """iPFI as in the paper's experiments: the mean of ``realisations`` independent
    realisations, each with its own reservoir of ``RESERVOIR`` rows."""
    storage = Realisations(kind, realisations, RESERVOIR, d, seed)
    return IncrementalPFI(model_fn, loss, d, alpha=ALPHA, storage=storage,
                          n_samples=realisations, seed=seed)


def normalise(v: np.ndarray) -> np.ndarray:
    """Shares of the total (the reference code's "sum" normalisation)."""
    total = v.sum(-1, keepdims=True)
    return np.where(total > 0, v / np.where(total > 0, total, 1.0), 0.0)


def load(name: str) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """The rows ``[n, d]`` (float64), the targets and the feature names of a data set."""
    if name == "agrawal":
        stream = Agrawal(classification_function=1, seed=0, n_samples=20_000)
    elif name == "elec2":
        stream = shared_data("electricity")
    elif name == "bike":
        stream = shared_data("bike")
    elif name == "adult":
        stream = shared_data("adult")
        ordinal = Schema(stream.schema.features, encoding="ordinal")  # one column per feature
        X = ordinal.encode([row for row, _ in stream], dtype=torch.float64)
        return X, stream.y, [str(n) for n in ordinal.columns]
    else:
        raise ValueError(f"unknown data set {name!r}")
    X, y = next(stream.batches(10**6, dtype=torch.float64))
    return X, y, list(stream.schema.columns)


def fit(name: str, X: np.ndarray, y: np.ndarray):
    """The paper's model class for the data set, trained on all rows, and its loss."""
    if name == "bike":
        return HistGradientBoostingRegressor(random_state=0).fit(X, y), "absolute"
    if name == "adult":
        return GradientBoostingClassifier(n_estimators=200, random_state=0).fit(X, y), "zero_one"
    return HistGradientBoostingClassifier(random_state=0).fit(X, y), "zero_one"


def row_losses(model, loss: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    if loss == "absolute":
        return lambda Z, y: np.abs(model.predict(Z) - y)
    return lambda Z, y: (model.predict(Z) != y).astype(np.float64)


def batch_pfi(losses, X: np.ndarray, y: np.ndarray, permutations: int, rng) -> np.ndarray:
    """Permutation feature importance: the mean loss increase when column ``j`` is permuted,
    averaged over ``permutations`` permutations."""
    base = losses(X, y)
    out = np.zeros(X.shape[1])
    for _ in range(permutations):
        perm = rng.permutation(len(X))
        for j in range(X.shape[1]):
            Z = X.copy()
            Z[:, j] = X[perm, j]
            out[j] += np.mean(losses(Z, y) - base)
    return out / permutations


def static_errors(name: str, orderings: int, rows: int | None, permutations: int,
                  realisations: int) -> tuple[dict[str, float], float]:
    """Exp. A: the median error per reservoir kind, and the model's performance. With ``rows``
    only the last ``rows`` rows of each ordering are explained; the ones before still go
    through the reservoir, so that it is in the state it has at the end of the whole stream."""
    X, y, _ = load(name)
    Xn, yn = X.numpy(), y.numpy()
    model, loss = fit(name, Xn, yn)
    losses = row_losses(model, loss)
    performance = float(np.mean(losses(Xn, yn)))
    if loss == "zero_one":
        performance = 1.0 - performance  # accuracy
    reference = normalise(batch_pfi(losses, Xn, yn, permutations, np.random.default_rng(0)))
    fn = SklearnModelFn(model)
    yt = y.to(torch.float64) if loss == "absolute" else y
    out: dict[str, list[float]] = {"uniform": [], "geometric": []}
    for seed in range(orderings):
        order = torch.randperm(len(X), generator=torch.Generator().manual_seed(seed))
        first = 0 if rows is None else max(0, len(order) - rows)  # the rows explained
        for storage, values in out.items():
            exp = pfi_explainer(fn, loss, X.shape[1], storage, realisations, seed)
            if first:  # the rows before only pass through the reservoir (no model calls)
                exp.storage.update(X[order[:first]])
            for start in range(first, len(order), BATCH):
                idx = order[start:start + BATCH]
                exp.explain(X[idx], yt[idx])
            values.append(float(np.abs(normalise(exp.importance.numpy()) - reference).sum()))
    return {k: float(np.median(v)) for k, v in out.items()}, performance


def drift_stream(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """10,000 rows of Agrawal concept 1, then 10,000 rows of concept 2."""
    parts = [next(Agrawal(classification_function=f, seed=seed + 1000 * f, n_samples=10_000)
                  .batches(10_000, dtype=torch.float64)) for f in (1, 2)]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def drift_run(seed: int, realisations: int, permutations: int,
              interval: int = 1000, window: int = 2000) -> dict[str, object]:
    """Exp. B on one stream: the errors against interval PFI at every interval end, the iPFI
    shares at the drift and at the end (geometric), and the rows after the drift until iPFI
    ranks elevel above salary."""
    X, y = drift_stream(seed)
    n, d = X.shape
    cols = Agrawal(classification_function=1, seed=0, n_samples=1).schema.columns
    salary, commission, elevel = (list(cols).index(c) for c in ("salary", "commission", "elevel"))
    current: dict[str, SklearnModelFn] = {}
    explainers = {kind: pfi_explainer(lambda Z: current["fn"](Z), "zero_one", d, kind,
                                      realisations, seed)
                  for kind in ("uniform", "geometric")}
    rng = np.random.default_rng(seed)
    errors: dict[str, list[float]] = {k: [] for k in explainers}
    ends: list[int] = []
    shares: dict[int, np.ndarray] = {}
    crossing = None
    Xn, yn = X.numpy(), y.numpy()
    for lo in range(interval, n, interval):
        model = HistGradientBoostingClassifier(random_state=0)
        model.fit(Xn[max(0, lo - window):lo], yn[max(0, lo - window):lo])
        current["fn"] = SklearnModelFn(model)
        for start in range(lo, lo + interval, BATCH):
            for exp in explainers.values():
                exp.explain(X[start:start + BATCH], y[start:start + BATCH])
            s = normalise(explainers["geometric"].importance.numpy())
            if crossing is None and start >= n // 2 and s[elevel] > s[salary]:
                crossing = start + BATCH - n // 2
        hi = lo + interval
        ref = normalise(batch_pfi(row_losses(model, "zero_one"), Xn[lo:hi], yn[lo:hi],
                                  permutations, rng))
        for kind, exp in explainers.items():
            errors[kind].append(float(np.abs(normalise(exp.importance.numpy()) - ref).sum()))
        ends.append(hi)
        shares[hi] = normalise(explainers["geometric"].importance.numpy())
    before, after = shares[n // 2], shares[n]
    ok = bool(before[salary] > before[elevel]
              and after[elevel] > after[salary] + after[commission])
    return {"errors": errors, "ends": ends, "ok": ok, "crossing": crossing,
            "before": before, "after": after}


def drift_summary(seeds: int, realisations: int, permutations: int) -> dict[str, object]:
    runs = [drift_run(s, realisations, permutations) for s in range(seeds)]
    ends = np.array(runs[0]["ends"])
    out: dict[str, object] = {"ok": float(np.mean([r["ok"] for r in runs]))}
    for kind in ("uniform", "geometric"):
        e = np.array([r["errors"][kind] for r in runs])  # [seeds, intervals]
        out[kind] = (float(np.median(e)), float(np.median(e[:, ends <= 10_000])),
                     float(np.median(e[:, ends > 10_000])))
    crossings = [r["crossing"] for r in runs if r["crossing"] is not None]
    out["crossing"] = float(np.median(crossings)) if crossings else float("nan")
    return out


def reproduce(quick: bool = True, data: Sequence[str] | None = None,
              drift: bool = True) -> list[Comparison]:
    """The comparisons; ``data`` picks the Exp. A data sets (default: agrawal and bike in quick
    mode, all four in full mode), ``drift`` whether Exp. B runs."""
    torch.set_num_threads(1)
    rows: list[Comparison] = []
    names = list(data) if data is not None else (
        ["agrawal", "bike"] if quick else ["agrawal", "elec2", "adult", "bike"])
    unknown = [n for n in names if n not in TABLE1]
    if unknown:
        raise ValueError(f"data: unknown data sets {unknown} (known: {list(TABLE1)})")
    for name in names:
        if quick:
            err, perf = static_errors(name, orderings=3, rows=3000, permutations=3,
                                      realisations=10)
        else:
            err, perf = static_errors(name, orderings=10, rows=None, permutations=10,
                                      realisations=10)
        for (kind, value), (paper, iqr) in zip(err.items(), TABLE1[name]):
            tol = TOLERANCE.get(name) if quick else None
            why = (f"quick: the last 3,000 rows of 3 orderings, reference with 3 permutations; "
                   f"tolerance 1.5 x the paper's IQR ({iqr}) + an allowance for the setting"
                   if quick else
                   f"paper's IQR {iqr}; full mode is reported, the quick one is checked")
            rows.append(Comparison(f"{name}: median error, {kind} reservoir", value, paper,
                                   tol, why))
        measure = "mean absolute error" if name == "bike" else "accuracy"
        rows.append(Comparison(f"{name}: model {measure}", perf, PERFORMANCE[name], None,
                               "the model's in-sample performance (the paper's setting "
                               "is not stated)"))
    if not drift:
        return rows
    summary = drift_summary(1, 1, 1) if quick else drift_summary(5, 10, 10)
    setting = ("quick: one stream, M = P = 1 (the paper: M = P = 10, ARF); reported"
               if quick else "5 streams, M = P = 10; model re-trained every 1,000 rows, not "
               "the paper's ARF; reported")
    for kind in ("uniform", "geometric"):
        for part, ours, paper in zip(("whole stream", "before drift", "after drift"),
                                     summary[kind], TABLE3[kind]):
            rows.append(Comparison(f"function drift: median error vs interval PFI, {kind}, "
                                   f"{part}", ours, paper, None, setting))
    rows.append(Comparison(
        "function drift: salary > elevel at the drift and elevel > salary + commission at "
        "the end (share of streams)", summary["ok"], 1.0, 0.0,
        "the paper's Fig. 3: the old concept's features lose their importance and the new "
        "one's gain it after the drift; a yes/no property, so no tolerance"))
    rows.append(Comparison(
        "function drift: rows after the drift until iPFI ranks elevel above salary",
        summary["crossing"], float("nan"), None,
        "the paper: iPFI reacts 'instantly' (no number); the model itself is re-trained on "
        "new-concept rows only from 1,000-2,000 rows after the drift"))
    return rows
