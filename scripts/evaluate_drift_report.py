"""The drift report measured on drifts whose truth is known, against two baselines.

    python scripts/evaluate_drift_report.py [--quick] [--only TEXT ...] [--json PATH]
        [--settle N] [--min-effect F] [--peers PYTHON]

Every case is one seeded stream with one drift at row ``r``; a :class:`DriftReporter` is made
to report at ``r`` (``at=[r]``) and its verdicts are compared with the truth. The full
run has 83 cases (47 real drifts, 9 of them with moved inputs too, 21 virtual drifts, 15
controls) and takes about 10 minutes on two idle CPU cores; ``--quick`` runs 10 of them in
about a minute; ``--only TEXT`` runs the cases whose ``name (seed N)`` contains ``TEXT``
(e.g. ``--only "sea theta 9->7 (seed 2)"``, ~3 s a case). ``--peers PYTHON`` also runs
Evidently and NannyML on the same two windows of every case (``scripts/drift_peers.py``, in an
environment of their own: ``python -m venv peers && peers/bin/pip install evidently nannyml
'pandas<3'``).

Cases and their truth (a feature is *relevant* when the labelling function reads it):

* **Agrawal function switches** (inputs drawn as Agrawal et al.'s generator defines them, labels
  from functions 0, 2, 6 and 8 written from their definitions; switches 0->6, 6->0, 2->6, 6->2,
  0->2, 2->0, 6->8, 8->2, seeds 0-2). Relevant features: f0 {age}, f2 {age, elevel}, f6
  {salary, commission, loan}, f8 {salary, commission, elevel, loan}. Truth gained =
  relevant(after) - relevant(before), lost = relevant(before) - relevant(after). Features
  relevant on *both* sides are left out of the scores: the function that reads them changed, so
  their importance may legitimately rise or fall. Features relevant on neither side must stay
  ``unchanged``. Left out: functions 1, 3 and 5 threshold salary at 75,000, where the
  generator's commission switches between 0 and a positive value (commission = 0 iff salary >=
  75,000), so a model may legitimately read commission as a proxy for salary; function 4 has
  unreachable branches; function 7 labels 1.8 % of the rows 1 (a constant predictor is 98 %
  right, so no feature matters to the 0/1 loss); function 9 reads hvalue, which the generator
  derives from zipcode (the same proxy problem).
* **SEA threshold changes** (x1, x2, x3 ~ U(0, 10), y = 1[x1 + x2 <= theta], 10 % label noise;
  theta 8 -> 9.5 and 9 -> 7, seeds 0-2): relevant {x1, x2} on both sides (left out), x3
  irrelevant: it must stay ``unchanged``.
* **Hyperplane drifts on a subset of weights** (d = 10, x ~ U(-1, 1), y = 1[w . x > 0], 5 %
  label noise, active weights ~ U(0.5, 1.5), seeds 0-4): of four active features two drop to
  weight 0 (lost) and two stay (left out), two inactive ones get a weight (gained), four are
  inactive throughout (must stay ``unchanged``); the roles are drawn per seed.
* **Purely virtual drifts** (P(y | x) fixed, inputs move; truth: kind ``virtual``, no gained or
  lost; seeds 0-2): (a) an inactive hyperplane feature's mean moves by +1 (half its range);
  (b) Agrawal f6 with the irrelevant ``car`` moved by +10 (codes 11..30); (c) y = 1[x0 + x1 >
  0], x ~ N(0, I_4), 5 % label noise, then x0 += 1 and x1 -= 1: w . x is unchanged and every
  permuted difference x0' - x0 keeps its distribution, so the permutation importance is
  unchanged.
* **Virtual drifts a test of means misses or importance follows** (seeds 0-2): an inactive
  hyperplane feature's spread changes with its mean kept (U(-1, 1) -> +-U(0.8, 1)); an
  *active* hyperplane feature's inputs move to U(0, 1); Agrawal f0 with its one relevant
  feature, age, drawn from 20..49 after the row. P(y|x) is unchanged in each: the report must
  call them virtual even where the importance moves with the data.
* **Mixed drifts** (P(y|x) and P(x) both change; seeds 0-2): SEA theta 8 -> 9.5 with the
  irrelevant x3 drawn from U(5, 10) after the row; Agrawal f6 -> f8 with ``car`` moved by +10;
  the hyperplane drift above with one feature inactive on both sides moved by +1. Truth: kind
  ``real``, the moved input named, the reliance truth of the drift alone.
* **Real data with injected changes** (electricity, rows shuffled into a stationary stream,
  seeds 0-2): nothing (a control); only rows with nswdemand above its median after the row (a
  selection on x: virtual, nswdemand shifted); the labels flipped where period > 0.5 (real).
* **Drift-free controls** (truth: kind ``none``; seeds 0-2): the hyperplane stream, the Agrawal
  f2 and f6 streams and a SEA stream with nothing changed at ``r`` (f6 is still being learned
  at ``r``: learning, not drift).

The model's inputs are a fixed affine map of the generator's known ranges to about [-1, 1] (the
same map before and after the drift, so moved inputs stay moved); the learner standardizes them
again with its running statistics.

Settings (one for every case): batches of 25 rows; ``r`` = 8,000 (the before window starts
after 6,000 rows of learning); learner ``OnlineClassifier(MLP(d, k, hidden=(32,)), lr=0.01)``
(Adam); ``IncrementalPFI`` with the 0/1 loss, ``alpha = 0.01`` (EMA span 200 rows) and its
default geometric storage; reporter ``window = 2,000`` rows (10 EMA spans a side),
``settle = 6,000`` rows, ``level = 0.05``; stream length ``r + settle + window``. ``settle`` is
the learner's time to adapt: its accuracy over the next 1,000 rows comes within 0.02 of its
final level a median of ~2,000 and at most ~4,200 rows after a real drift (the script prints
this), and its reliance settles later than its accuracy: with ``settle = 4,000`` the MLP
that had just learned f0 or f2 still leaned on the irrelevant zipcode (0.02 of 0/1 loss) in
two of the 24 Agrawal switches; the interval test alone (``min_effect = 0``) called both
``gained`` (precision 0.979, 95/97, recall 1), the reporter's default ``min_effect = 0.05``
(a change below 5 % of the largest importance is ``unchanged``) keeps them unchanged
(precision 1). A window of 1,000 rows gave the same verdicts' scores as 2,000 (precision and
recall 1).

Measures (the truth's ``shifted`` inputs: those whose distribution the case moves). Over the
real drifts (Agrawal, SEA, Hyperplane): *precision* = correct verdicts / all
``gained`` or ``lost`` verdicts on features not relevant on both sides, a verdict being correct
only with the truth's direction; *recall* = correct verdicts / truth gained and lost features.
Also the share of real drifts reported ``real``. Over the virtual drifts: the share reported
``real`` and the share reported ``virtual``; over the virtual and mixed drifts the share whose
shifted input the report flags. A table per family gives the kinds the report called.
Over the controls: false reports (kind ``real`` or ``virtual``; a ``learning`` report says the
model changed, not the data).

Baselines on the same runs:

* **ERICS partial drift** (``ERICS(ProbitHead(d, epochs=10))`` with its defaults, a plug-in on
  the same batches and inputs): a feature counts as changed when it has a partial alert whose
  batch ends in ``(r, r + settle + window]`` (a detector cannot see a drift before it, and its
  alarm may come any time while the model adapts). ERICS gives no direction, so it is scored on
  the changed set gained + lost (with the same exclusions); a virtual drift or a control counts
  as reported real when any feature alerts. It has no notion of a virtual drift (``n/a``).
* **Raw iPFI change, no test**: from the report's own window means, ``gained`` when
  after - before > 10 % of the largest before-window importance, ``lost`` when before - after
  exceeds the same amount; no input test either (``n/a`` for virtual recognised). The
  fraction matters: on these runs 5 % flags 7 of the 9 virtual drifts and 4 of the 6
  controls, 15 % and 20 % miss 1 and 3 of the 95 true changes (the gains of elevel, ~0.07
  against a largest importance of ~0.4, are the smallest).

The reporter's cost per report is the wall time of its ``on_batch`` and ``on_record`` calls over the whole stream
(it records every batch) including building the one report (timed on its own as well).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import tempfile
import time
from pathlib import Path
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from torchstream import OnlineClassifier, Prequential
from torchstream.base import PluginBase
from torchstream.drift import ERICS
from torchstream.report.reporter import DriftReporter, Report, json_safe
from torchstream.explain.ipfi import IncrementalPFI
from torchstream.models import MLP
from torchstream.models.distributional import ProbitHead
from torchstream.step import StepRecord
from torchstream.streams import data_path, from_numpy
from torchstream.typing import BatchView

BATCH = 25
DRIFT = 8_000
WINDOW = 2_000
SETTLE = 6_000
ALPHA = 0.01
LEVEL = 0.05
RAW_FRACTION = 0.10
MIN_EFFECT = 0.05  # the reporter's default
ROWS = DRIFT + SETTLE + WINDOW

AGRAWAL = ("salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan")
#: Relevant features of each Agrawal function used here (read from its definition).
RELEVANT: dict[int, frozenset[str]] = {
    0: frozenset({"age"}),
    2: frozenset({"age", "elevel"}),
    6: frozenset({"salary", "commission", "loan"}),
    8: frozenset({"salary", "commission", "elevel", "loan"}),
}
#: The Agrawal function switches ``(before, after)``.
AGRAWAL_SWITCHES = ((0, 6), (6, 0), (2, 6), (6, 2), (0, 2), (2, 0), (6, 8), (8, 2))
#: The generator's range of each Agrawal feature (for the fixed map to [-1, 1]).
_AGRAWAL_RANGE = np.array([[20e3, 150e3], [0.0, 85e3], [20, 80], [0, 4], [1, 20], [0, 8],
                           [0.0, 1.2e6], [1, 30], [0.0, 500e3]])


@dataclass(frozen=True)
class Case:
    """One stream with one drift row and its truth."""

    family: str
    name: str
    seed: int
    X: np.ndarray
    y: np.ndarray
    features: tuple[str, ...]
    gained: frozenset[str]
    lost: frozenset[str]
    both: frozenset[str]  # relevant on both sides: left out of the scores
    kind: str  # the true kind: "real", "virtual" or "none"
    shifted: frozenset[str] = frozenset()  # the inputs whose distribution moved


# ----------------------------------------------------------------------------- truth
def switch_truth(before: frozenset[str], after: frozenset[str]
                 ) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """``(gained, lost, both)`` of a switch between two relevant sets."""
    return after - before, before - after, before & after


# ----------------------------------------------------------------------------- streams
def agrawal_inputs(rng: np.random.Generator, n: int) -> np.ndarray:
    """``n`` rows of the nine Agrawal inputs, drawn as the generator defines them."""
    salary = rng.uniform(20e3, 150e3, n)
    commission = np.where(salary >= 75e3, 0.0, rng.uniform(10e3, 85e3, n))
    age = rng.integers(20, 81, n).astype(float)
    elevel = rng.integers(0, 5, n).astype(float)
    car = rng.integers(1, 21, n).astype(float)
    zipcode = rng.integers(0, 9, n).astype(float)
    hvalue = (8 - zipcode) * 100e3 * rng.uniform(0.5, 1.5, n)
    hyears = rng.integers(1, 31, n).astype(float)
    loan = rng.uniform(0.0, 500e3, n)
    return np.stack([salary, commission, age, elevel, car, zipcode, hvalue, hyears, loan], 1)


def agrawal_label(f: int, X: np.ndarray) -> np.ndarray:
    """Agrawal et al.'s classification function ``f`` (0, 2, 6 or 8) of raw inputs."""
    salary, commission, age, elevel, loan = X[:, 0], X[:, 1], X[:, 2], X[:, 3], X[:, 8]
    young, middle = age < 40, (age >= 40) & (age < 60)
    if f == 0:
        return (young | (age >= 60)).astype(int)
    if f == 2:
        ok = np.where(young, elevel <= 1, np.where(middle, (elevel >= 1) & (elevel <= 3),
                                                   elevel >= 2))
        return ok.astype(int)
    income = 2.0 * (salary + commission) / 3.0
    if f == 6:
        disposable = income - loan / 5.0 - 20e3
    elif f == 8:
        disposable = income - 5e3 * elevel - loan / 5.0 - 10e3
    else:
        raise ValueError(f"Agrawal function {f} is not one of {sorted(RELEVANT)}")
    return (disposable <= 1.0).astype(int)


def _agrawal_scaled(X: np.ndarray) -> np.ndarray:
    lo, hi = _AGRAWAL_RANGE[:, 0], _AGRAWAL_RANGE[:, 1]
    return 2.0 * (X - lo) / (hi - lo) - 1.0


def agrawal_case(before: int, after: int, seed: int) -> Case:
    """A sudden switch of the Agrawal function ``before`` -> ``after`` at row ``DRIFT``."""
    rng = np.random.default_rng(seed)
    X = agrawal_inputs(rng, ROWS)
    y = np.concatenate([agrawal_label(before, X[:DRIFT]), agrawal_label(after, X[DRIFT:])])
    gained, lost, both = switch_truth(RELEVANT[before], RELEVANT[after])
    kind = "real" if before != after else "none"
    family = "agrawal" if kind == "real" else "control"
    return Case(family, f"agrawal f{before}->f{after}", seed, _agrawal_scaled(X), y, AGRAWAL,
                gained, lost, both, kind)


def agrawal_virtual_case(seed: int) -> Case:
    """Agrawal f6 (relevant: salary, commission, loan) with ``car`` moved by +10 at ``DRIFT``."""
    rng = np.random.default_rng(seed)
    X = agrawal_inputs(rng, ROWS)
    X[DRIFT:, 4] += 10.0
    y = agrawal_label(6, X)
    return Case("virtual", "agrawal f6, car +10", seed, _agrawal_scaled(X), y, AGRAWAL,
                frozenset(), frozenset(), frozenset(), "virtual", frozenset({"car"}))


def _noisy(y: np.ndarray, rng: np.random.Generator, noise: float) -> np.ndarray:
    flip = rng.random(y.shape[0]) < noise
    return np.where(flip, 1 - y, y)


def sea_case(theta_before: float, theta_after: float, seed: int) -> Case:
    """SEA with its threshold changed from ``theta_before`` to ``theta_after`` at ``DRIFT``."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(0.0, 10.0, (ROWS, 3))
    theta = np.where(np.arange(ROWS) < DRIFT, theta_before, theta_after)
    y = _noisy((X[:, 0] + X[:, 1] <= theta).astype(int), rng, 0.1)
    return Case("sea", f"sea theta {theta_before:g}->{theta_after:g}", seed, X / 5.0 - 1.0, y,
                ("x1", "x2", "x3"), frozenset(), frozenset(), frozenset({"x1", "x2"}), "real")


def _hyperplane(rng: np.random.Generator, w_before: np.ndarray, w_after: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray]:
    X = rng.uniform(-1.0, 1.0, (ROWS, w_before.shape[0]))
    score = np.where(np.arange(ROWS)[:, None] < DRIFT, w_before, w_after)
    y = _noisy(((X * score).sum(1) > 0).astype(int), rng, 0.05)
    return X, y


HYPER_D = 10
HYPER_NAMES = tuple(f"x{j}" for j in range(HYPER_D))


def hyperplane_case(seed: int) -> Case:
    """d = 10: two of four active weights go to 0, two zero weights become active."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(HYPER_D)
    kept, lost, gained = order[:2], order[2:4], order[4:6]
    w_b, w_a = np.zeros(HYPER_D), np.zeros(HYPER_D)
    w_b[np.r_[kept, lost]] = rng.uniform(0.5, 1.5, 4)
    w_a[kept] = w_b[kept]
    w_a[gained] = rng.uniform(0.5, 1.5, 2)
    X, y = _hyperplane(rng, w_b, w_a)
    return Case("hyperplane", "hyperplane 2 lost, 2 gained", seed, X, y, HYPER_NAMES,
                _named(gained), _named(lost), _named(kept), "real")


def _named(columns: Iterable[int]) -> frozenset[str]:
    return frozenset(HYPER_NAMES[j] for j in columns)


def hyperplane_still_case(seed: int, shift: float) -> Case:
    """The hyperplane concept unchanged; an inactive feature's mean moves by ``shift``
    (0: the drift-free control)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(HYPER_D)
    w = np.zeros(HYPER_D)
    w[order[:4]] = rng.uniform(0.5, 1.5, 4)
    X, y = _hyperplane(rng, w, w)
    X[DRIFT:, order[-1]] += shift
    if shift == 0.0:
        return Case("control", "hyperplane, no change", seed, X, y, HYPER_NAMES, frozenset(),
                    frozenset(), frozenset(), "none")
    return Case("virtual", f"hyperplane, inactive x{order[-1]} +{shift:g}", seed, X, y,
                HYPER_NAMES, frozenset(), frozenset(), frozenset(), "virtual",
                frozenset({HYPER_NAMES[order[-1]]}))


def spread_case(seed: int) -> Case:
    """The hyperplane concept unchanged; an inactive feature's spread changes with its mean
    kept: U(-1, 1) -> +-U(0.8, 1) (a test of the means sees nothing)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(HYPER_D)
    w = np.zeros(HYPER_D)
    w[order[:4]] = rng.uniform(0.5, 1.5, 4)
    X, y = _hyperplane(rng, w, w)
    j = order[-1]
    n = ROWS - DRIFT
    X[DRIFT:, j] = rng.choice([-1.0, 1.0], n) * rng.uniform(0.8, 1.0, n)
    return Case("virtual", f"hyperplane, inactive x{j} spread only", seed, X, y, HYPER_NAMES,
                frozenset(), frozenset(), frozenset(), "virtual", frozenset({HYPER_NAMES[j]}))


def relevant_virtual_case(seed: int) -> Case:
    """The hyperplane concept unchanged; an *active* feature's inputs move to U(0, 1) (P(y|x)
    fixed, so its permutation importance may move with the data: still a virtual drift)."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(HYPER_D)
    w = np.zeros(HYPER_D)
    w[order[:4]] = rng.uniform(0.5, 1.5, 4)
    j = order[0]
    X = rng.uniform(-1.0, 1.0, (ROWS, HYPER_D))
    X[DRIFT:, j] = rng.uniform(0.0, 1.0, ROWS - DRIFT)
    y = _noisy(((X * w).sum(1) > 0).astype(int), rng, 0.05)
    return Case("virtual", f"hyperplane, active x{j} to [0, 1]", seed, X, y, HYPER_NAMES,
                frozenset(), frozenset(), frozenset(), "virtual", frozenset({HYPER_NAMES[j]}))


def agrawal_age_case(seed: int) -> Case:
    """Agrawal f0 (relevant: age) with age drawn from 20..49 after the row (P(y|x) fixed)."""
    rng = np.random.default_rng(seed)
    X = agrawal_inputs(rng, ROWS)
    X[DRIFT:, 2] = rng.integers(20, 50, ROWS - DRIFT).astype(float)
    y = agrawal_label(0, X)
    return Case("virtual", "agrawal f0, age 20..49", seed, _agrawal_scaled(X), y, AGRAWAL,
                frozenset(), frozenset(), frozenset(), "virtual", frozenset({"age"}))


ELEC = ("day", "period", "nswprice", "nswdemand", "vicprice", "vicdemand", "transfer")


def electricity_case(change: str, seed: int) -> Case:
    """Real data with an injected change: the electricity rows shuffled (a stationary stream
    from the data's own P(x, y)), then at the row ``none``: nothing; ``virtual``: only rows
    with nswdemand above its median (a selection on x: P(y|x) kept); ``real``: the labels
    flipped where period > 0.5 (the same inputs labelled otherwise)."""
    data = np.loadtxt(data_path("electricity.csv"), delimiter=",", skiprows=1)
    X, y = data[:, 1:8], data[:, 8].astype(int)
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(y))
    X, y = X[order], y[order]
    pool = np.arange(len(y))
    if change == "virtual":
        high = pool[X[:, 3] > np.median(X[:, 3])]
        take = np.concatenate([pool[:DRIFT], rng.choice(high, ROWS - DRIFT)])
    else:
        take = pool[:ROWS]
    X, y = X[take] * 2.0 - 1.0, y[take].copy()
    if change == "real":
        flip = (np.arange(ROWS) >= DRIFT) & (X[:, 1] > 0.0)
        y[flip] = 1 - y[flip]
    kind = {"none": "none", "virtual": "virtual", "real": "real"}[change]
    family = "control" if change == "none" else change
    return Case(family, f"electricity shuffled, {change}", seed, X, y, ELEC, frozenset(),
                frozenset(), frozenset(ELEC) if change == "real" else frozenset(), kind,
                frozenset({"nswdemand"}) if change == "virtual" else frozenset())


def boundary_case(seed: int, c: float = 1.0) -> Case:
    """y = 1[x0 + x1 > 0], x ~ N(0, I_4); at ``DRIFT`` x0 += c and x1 -= c (along the
    boundary: P(y | x) and the permutation importances unchanged)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(ROWS, 4))
    X[DRIFT:, 0] += c
    X[DRIFT:, 1] -= c
    y = _noisy((X[:, 0] + X[:, 1] > 0).astype(int), rng, 0.05)
    return Case("virtual", f"boundary x0+{c:g}, x1-{c:g}", seed, X / 2.0, y,
                ("x0", "x1", "x2", "x3"), frozenset(), frozenset(), frozenset(), "virtual",
                frozenset({"x0", "x1"}))


def mixed_cases(seed: int) -> list[Case]:
    """Real drifts with moved inputs (P(y|x) and P(x) both change at ``DRIFT``): SEA theta
    8 -> 9.5 with the irrelevant x3 drawn from U(5, 10) after; Agrawal f6 -> f8 with ``car``
    moved by +10; the hyperplane drift of :func:`hyperplane_case` with one feature inactive on
    both sides moved by +1. Truth: kind ``real`` (the reliance truth of the drift alone) and
    the moved input named."""
    sea = sea_case(8.0, 9.5, seed)
    X = sea.X.copy()
    X[DRIFT:, 2] = np.random.default_rng(1_000 + seed).uniform(5.0, 10.0, ROWS - DRIFT) / 5.0 - 1.0
    out = [Case("mixed", "sea theta 8->9.5, x3 to [5, 10]", seed, X, sea.y, sea.features,
                sea.gained, sea.lost, sea.both, "real", frozenset({"x3"}))]
    rng = np.random.default_rng(seed)
    raw = agrawal_inputs(rng, ROWS)
    raw[DRIFT:, 4] += 10.0
    y = np.concatenate([agrawal_label(6, raw[:DRIFT]), agrawal_label(8, raw[DRIFT:])])
    gained, lost, both = switch_truth(RELEVANT[6], RELEVANT[8])
    out.append(Case("mixed", "agrawal f6->f8, car +10", seed, _agrawal_scaled(raw), y, AGRAWAL,
                    gained, lost, both, "real", frozenset({"car"})))
    hyper = hyperplane_case(seed)
    idle = min(set(HYPER_NAMES) - hyper.gained - hyper.lost - hyper.both)
    X = hyper.X.copy()
    X[DRIFT:, HYPER_NAMES.index(idle)] += 1.0
    out.append(Case("mixed", f"hyperplane 2 lost, 2 gained, inactive {idle} +1", seed, X,
                    hyper.y, HYPER_NAMES, hyper.gained, hyper.lost, hyper.both, "real",
                    frozenset({idle})))
    return out


def sea_still_case(seed: int) -> Case:
    """A SEA stream whose threshold stays 8 (a control)."""
    case = sea_case(8.0, 8.0, seed)
    return Case("control", "sea theta 8, no change", seed, case.X, case.y, case.features,
                frozenset(), frozenset(), frozenset(), "none")


def cases(quick: bool) -> list[Case]:
    """The cases of the full run (83) or of ``--quick`` (10)."""
    if quick:
        return [agrawal_case(0, 6, 0), agrawal_case(8, 2, 0), sea_case(8.0, 9.5, 0),
                hyperplane_case(0), hyperplane_still_case(0, 1.0), boundary_case(0),
                spread_case(0), relevant_virtual_case(0), hyperplane_still_case(1, 0.0),
                agrawal_case(6, 6, 0)]
    out: list[Case] = []
    for seed in range(3):
        for before, after in AGRAWAL_SWITCHES:
            out.append(agrawal_case(before, after, seed))
    for seed in range(3):
        out += [sea_case(8.0, 9.5, seed), sea_case(9.0, 7.0, seed)]
    out += [hyperplane_case(seed) for seed in range(5)]
    for seed in range(3):
        out += [hyperplane_still_case(seed, 1.0), agrawal_virtual_case(seed), boundary_case(seed)]
    for seed in range(3):
        out += [spread_case(seed), relevant_virtual_case(seed), agrawal_age_case(seed)]
    for seed in range(3):
        out += mixed_cases(seed)
    for seed in range(3):
        out += [hyperplane_still_case(seed, 0.0), agrawal_case(2, 2, seed),
                agrawal_case(6, 6, seed), sea_still_case(seed)]
    if not data_path("electricity.csv").exists():
        print(f"left out: the 9 electricity cases (no {data_path('electricity.csv')}; "
              "$TORCHSTREAM_DATA or ../shared/data)")
        return out
    for seed in range(3):
        out += [electricity_case(change, seed) for change in ("none", "virtual", "real")]
    return out


# ----------------------------------------------------------------------------- running
@dataclass
class Outcome:
    """What each method said about one case."""

    case: Case
    report: Report
    erics_changed: frozenset[str]
    adapted: int
    reporter_seconds: float
    build_seconds: float


class Correct(PluginBase):
    """Records whether each row's prediction (made before the learner saw the row) was
    right."""

    name = "correct"

    def __init__(self) -> None:
        self.batches: list[np.ndarray] = []

    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None:
        hit = batch.y_pred.detach().to("cpu").argmax(1) == batch.y.detach().to("cpu").long()
        self.batches.append(hit.numpy())
        return None


def adaptation_rows(correct: np.ndarray, drift: int, span: int = 1_000, tol: float = 0.02
                    ) -> int:
    """Rows after ``drift`` until the accuracy over the next ``span`` rows first comes within
    ``tol`` of the accuracy over the last ``span`` rows of the stream (the learner's time to
    adapt)."""
    target = float(correct[-span:].mean()) - tol
    sums = np.concatenate([[0.0], np.cumsum(correct[drift:], dtype=float)])
    ahead = (sums[span:] - sums[:-span]) / span
    hits = np.flatnonzero(ahead >= target)
    return int(hits[0]) if hits.size else len(correct) - drift


def erics_changed(partial_alerts: Iterable[tuple[int, int | str]], names: Sequence[str],
                  batch: int, first: int, last: int) -> frozenset[str]:
    """Features with an ERICS partial alert whose batch (step ``t`` holds rows
    ``[t * batch, (t + 1) * batch)``) ends in ``(first, last]``."""
    out = set()
    for step, k in partial_alerts:
        end = (int(step) + 1) * batch
        if first < end <= last:
            out.add(names[k] if isinstance(k, int) else str(k))
    return frozenset(out)


class TimedReporter(DriftReporter):
    """A :class:`DriftReporter` that adds up the wall time of its ``on_batch`` and
    ``on_record`` calls (:attr:`seconds`) and of the steps that built a report
    (:attr:`build_seconds`: recording that batch included)."""

    def __init__(self, explainers: Sequence[IncrementalPFI], *, window: int,
                 at: Sequence[int], level: float, settle: int, min_effect: float) -> None:
        super().__init__(explainers, detectors=(), window=window, at=at, level=level,
                         settle=settle, min_effect=min_effect)
        self.seconds = 0.0
        self.build_seconds = 0.0
        self._recorded = 0.0

    def on_batch(self, batch: BatchView) -> Mapping[str, float] | None:
        t0 = time.perf_counter()
        out = super().on_batch(batch)
        self._recorded = time.perf_counter() - t0
        return out

    def on_record(self, record: StepRecord) -> None:
        n = len(self.reports)
        t0 = time.perf_counter()
        super().on_record(record)
        spent = self._recorded + time.perf_counter() - t0
        self.seconds += spent
        if len(self.reports) > n:
            self.build_seconds += spent


def run_case(case: Case) -> Outcome:
    """Run the learner, iPFI, ERICS and the reporter over the case's stream."""
    torch.manual_seed(case.seed)
    d = len(case.features)
    stream = from_numpy(case.X, case.y, task="classification",
                        feature_names=list(case.features))
    learner = OnlineClassifier(lambda n, k: MLP(n, k, hidden=(32,)), lr=0.01, seed=case.seed)
    ipfi = IncrementalPFI(None, "zero_one", d, alpha=ALPHA, feature_names=list(case.features),
                          seed=case.seed)
    erics = ERICS(ProbitHead(d, epochs=10))
    reporter = TimedReporter([ipfi], window=WINDOW, at=[DRIFT], level=LEVEL,
                             settle=SETTLE, min_effect=MIN_EFFECT)
    correct = Correct()
    Prequential(learner, stream, batch_size=BATCH, plugins=[ipfi, erics, correct, reporter]).run()
    (report,) = reporter.reports
    changed = erics_changed(erics.column_partial_alerts, case.features, BATCH, DRIFT,
                            DRIFT + SETTLE + WINDOW)
    adapted = adaptation_rows(np.concatenate(correct.batches), DRIFT)
    return Outcome(case, report, changed, adapted, reporter.seconds, reporter.build_seconds)


# ----------------------------------------------------------------------------- scoring
@dataclass
class Counts:
    """Correct, wrong and missed verdicts."""

    tp: int = 0
    fp: int = 0
    fn: int = 0

    def add(self, other: Counts) -> None:
        self.tp += other.tp
        self.fp += other.fp
        self.fn += other.fn

    @property
    def precision(self) -> float:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else math.nan

    @property
    def recall(self) -> float:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else math.nan


def score_directed(gained: Iterable[str], lost: Iterable[str], case: Case) -> Counts:
    """Verdicts with a direction against the truth (features relevant on both sides left
    out): a verdict is correct only with the truth's direction."""
    said = {f: "gained" for f in gained} | {f: "lost" for f in lost}
    truth = {f: "gained" for f in case.gained} | {f: "lost" for f in case.lost}
    tp = sum(1 for f, v in said.items() if f not in case.both and truth.get(f) == v)
    fp = sum(1 for f, v in said.items() if f not in case.both and truth.get(f) != v)
    return Counts(tp, fp, len(truth) - tp)


def score_changed(changed: Iterable[str], case: Case) -> Counts:
    """A changed set (no direction) against gained + lost (both-sides features left out)."""
    said = set(changed) - case.both
    truth = set(case.gained | case.lost)
    return Counts(len(said & truth), len(said - truth), len(truth - said))


def report_verdicts(report: Report) -> tuple[frozenset[str], frozenset[str]]:
    """The report's ``gained`` and ``lost`` features."""
    changes = report["changes"]
    return (frozenset(c["feature"] for c in changes if c["verdict"] == "gained"),
            frozenset(c["feature"] for c in changes if c["verdict"] == "lost"))


def raw_verdicts(before: Mapping[str, float], after: Mapping[str, float],
                 fraction: float = RAW_FRACTION) -> tuple[frozenset[str], frozenset[str]]:
    """The untested rule: gained (lost) when after - before exceeds (falls below minus)
    ``fraction`` of the largest before-window importance."""
    cut = fraction * max(before.values())
    return (frozenset(f for f in before if after[f] - before[f] > cut),
            frozenset(f for f in before if before[f] - after[f] > cut))


def raw_from_report(report: Report) -> tuple[frozenset[str], frozenset[str]]:
    before = {c["feature"]: c["importance_before"] for c in report["changes"]}
    after = {c["feature"]: c["importance_after"] for c in report["changes"]}
    return raw_verdicts(before, after)


def summarize(outcomes: Sequence[Outcome]) -> dict[str, dict[str, float]]:
    """Per method: precision / recall over the real drifts, the virtual drifts' share
    reported real and recognised virtual, the controls' false reports."""
    methods: dict[str, dict[str, float]] = {}
    real = [o for o in outcomes if o.case.kind == "real"]
    virtual = [o for o in outcomes if o.case.kind == "virtual"]
    control = [o for o in outcomes if o.case.kind == "none"]

    def said(o: Outcome, method: str) -> tuple[frozenset[str], frozenset[str]]:
        if method == "reporter":
            return report_verdicts(o.report)
        if method == "raw iPFI":
            return raw_from_report(o.report)
        return o.erics_changed, frozenset()

    for method in ("reporter", "ERICS partial", "raw iPFI"):
        counts = Counts()
        for o in real:
            g, lo = said(o, method)
            counts.add(score_changed(g, o.case) if method == "ERICS partial"
                       else score_directed(g, lo, o.case))
        flagged = [bool(said(o, method)[0] | said(o, method)[1]) for o in real]
        as_real = [bool(said(o, method)[0] | said(o, method)[1]) for o in virtual]
        false = [bool(said(o, method)[0] | said(o, method)[1]) for o in control]
        row = {"precision": counts.precision, "recall": counts.recall,
               "tp": counts.tp, "fp": counts.fp, "fn": counts.fn,
               "real_as_real": _share(flagged),
               "virtual_as_real": _share(as_real), "virtual_recognised": math.nan,
               "shifted_named": math.nan, "control_false": _share(false)}
        if method == "reporter":
            row["real_as_real"] = _share([o.report["kind"] == "real" for o in real])
            row["virtual_as_real"] = _share([o.report["kind"] == "real" for o in virtual])
            row["virtual_recognised"] = _share([o.report["kind"] == "virtual" for o in virtual])
            row["shifted_named"] = _share([bool(o.case.shifted & moved_inputs(o.report))
                                           for o in outcomes if o.case.shifted])
            # a control is a false report when it is called a drift (real or virtual); a
            # "learning" or "warm-up" report says the model changed, not the data
            row["control_false"] = _share([o.report["kind"] in ("real", "virtual")
                                           for o in control])
        methods[method] = row
    return methods


def moved_inputs(report: Report) -> frozenset[str]:
    """The features whose input distribution the report flags."""
    return frozenset(c["feature"] for c in report["changes"] if c["input_moved"])


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags) if flags else math.nan


# ----------------------------------------------------------------------------- output
def _names(features: Iterable[str]) -> str:
    return ",".join(sorted(features)) or "-"


def case_table(outcomes: Sequence[Outcome]) -> str:
    lines = ["| case | seed | truth | reporter (kind: +gained -lost; inputs moved) | "
             "ERICS changed | raw iPFI | accuracy before/after |",
             "|---|---|---|---|---|---|---|"]
    for o in outcomes:
        c = o.case
        truth = f"{c.kind}: +{_names(c.gained)} -{_names(c.lost)}"
        g, lo = report_verdicts(o.report)
        rg, rl = raw_from_report(o.report)
        lines.append(
            f"| {c.name} | {c.seed} | {truth} | {o.report['kind']}: +{_names(g)} -{_names(lo)}; "
            f"{_names(moved_inputs(o.report))} "
            f"| {_names(o.erics_changed)} | +{_names(rg)} -{_names(rl)} | "
            f"{o.report['metric_before']:.2f}/{o.report['metric_after']:.2f} |")
    return "\n".join(lines)


def summary_table(summary: Mapping[str, Mapping[str, float]], outcomes: Sequence[Outcome]
                  ) -> str:
    n_real = sum(o.case.kind == "real" for o in outcomes)
    n_virtual = sum(o.case.kind == "virtual" for o in outcomes)
    n_control = sum(o.case.kind == "none" for o in outcomes)
    lines = [f"| method | precision ({n_real} real drifts) | recall | real reported real | "
             f"virtual reported real "
             f"({n_virtual}) | virtual recognised | shifted input named | "
             f"control false reports ({n_control}) |",
             "|---|---|---|---|---|---|---|---|"]
    for method, r in summary.items():
        lines.append(
            f"| {method} | {r['precision']:.3f} ({r['tp']}/{r['tp'] + r['fp']}) | "
            f"{r['recall']:.3f} ({r['tp']}/{r['tp'] + r['fn']}) | {_pct(r['real_as_real'])} | "
            f"{_pct(r['virtual_as_real'])} "
            f"| {_pct(r['virtual_recognised'])} | {_pct(r['shifted_named'])} "
            f"| {_pct(r['control_false'])} |")
    return "\n".join(lines)


KINDS = ("real", "virtual", "learning", "none", "warm-up")


def family_table(outcomes: Sequence[Outcome]) -> str:
    """Per family of cases (in the order they ran): how many the report called each kind, and
    how many of those with a moved input it named it for."""
    families: dict[str, list[Outcome]] = {}
    for o in outcomes:
        families.setdefault(o.case.family, []).append(o)
    lines = ["| family | truth | cases | " + " | ".join(KINDS) + " | shifted input named |",
             "|---|---|---|" + "---|" * len(KINDS) + "---|"]
    for family, group in families.items():
        truth = "/".join(sorted({o.case.kind for o in group}))
        counts = [str(sum(o.report["kind"] == k for o in group)) for k in KINDS]
        shifted = [o for o in group if o.case.shifted]
        named = (f"{sum(bool(o.case.shifted & moved_inputs(o.report)) for o in shifted)}"
                 f"/{len(shifted)}" if shifted else "-")
        lines.append(f"| {family} | {truth} | {len(group)} | " + " | ".join(counts)
                     + f" | {named} |")
    return "\n".join(lines)


def _pct(v: float) -> str:
    return "n/a" if math.isnan(v) else f"{100 * v:.0f} %"


def windows(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the report's before and after windows of a case."""
    return case.X[DRIFT - WINDOW:DRIFT], case.X[DRIFT + SETTLE:DRIFT + SETTLE + WINDOW]


def run_peers(python: str, outcomes: Sequence[Outcome]) -> list[dict[str, dict[str, object]]]:
    """Evidently and NannyML on every case's two windows, in the interpreter ``python`` (an
    environment with both installed): ``scripts/drift_peers.py``."""
    arrays: dict[str, np.ndarray] = {"n": np.array(len(outcomes))}
    for i, o in enumerate(outcomes):
        arrays[f"before_{i}"], arrays[f"after_{i}"] = windows(o.case)
        arrays[f"features_{i}"] = np.array(o.case.features)
    with tempfile.TemporaryDirectory() as tmp:
        cases, out = Path(tmp) / "cases.npz", Path(tmp) / "peers.json"
        np.savez(cases, **arrays)
        subprocess.run([python, str(Path(__file__).with_name("drift_peers.py")), str(cases),
                        str(out)], check=True)
        return json.loads(out.read_text())


def peer_table(outcomes: Sequence[Outcome], peers: Sequence[Mapping[str, Mapping[str, object]]]
               ) -> str:
    """Per tool: the share of each truth group it flags (any drifted column; Evidently's
    dataset drift too), and the share of virtual drifts whose shifted input it names; the
    report's own row beside them (a change reported: kind real or virtual)."""
    groups = {k: [i for i, o in enumerate(outcomes) if o.case.kind == k]
              for k in ("real", "virtual", "none")}
    shifted = [i for i, o in enumerate(outcomes) if o.case.shifted]  # virtual and mixed

    def row(name: str, flagged: Sequence[bool], named: Sequence[bool]) -> str:
        cells = [f"{sum(flagged[i] for i in g)}/{len(g)}" for g in groups.values()]
        return f"| {name} | {' | '.join(cells)} | {sum(named[i] for i in shifted)}/{len(shifted)} |"

    lines = ["| tool | real drifts flagged | virtual drifts flagged | controls flagged | "
             "virtual and mixed: shifted input named |", "|---|---|---|---|---|"]
    reported = [o.report["kind"] in ("real", "virtual") for o in outcomes]
    named = [bool(o.case.shifted & moved_inputs(o.report)) for o in outcomes]
    lines.append(row("torchstream report (real or virtual)", reported, named))
    for tool, label in (("evidently", "Evidently, any column"),
                        ("nannyml", "NannyML univariate, any column")):
        drifted = [set(map(str, p[tool]["drifted"])) for p in peers]  # type: ignore[call-overload]
        lines.append(row(label, [bool(d) for d in drifted],
                         [bool(set(o.case.shifted) & d) for o, d in zip(outcomes, drifted)]))
    dataset = [bool(p["evidently"]["dataset_drift"]) for p in peers]
    lines.append(row("Evidently, dataset drift (>= 50 % of columns)", dataset,
                     [False] * len(outcomes)))
    return "\n".join(lines)


def main() -> None:
    global SETTLE, ROWS, MIN_EFFECT  # one setting for every case, chosen on the command line
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="7 cases (under a minute)")
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON")
    parser.add_argument("--only", metavar="TEXT", action="append",
                        help="run only the cases whose 'name (seed N)' contains TEXT "
                             "(repeatable: any of them)")
    parser.add_argument("--settle", type=int, default=SETTLE,
                        help=f"rows before the after window (default {SETTLE:,})")
    parser.add_argument("--min-effect", type=float, default=MIN_EFFECT,
                        help=f"the reporter's effect floor (default {MIN_EFFECT})")
    parser.add_argument("--peers", metavar="PYTHON",
                        help="also run Evidently and NannyML on the same windows, with this "
                             "interpreter (an environment with evidently and nannyml)")
    args = parser.parse_args()
    SETTLE, MIN_EFFECT = args.settle, args.min_effect
    ROWS = DRIFT + SETTLE + WINDOW
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    outcomes = []
    chosen = [c for c in cases(args.quick)
              if not args.only or any(t in f"{c.name} (seed {c.seed})" for t in args.only)]
    if not chosen:
        parser.error(f"no case matches --only {args.only}")
    for case in chosen:
        outcomes.append(run_case(case))
        o = outcomes[-1]
        print(f"{case.name} (seed {case.seed}): {o.report['summary']}", flush=True)
    summary = summarize(outcomes)
    print()
    print(case_table(outcomes))
    print()
    print(summary_table(summary, outcomes))
    print()
    print(family_table(outcomes))
    peers = run_peers(args.peers, outcomes) if args.peers else None
    if peers is not None:
        print()
        print(peer_table(outcomes, peers))
    spent = [o.reporter_seconds for o in outcomes]
    built = [o.build_seconds for o in outcomes]
    batches = ROWS // BATCH
    print(f"\nreporter cost per report: {1e3 * float(np.mean(spent)):.0f} ms "
          f"(on_batch and on_record over {batches} batches: {1e6 * float(np.mean(spent)) / batches:.0f} us "
          f"a batch; the batch that built the report: {1e3 * float(np.mean(built)):.1f} ms)")
    adapted = [o.adapted for o in outcomes if o.case.kind == "real"]
    print(f"rows for the learner to adapt after a real drift (accuracy over the next 1,000 "
          f"rows within 0.02 of the stream's last 1,000): median {float(np.median(adapted)):.0f}"
          f", 90th percentile {float(np.percentile(adapted, 90)):.0f}, max {max(adapted)}")
    print(f"settings: batch {BATCH}, drift row {DRIFT}, window {WINDOW}, settle {SETTLE}, "
          f"alpha {ALPHA}, level {LEVEL}, min_effect {MIN_EFFECT}; {len(outcomes)} cases in "
          f"{time.perf_counter() - t0:.0f} s")
    if args.json:
        data = {"settings": {"batch": BATCH, "drift": DRIFT, "window": WINDOW,
                             "settle": SETTLE, "alpha": ALPHA, "level": LEVEL,
                             "min_effect": MIN_EFFECT,
                             "raw_fraction": RAW_FRACTION},
                "summary": summary, "peers": peers,
                "cases": [{"family": o.case.family, "name": o.case.name, "seed": o.case.seed,
                           "truth": {"kind": o.case.kind, "gained": sorted(o.case.gained),
                                     "lost": sorted(o.case.lost), "both": sorted(o.case.both)},
                           "reporter": {"kind": o.report["kind"],
                                        "gained": sorted(report_verdicts(o.report)[0]),
                                        "lost": sorted(report_verdicts(o.report)[1])},
                           "erics_changed": sorted(o.erics_changed),
                           "raw": {"gained": sorted(raw_from_report(o.report)[0]),
                                   "lost": sorted(raw_from_report(o.report)[1])},
                           "adapted_rows": o.adapted,
                           "reporter_seconds": o.reporter_seconds,
                           "report": o.report} for o in outcomes]}
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(json_safe(data), fh, indent=2)


if __name__ == "__main__":
    main()
