"""ERICS on synthetic streams with known drifts, next to river's ADWIN and DDM (ERICS paper §V).

    torchstream reproduce erics [--quick]
    detector_table(n=100_000, window=50)  # ERICS, ADWIN and DDM per stream, from Python

Streams (batches of 100 rows, 10% label noise, features min-max scaled to [0, 1] over the whole
stream as in the paper; drifts at 20/40/60/80% of the stream, since the paper does not state
its positions):

* SEA: sudden switches of the threshold variant 0 -> 1 -> 2 -> 3;
* Agrawal: gradual switches of the classification function 0 -> 1 -> 2 -> 3 (width 1% of the
  stream);
* Hyperplane: 10 of 20 weights drift incrementally all the time (no discrete drift positions;
  only the alert rate is reported).

ERICS trains its own Probit head (10 epochs per batch, lr 0.01) with the paper's Table II
windows and decay (SEA: M = 75, beta = 1e-4; Agrawal: M = 100, beta = 1e-3; Hyperplane:
M = 100, beta = 1e-4; W = 50), ignores alerts in the first 80 batches (at most 10% of the
stream), and uses the default fixes (clamped threshold, 50-batch cool-down). ADWIN and DDM watch the 0/1 errors of a river
Hoeffding tree trained prequentially row by row (the paper used a VFDT for the baselines).
Measures (A.6 §5.2, closed windows): detected change rate (recall), false discovery rate and
mean delay in batches, with a tolerance of ``window`` batches after each drift.

Comparison with the paper (``reproduce``): the mean delay of ERICS in batches (Table III) on
SEA and Agrawal at the paper's 100,000 rows, averaged over independently seeded streams (quick:
3 SEA streams and 1 Agrawal stream, ERICS only; full: 10 of each, plus ADWIN and DDM on the
first stream, reported only), and the share of drifts ERICS detects before the next drift
("eventually detects more than 90%", Fig. 4).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch
from river import drift, tree

from torchstream.drift import ERICS
from torchstream.evaluate.measures.detection import detection_measures
from torchstream.models.distributional import ProbitHead
from torchstream.reproductions._comparison import Comparison
from torchstream.streams.synthetic import SEA, Agrawal, ConceptDrift, Hyperplane

#: Shared data files this reproduction reads (none: synthetic streams only).
DATA = ()

B = 100
N_PAPER = 100_000  # rows per synthetic stream in the paper (Table I)
CONFIG = {
    "SEA": {"window_mvg_average": 75, "beta": 1e-4},
    "Agrawal": {"window_mvg_average": 100, "beta": 1e-3},
    "Hyperplane": {"window_mvg_average": 100, "beta": 1e-4},
}
#: Table III of the ERICS paper: average delay in batches (one run per stream).
PAPER_DELAY = {
    "SEA": {"ERICS": 52.75, "ADWIN": 34.55, "DDM": 16.45},
    "Agrawal": {"ERICS": 71.33, "ADWIN": 16.80, "DDM": 0.00},
    "Hyperplane": {"ERICS": 2.00, "ADWIN": 42.27, "DDM": 2.23},
}
#: "ERICS eventually detects more than 90% of the known drifts" (Fig. 4, the largest detection
#: range; here: an alert before the next drift). One-sided: ours >= 0.9 - 2 sd, sd the binomial
#: sd sqrt(0.9 * 0.1 / N) of a share of N drifts, written as 0.9 +- max(0.1, 2 sd) (ours <= 1).
PAPER_EVENTUAL_RECALL = 0.9
#: The paper's delay is one run on one stream of unstated drift positions. Over 10 independently
#: seeded streams of 100,000 rows (full mode here, stream seeds 0-9) one run's mean delay of
#: ERICS has standard deviation 25.9 batches on SEA (runs: 33-121) and 20.2 on Agrawal (20-89).
#: If the paper's run and ours come from the same distribution, the paper's number minus the mean
#: of our k runs has sd s * sqrt(1 + 1/k): tolerance = 2 sd.
SEED_SD = {"SEA": 25.9, "Agrawal": 20.2}
QUICK_SEEDS = {"SEA": 3, "Agrawal": 1}
FULL_SEEDS = {"SEA": 10, "Agrawal": 10}


def _chain(make, variants, n, width):
    """variants[0] -> variants[1] -> ... at equal spacing; returns the stream and drift rows."""
    step = n // len(variants)
    stream = make(variants[-1], len(variants) - 1)
    for i in range(len(variants) - 2, -1, -1):
        stream = ConceptDrift(make(variants[i], i), stream, position=step, width=width, seed=i)
    return stream


def build(name: str, n: int, seed: int = 0):
    """The stream ``name`` of ``n`` rows (min-max scaled) and its drift positions (rows).

    ``seed`` 0 gives the generators the seeds 0, 1, 2, ...; seed ``s`` gives 10 s, 10 s + 1, ...
    """
    if name == "SEA":
        s = _chain(
            lambda v, i: SEA(v, seed=10 * seed + i, n_samples=None, noise=0.1),
            [0, 1, 2, 3, 0],
            n,
            1,
        )
        known = [n // 5 * k for k in range(1, 5)]
    elif name == "Agrawal":
        s = _chain(
            lambda v, i: Agrawal(v, seed=10 * seed + i, n_samples=None, perturbation=0.1),
            [0, 1, 2, 3, 0],
            n,
            max(n // 100, 1),
        )
        known = [n // 5 * k for k in range(1, 5)]
    else:
        s = Hyperplane(
            n_features=20,
            n_drift_features=10,
            mag_change=0.001,
            noise_percentage=0.1,
            seed=seed,
            n_samples=n,
        )
        known = []
    X, y = [], []
    for Xb, yb in s.take(n).batches(B, dtype=torch.float64):
        X.append(Xb)
        y.append(yb)
    X, y = torch.cat(X), torch.cat(y)
    lo, hi = X.min(0).values, X.max(0).values
    X = (X - lo) / torch.where(hi > lo, hi - lo, torch.ones_like(hi))
    return X, y, known


def run_erics(X, y, cfg, warm_up):
    head = ProbitHead(X.shape[1], epochs=10)
    erics = ERICS(head, window_drift_detect=50, warm_up=warm_up, refractory=50, **cfg)
    t0 = time.perf_counter()
    for lo in range(0, X.shape[0] - B + 1, B):
        erics.learn(X[lo : lo + B], y[lo : lo + B])
    return [t * B for t in erics.alert_steps], time.perf_counter() - t0


def run_baselines(X, y, warm_up):
    model = tree.HoeffdingTreeClassifier()
    detectors = {"ADWIN": drift.ADWIN(), "DDM": drift.binary.DDM()}
    alerts: dict[str, list[int]] = {k: [] for k in detectors}
    Xn, yn = X.numpy(), y.tolist()
    for i in range(len(yn)):
        row = dict(enumerate(Xn[i]))
        err = int(model.predict_one(row) != yn[i]) if i else 1
        model.learn_one(row, yn[i])
        for k, det in detectors.items():
            det.update(err)
            if det.drift_detected and i >= warm_up * B:
                alerts[k].append(i)
    return alerts


def warm_up_batches(n: int) -> int:
    """The paper's 80 ignored batches, at most 10% of the stream."""
    return min(80, n // B // 10)


def measures(known: list[int], alerts: list[int], n: int, window: int) -> dict[str, float]:
    """Recall, FDR (window of ``window`` batches), delay in batches, and the eventual recall
    (the share of drifts with an alert before the next drift)."""
    kw = {"n_total": n, "n_init_tolerance": warm_up_batches(n) * B}
    found = sorted(set(alerts))
    m = detection_measures(known, found, window=window * B, **kw)
    gap = known[1] - known[0] if len(known) > 1 else n - known[0]
    eventual = detection_measures(known, found, window=gap, convention="half_open", **kw)
    return {
        "recall": m["detected_change_rate"],
        "fdr": m["false_discovery_rate"],
        "delay": m["mean_detection_delay"] / B,
        "eventual_recall": eventual["detected_change_rate"],
    }


def detector_table(n: int, window: int, echo: Callable[[str], None] = print) -> None:
    """ERICS, ADWIN and DDM on one stream of each kind (seed 0): alerts, recall, FDR, delay."""
    warm_up = warm_up_batches(n)
    echo(f"{n:,} rows per stream, batch {B}, tolerance {window} batches")
    echo(f"{'stream':<11} {'detector':<8} {'alerts':>6} {'recall':>7} {'FDR':>6} {'delay':>7}")
    for name, cfg in CONFIG.items():
        X, y, known = build(name, n)
        erics_alerts, sec = run_erics(X, y, cfg, warm_up)
        results = {"ERICS": erics_alerts, **run_baselines(X, y, warm_up)}
        for det, alerts in results.items():
            if known:
                m = measures(known, alerts, n, window)
                cols = f"{m['recall']:>7.2f} {m['fdr']:>6.2f} {m['delay']:>7.1f}"
            else:
                cols = f"{'-':>7} {'-':>6} {'-':>7}"
            echo(f"{name:<11} {det:<8} {len(alerts):>6} {cols}")
        echo(f"{'':<11} (ERICS: {1000 * sec / (n // B):.2f} ms per batch, head update included)")
    echo(
        "Known drifts at 20/40/60/80% of each stream; delay = mean batches to the first alert "
        f"(a missed drift counts its whole gap). Alerts before batch {warm_up} are ignored."
    )


def eventual_recall_tolerance(n_drifts: int) -> float:
    """``max(0.1, 2 sd)``, sd the binomial sd of a share of ``n_drifts`` at the paper's 0.9."""
    p = PAPER_EVENTUAL_RECALL
    return max(1 - p, 2 * math.sqrt(p * (1 - p) / n_drifts))


def reproduce(quick: bool = True, echo: Callable[[str], None] | None = None) -> list[Comparison]:
    """ERICS's delay (Table III) and eventual recall (Fig. 4) against the paper's.

    Quick mode: ERICS only, 3 SEA streams and 1 Agrawal stream of the paper's 100,000 rows
    (about a minute). Full mode: 10 streams of each; ADWIN and DDM on the first (reported only).
    """
    torch.set_num_threads(1)
    seeds = QUICK_SEEDS if quick else FULL_SEEDS
    rows: list[Comparison] = []
    eventual: list[float] = []
    for name, k in seeds.items():
        delays = []
        for seed in range(k):
            X, y, known = build(name, N_PAPER, seed)
            alerts, _ = run_erics(X, y, CONFIG[name], warm_up_batches(N_PAPER))
            m = measures(known, alerts, N_PAPER, 50)
            delays.append(m["delay"])
            eventual.append(m["eventual_recall"])
            if echo:
                echo(
                    f"{name} stream {seed}: ERICS delay {m['delay']:.1f} batches, "
                    f"eventual recall {m['eventual_recall']:.2f}"
                )
            if not quick and seed == 0:
                for det, found in run_baselines(X, y, warm_up_batches(N_PAPER)).items():
                    rows.append(
                        Comparison(
                            f"{name}: {det} mean delay (batches), stream 0",
                            measures(known, found, N_PAPER, 50)["delay"],
                            PAPER_DELAY[name][det],
                            None,
                            "river's Hoeffding tree in place of scikit-multiflow's VFDT; one "
                            "stream; reported only",
                        )
                    )
        sd = SEED_SD[name] * math.sqrt(1 + 1 / k)
        rows.append(
            Comparison(
                f"{name}: ERICS mean delay (batches), mean of {k} stream(s)",
                float(np.mean(delays)),
                PAPER_DELAY[name]["ERICS"],
                round(2 * sd, 1),
                f"2 sd of (paper run - mean of {k} runs of ours), sd = {SEED_SD[name]} * "
                f"sqrt(1 + 1/{k}); {SEED_SD[name]} = the sd of one run over 10 stream seeds; drift "
                "positions unstated in the paper (20/40/60/80% here)",
            )
        )
    paper, n_drifts = PAPER_EVENTUAL_RECALL, len(eventual) * 4
    tol = eventual_recall_tolerance(n_drifts)
    rows.append(
        Comparison(
            f"ERICS recall before the next drift, {n_drifts} drifts",
            float(np.mean(eventual)),
            paper,
            round(tol, 3),
            "the paper: ERICS eventually detects more than 90% of the known drifts (Fig. 4); "
            f"one-sided, 2 binomial sd of a share of {n_drifts} drifts below 0.9",
        )
    )
    return rows
