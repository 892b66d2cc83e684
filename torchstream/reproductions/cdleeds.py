"""Reproduce CDLEEDS' global drift detection (CIKM 2022, Tables 2 and 3) and its saving of
attribution recomputations (experiment 2), next to the paper's numbers.

Streams with known abrupt drifts: SEA (variants 0 -> 1 -> 2 -> 3) and Agrawal (functions
0 -> 2 -> 4 -> 6), generated here; real data with induced drift (the paper's protocol, after
Sethi & Kantardzic): at each drift position the values of the top half of the features by mutual
information with the label are permuted among the rows that follow (one fixed permutation of
those columns per segment) — ``electricity.csv`` and ``adult.csv`` (categoricals as integer
codes), all features min-max scaled to [0, 1]. Three drifts at 1/4, 1/2 and 3/4 of each stream
(the paper does not give its drift positions or counts).

Model: river's Hoeffding tree with adaptive naive-Bayes leaves (the paper: scikit-multiflow's, in
its default configuration), tested and then trained on each batch of ``batch`` rows; or
(``model="logistic"``) an online logistic regression (SGD, one step per batch). CDLEEDS monitors
the predicted probability of class 1 minus the model's output at the EWMA of the inputs
(beta = 0.001), with the paper's hyperparameters (gamma 0.95, significance 0.01, windows of 200,
max_age 100, max_depth 5). Two CDLEEDS read the same model outputs:

* ``CDLEEDS`` — the published rule: a global alert whenever Fisher's combination of the current
  leaves' p-values is below significance (N + 1) / (2N);
* ``CDLEEDS restart`` — the same, but after each alert the leaf tests restart on the rows that
  arrive after it (``reset_on_drift=True``, float's pipeline option for change detectors).

Why the published rule alerts at almost every update under a learning model (measured on SEA
with the Hoeffding tree, batches of 10): inside a neighbourhood of depth 5 the model's output is
nearly flat (within-window sd 0.003-0.01 in probability), and the model's updates move it by a
few thousandths; a window of 200 rows spans about 5,000 stream rows, so its older and newer
halves differ by such an amount, which the t-test — whose scale is the within-window sd — finds
highly significant (p far below 1e-10). At any time 10-65 % of the 25-30 leaves reject, and
Fisher's method turns a single leaf at p = 1e-10 into a combined p of about 1e-4 << the level.
The baseline output f_t(b_t) is shared by all leaves, so it moves every leaf's mean together
and the leaf tests are not independent as Fisher's method assumes: on a stationary SEA stream
with the model *frozen* after 5,000 rows, the global test alarms at 0.4-0.6 % of the updates
with a constant baseline output but at 12-21 % with the EWMA baseline (b_t wanders, and so does
f(b_t)). With the restart the next alert needs evidence gathered after the previous one, and
the alerts become as sparse as the paper's (delays of hundreds to thousands of rows).

ADWIN (delta = 0.1) and DDM run on the 0/1 error of each row, this package's ERICS on a probit
head (window_mvg_average = 90, beta = 0.001).

Measures (paper §5, float's conventions): delay = mean number of observations until the first
alert after each drift (before the next one; a missed drift counts its whole segment); recall
and FDR with a tolerance window after each drift varied from 1 % to 10 % of the stream, the
window ending at the next drift; the score is mean(recall, 1 - FDR), mean +- std over the ten
windows; alerts in the first 1000 observations are ignored. Recomputation: 100 monitored rows
(drawn after the first 1000), recomputed per the CDLEEDS rule; the saving is the share of
(rows x steps) not recomputed.

Usage: ``torchstream reproduce cdleeds --quick`` (the checked comparisons, about 75 s); the
whole tables with the baselines, from Python: ``detector_table(quick=True)`` (options: the rows
per update, the seed, the CDLEEDS routing, the monitored model).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch
from river import drift as river_drift
from river import tree

from torchstream.drift.cdleeds import CDLEEDS
from torchstream.drift.erics import ERICS
from torchstream.evaluate.measures.detection import (
    detected_change_rate,
    false_discovery_rate,
    mean_detection_delay,
)
from torchstream.explain.baselines import EWMABaseline
from torchstream.learners import RiverLearner
from torchstream.models.distributional import ProbitHead
from torchstream.reproductions._comparison import Comparison
from torchstream.reproductions._data import coded_table
from torchstream.schema import Schema
from torchstream.streams import SEA, Agrawal

#: Shared data files this reproduction reads.
DATA = ("electricity.csv", "adult.csv")

# the paper's Table 2 (mean of recall and 1 - FDR) and Table 3 (delay), where they exist
PAPER = {
    "SEA": {
        "CDLEEDS": (0.60, 2517),
        "ERICS": (0.19, 75032),
        "ADWIN": (0.65, 675),
        "DDM": (0.85, 27959),
    },
    "Agrawal": {
        "CDLEEDS": (0.55, 10163),
        "ERICS": (0.62, 27),
        "ADWIN": (0.69, 1315),
        "DDM": (0.55, 36515),
    },  # the paper's Agrawal-Mixed
    "Electricity": {
        "CDLEEDS": (0.40, 5859),
        "ERICS": (0.56, 98),
        "ADWIN": (0.45, 4656),
        "DDM": (None, None),
    },
    "Adult": {
        "CDLEEDS": (0.66, 204),
        "ERICS": (0.57, 2),
        "ADWIN": (0.41, 1851),
        "DDM": (0.25, 14701),
    },
}
PAPER_SAVED = {"Adult": 80.05, "Electricity": 56.11}
#: the detector the paper's numbers are put next to, per row of our tables
PAPER_NAME = {"CDLEEDS": "CDLEEDS", "CDLEEDS restart": "CDLEEDS"}


def minmax(X: torch.Tensor) -> torch.Tensor:
    lo, hi = X.min(0).values, X.max(0).values
    return (X - lo) / torch.where(hi > lo, hi - lo, torch.ones_like(hi))


def synthetic(kind: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    seg = n // 4
    parts = []
    for i in range(4):
        if kind == "SEA":
            stream = SEA(variant=i, seed=seed + i, n_samples=seg, noise=0.1)
        else:
            stream = Agrawal(2 * i, seed=seed + i, n_samples=seg)
        parts.append(next(iter(stream.batches(seg, dtype=torch.float64))))
    X = minmax(torch.cat([p[0] for p in parts]))
    y = torch.cat([p[1] for p in parts]).long()
    return X, y, [seg, 2 * seg, 3 * seg]


def real(name: str, n: int | None, seed: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    from sklearn.feature_selection import mutual_info_classif

    X, y = coded_table(name, "class" if name == "electricity" else "income")
    if n is not None:
        X, y = X[:n], y[:n]
    X = minmax(torch.from_numpy(X)).numpy()
    mi = mutual_info_classif(X, y, random_state=seed)
    top = np.argsort(-mi)[: X.shape[1] // 2]
    rng = np.random.default_rng(seed)
    drifts = [len(X) // 4, len(X) // 2, 3 * len(X) // 4]
    for start in drifts:  # permute the top columns for the rest of the stream
        X[start:, top] = X[start:, rng.permutation(top)]
    return torch.from_numpy(X), torch.as_tensor(y).long(), drifts


def make_data(name: str, n: int | None, seed: int) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    """``(X, y, drift positions)`` of a data set of the tables (``n`` rows; None: all)."""
    if name in ("SEA", "Agrawal"):
        return synthetic(name, n or 100_000, seed)
    return real(name.lower(), n, seed)


class _Logistic:
    """Online logistic regression (SGD, learning rate 0.5): ``p(X)`` and ``learn(X, y)``."""

    def __init__(self, d: int) -> None:
        self.w = torch.zeros(d, dtype=torch.float64, requires_grad=True)
        self.b = torch.zeros(1, dtype=torch.float64, requires_grad=True)
        self.opt = torch.optim.SGD([self.w, self.b], lr=0.5)

    def p(self, X: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            return torch.sigmoid(X @ self.w + self.b)

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        loss = torch.nn.functional.binary_cross_entropy_with_logits(X @ self.w + self.b, y.double())
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()


class _HoeffdingTree:
    """river's Hoeffding tree (the paper's model), predictions through the vectorised path."""

    def __init__(self, d: int) -> None:
        self.learner = RiverLearner(
            tree.HoeffdingTreeClassifier(), Schema([f"x{i}" for i in range(d)]), n_classes=2
        )

    def p(self, X: torch.Tensor) -> torch.Tensor:
        return self.learner(X)[:, 1].double()

    def learn(self, X: torch.Tensor, y: torch.Tensor) -> None:
        self.learner.learn(X, y)


MODELS = {"hoeffding_tree": _HoeffdingTree, "logistic": _Logistic}


def run(
    X: torch.Tensor,
    y: torch.Tensor,
    batch: int,
    seed: int,
    routing: str = "pivots",
    model: str = "hoeffding_tree",
    baselines: bool = True,
) -> dict:
    """One prequential pass: the model is tested on each batch, then the detectors are updated
    and the model learns the batch. Returns the alert positions (the last row of the alerting
    batch) per detector, the saved share of recomputations, CDLEEDS' time per observation and
    its number of leaves."""
    n, d = X.shape
    torch.manual_seed(seed)
    f = MODELS[model](d)
    cds = {
        "CDLEEDS": CDLEEDS(routing=routing),
        "CDLEEDS restart": CDLEEDS(routing=routing, reset_on_drift=True),
    }
    base = EWMABaseline(0.001)
    alerts: dict[str, list[int]] = {name: [] for name in cds}
    if baselines:
        adwin, ddm = river_drift.ADWIN(delta=0.1), river_drift.binary.DDM()
        erics = ERICS(ProbitHead(d), window_mvg_average=90, window_drift_detect=90, beta=0.001,
                      warm_up=0, refractory=0)
        alerts.update({"ERICS": [], "ADWIN": [], "DDM": []})
    g = torch.Generator().manual_seed(seed)
    monitored = X[1000 + torch.randperm(n - 1000, generator=g)[:100]]
    n_recomputed = n_possible = 0
    monitoring = False
    cd_seconds = 0.0
    for start in range(0, n, batch):
        Xb, yb = X[start : start + batch], y[start : start + batch]
        p1 = f.p(Xb)
        if base.n_seen == 0:  # b_0 = the mean of the first batch
            base.update(Xb)
        phi0 = f.p(base.mean.reshape(1, -1).to(Xb.dtype)).reshape(())
        for name, cd in cds.items():
            t0 = time.perf_counter()
            cd.observe(Xb, p1, phi0)
            if name == "CDLEEDS":
                cd_seconds += time.perf_counter() - t0
            if cd.drift_detected:
                alerts[name].append(start + Xb.shape[0] - 1)
        cd = cds["CDLEEDS"]
        if start >= 1000:
            if not monitoring:
                cd.monitor(monitored)
                cd.detect_local_change()
                monitoring = True
            else:
                rec = cd.detect_local_change().recompute
                n_recomputed += int(rec.sum())
                n_possible += rec.numel()
        if start > 0:
            base.update(Xb)
        if baselines:
            errors = ((p1 > 0.5).long() != yb).tolist()
            for i, e in enumerate(errors):
                adwin.update(float(e))
                ddm.update(e)
                if adwin.drift_detected:
                    alerts["ADWIN"].append(start + i)
                if ddm.drift_detected:
                    alerts["DDM"].append(start + i)
            erics.learn(Xb, yb)
            if erics.drift_detected:
                alerts["ERICS"].append(start + Xb.shape[0] - 1)
        f.learn(Xb, yb)
    return {
        "alerts": alerts,
        "saved": 1 - n_recomputed / max(n_possible, 1),
        "ms_per_obs": 1e3 * cd_seconds / n,
        "leaves": cds["CDLEEDS"].n_leaves,
    }


def score(alerts: list[int], drifts: list[int], n: int) -> tuple[float, float, float]:
    """``(mean, std)`` of mean(recall, 1 - FDR) over tolerance windows of 1..10 % of the
    stream, and the mean delay (float's half-open windows; no alert: NaN, the paper's "-")."""
    late = [a for a in alerts if a >= 1000]
    if not late:
        return math.nan, math.nan, math.nan
    values = []
    for frac in np.linspace(0.01, 0.10, 10):
        kw = {
            "window": int(frac * n),
            "n_total": n,
            "n_init_tolerance": 1000,
            "convention": "half_open",
        }
        recall = detected_change_rate(drifts, alerts, **kw)
        fdr = false_discovery_rate(drifts, alerts, **kw)
        values.append((recall + 1 - fdr) / 2)
    delay = mean_detection_delay(drifts, alerts, window=1, n_total=n, n_init_tolerance=1000)
    return float(np.mean(values)), float(np.std(values)), float(delay)


# ---------------------------------------------------------------------------- reproduce()
#: quick mode: every data set with 20,000 rows (the synthetic ones: 5,000 per concept), the
#: paper's model, batches of 10 rows, no baselines (about 75 s on 2 cores); full mode: 100,000
#: synthetic rows and the whole real data sets
QUICK = {"rows": 20_000, "batch": 10, "model": "hoeffding_tree", "seed": 0}
FULL = {"rows": None, "batch": 10, "model": "hoeffding_tree", "seed": 0}
SETS = ("SEA", "Agrawal", "Electricity", "Adult")
#: the paper's CDLEEDS delays on these four sets are 204 .. 10,163 rows: at least 100
MIN_DELAY = 100

#: Over stream seeds 0-3 (quick mode) the restarted CDLEEDS' mean score over the four sets is
#: 0.435, 0.52, 0.49, 0.545 (sd 0.047). The paper's number is one run too, so the difference of
#: two single runs has sd sqrt(2) * 0.047 = 0.067: 2 sd = 0.134, rounded up.
SCORE_TOLERANCE = 0.14
SCORE_WHY = (
    "2 sd of the difference of two single runs: sqrt(2) x 0.047, 0.047 = the sd of our mean "
    "over stream seeds 0-3 (0.435-0.545). The score alone does not tell an alert at every "
    "update (0.59 here) from sparse alerts: see the delay"
)
DELAY_WHY = (
    "the paper's delays on these sets are 204-10,163 rows; our 5,000-row segments (quick) cap a "
    "delay, so only the lower end is checked (median over seeds 0-3: 204-690 rows)"
)


def _paper_cdleeds() -> tuple[float, float]:
    """The paper's CDLEEDS mean score and median delay over our four data sets."""
    scores = [PAPER[s]["CDLEEDS"][0] for s in SETS]
    delays = [PAPER[s]["CDLEEDS"][1] for s in SETS]
    return float(np.mean(scores)), float(np.median(delays))


def reproduce(quick: bool = True, echo=None) -> list[Comparison]:
    """CDLEEDS' score and delay on SEA, Agrawal, Electricity and Adult, next to Tables 2-3.

    Checked, for the CDLEEDS that restarts its tests after an alert: the mean score over the
    four sets (as the paper's "Mean Measure") and that the median delay is at least 100 rows.
    Reported only: every per-set number, the published rule (an alert at almost every update:
    a delay of one batch) and CDLEEDS' time per observation.
    """
    torch.set_num_threads(1)
    cfg = QUICK if quick else FULL
    ours: dict[str, dict[str, tuple[float, float, float]]] = {}
    for name in SETS:
        n = cfg["rows"] or (100_000 if name in ("SEA", "Agrawal") else None)
        X, y, drifts = make_data(name, n, cfg["seed"])
        res = run(X, y, cfg["batch"], cfg["seed"], model=cfg["model"], baselines=False)
        ours[name] = {d: score(a, drifts, X.shape[0]) for d, a in res["alerts"].items()}
        if echo:
            for d, (m, sd, delay) in ours[name].items():
                echo(f"{name:<12}{d:<16}{m:6.2f} +- {sd:.2f}{delay:10,.0f}")
    setting = (
        f"reported only: {cfg['rows'] or 'all'} rows, 3 drifts, river's Hoeffding tree "
        "(the paper: up to 500,000 rows, drift count unstated, scikit-multiflow's tree)"
    )
    rows: list[Comparison] = []
    for name in SETS:
        p_score, p_delay = PAPER[name]["CDLEEDS"]
        for det, (m, _, delay) in ours[name].items():
            why = setting if not rows else ""  # one note for all per-set rows
            rows.append(Comparison(f"{name}: {det} score", m, p_score, None, why))
            rows.append(Comparison(f"{name}: {det} delay", delay, p_delay, None, ""))
    paper_score, paper_delay = _paper_cdleeds()
    for det in ("CDLEEDS", "CDLEEDS restart"):
        checked = det == "CDLEEDS restart"
        mean = float(np.mean([ours[s][det][0] for s in SETS]))
        median = float(np.median([ours[s][det][2] for s in SETS]))
        rows.append(
            Comparison(
                f"{det}: mean score over the 4 data sets",
                mean,
                paper_score,
                SCORE_TOLERANCE if checked else None,
                SCORE_WHY if checked else "reported only: always alerting scores 0.59 here",
            )
        )
        rows.append(
            Comparison(
                f"{det}: median delay over the 4 data sets", median, paper_delay, None, setting
            )
        )
        rows.append(
            Comparison(
                f"{det}: median delay >= {MIN_DELAY} rows (1 = yes)",
                float(median >= MIN_DELAY),
                1.0,
                0.0 if checked else None,
                DELAY_WHY
                if checked
                else "reported only: the published rule alerts at the "
                "first update after each drift",
            )
        )
    for d, ms in timing(echo=echo or (lambda _: None)).items():
        rows.append(
            Comparison(
                f"CDLEEDS ms per observation, d = {d}, one row per update",
                ms,
                2.32,
                None,
                "reported only: the paper's mean over its data sets on its machine",
            )
        )
    return rows




def detector_table(
    quick: bool = False,
    *,
    batch: int = 10,
    seed: int = 0,
    routing: str = "pivots",
    model: str = "hoeffding_tree",
    echo: Callable[[str], None] = print,
) -> None:
    """The paper's Tables 2 and 3 and its recomputation saving, every detector (CDLEEDS, its
    restart, ERICS, ADWIN, DDM) next to the published numbers, as text lines to ``echo``:
    streams of 20,000 rows (``quick``) or 100,000 synthetic rows and the whole real sets;
    ``batch`` rows per update; CDLEEDS ``routing``; the monitored ``model`` (one of
    :data:`MODELS`; the paper: a Hoeffding tree)."""
    if routing not in ("pivots", "centroids"):
        raise ValueError(f"routing must be 'pivots' or 'centroids', got {routing!r}")
    if model not in MODELS:
        raise ValueError(f"model must be one of {sorted(MODELS)}, got {model!r}")
    torch.set_num_threads(1)
    n_syn = 20_000 if quick else 100_000
    n_real = 20_000 if quick else None
    sizes = {"SEA": n_syn, "Agrawal": n_syn, "Electricity": n_real, "Adult": n_real}
    echo(
        f"CDLEEDS routing = {routing}; model = {model}; batch = {batch} rows per "
        "update; score = mean(recall, 1 - FDR) over tolerance windows of 1..10 % of the stream "
        "(ours: mean +- std | paper); delay in observations"
    )
    header = (
        f"{'data':<12}{'detector':<16}{'score (ours)':>16}{'paper':>8}{'delay':>10}{'paper':>9}"
    )
    echo(header)
    echo("-" * len(header))
    summary = []
    for name, n in sizes.items():
        X, y, drifts = make_data(name, n, seed)
        t0 = time.perf_counter()
        res = run(X, y, batch, seed, routing, model)
        for det, alerts in res["alerts"].items():
            mean, sd, delay = score(alerts, drifts, X.shape[0])
            p_score, p_delay = PAPER[name][PAPER_NAME.get(det, det)]
            ps = "-" if p_score is None else f"{p_score:.2f}"
            pd_ = "-" if p_delay is None else f"{p_delay:,}"
            ours = "-" if math.isnan(mean) else f"{mean:.2f} +- {sd:.2f}"
            od = "-" if math.isnan(delay) else f"{delay:,.0f}"
            echo(f"{name:<12}{det:<16}{ours:>16}{ps:>8}{od:>10}{pd_:>9}")
        summary.append(
            (
                name,
                X.shape[0],
                X.shape[1],
                res["saved"],
                PAPER_SAVED.get(name),
                res["ms_per_obs"],
                res["leaves"],
                time.perf_counter() - t0,
            )
        )
    echo("")
    echo(
        f"{'data':<12}{'rows':>8}{'d':>4}{'saved (ours)':>14}{'paper':>8}"
        f"{'CDLEEDS ms/obs':>16}{'leaves':>8}{'run s':>8}"
    )
    for name, n, d, saved, paper_saved, ms, leaves, secs in summary:
        ps = "-" if paper_saved is None else f"{paper_saved:.1f}%"
        echo(
            f"{name:<12}{n:>8}{d:>4}{100 * saved:>13.1f}%{ps:>8}{ms:>16.3f}{leaves:>8}{secs:>8.1f}"
        )
    echo("paper: CDLEEDS 2.32 ms per observation (ERICS 3.68, ADWIN 0.14, DDM 0.12)")
    timing(routing, echo)


def timing(routing: str = "pivots", echo=print) -> dict[int, float]:
    """Time per observation of CDLEEDS, one row per update, d in {10, 100} (ms)."""
    echo("")
    out = {}
    for d in (10, 100):
        g = torch.Generator().manual_seed(0)
        X = torch.rand(3000, d, generator=g, dtype=torch.float64)
        prob = torch.sigmoid(4 * (X.sum(1) - d / 2) / d**0.5)
        det = CDLEEDS(routing=routing)
        for t in range(500):
            det.observe(X[t : t + 1], prob[t : t + 1])
        t0 = time.perf_counter()
        for t in range(500, 3000):
            det.observe(X[t : t + 1], prob[t : t + 1])
        out[d] = 1e3 * (time.perf_counter() - t0) / 2500
        echo(
            f"CDLEEDS, uniform rows, d = {d:>3}: {out[d]:.3f} ms per observation "
            f"(one row per update, {det.n_leaves} leaves)"
        )
    return out
