"""FIRES and ERICS end to end on a Probit head (spec fires_erics §9, checks 7-9 and 17-19).

Stream G of the spec: x ~ N(0, I_J); 5 relevant features 0..4 with random sign and magnitude
U(0.5, 1.5); y = sign(x . w) (0 -> +1), flipped with probability ``noise``; batches of 100.
The generator replays the spec's prototype draw for draw (numpy ``default_rng(seed)``), so the
prototype's observations for a seed apply to the same seed here; with ``reference_compat`` ERICS
reproduced the prototype's alert lists exactly on the seeds run here (500 batches, seeds 0-2).

Run time: the spec's checks use 10-20 seeds; the slow ones run on fewer here (stated at each
check). Every check was observed to pass on all of the spec's seeds in the prototype, so a
threshold of "all of the seeds run" is at least as strict as the spec's ">= 9/10".
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from torchstream.drift import ERICS
from torchstream.models.distributional import ProbitHead
from torchstream.select import FIRES, StabilityTracker

B = 100


def stream(
    seed: int,
    T: int,
    J: int = 20,
    noise: float = 0.1,
    drift: int | None = None,
    kind: str = "flip",
    uniform: bool = False,
) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """Stream G; ``kind`` at batch ``drift``: "flip" (all relevant weights change sign),
    "flip_top" (only the largest |w_j|), "swap" (relevant set 0..4 -> 5..9), "shift" / "scale" (virtual drift:
    features 10..19 get +2 / x3)."""
    rng = np.random.default_rng(seed)
    w = np.zeros(J)
    w[:5] = rng.choice([-1, 1], 5) * rng.uniform(0.5, 1.5, 5)
    w2 = -w if kind == "flip" else w.copy()
    if kind == "swap":
        w2 = np.r_[np.zeros(5), w[:5], np.zeros(J - 10)]
    if kind == "flip_top":
        top = int(np.abs(w).argmax())
        w2[top] = -w[top]
    for t in range(T):
        after = drift is not None and t >= drift
        ww = w2 if after else w
        x = rng.uniform(0, 1, (B, J)) if uniform else rng.standard_normal((B, J))
        y = np.sign((x - 0.5) @ ww if uniform else x @ ww)
        y[y == 0] = 1
        y[rng.random(B) < noise] *= -1
        if after and kind == "shift":
            x[:, 10:20] += 2.0  # P(y|x) unchanged: the labels were drawn before
        if after and kind == "scale":
            x[:, 10:20] *= 3.0
        yield torch.from_numpy(x), torch.from_numpy(y)


def _top5(fires: FIRES) -> set[int]:
    return set(fires.selected.tolist())


# ---------------------------------------------------------------------- FIRES
@pytest.mark.parametrize("uniform", [False, True])
def test_check7_relevant_features_rank_on_top(uniform):
    # all 20 seeds of the spec (cheap: 5-10 batches each); spec threshold >= 19/20
    hits = 0
    for seed in range(20):
        fires = FIRES(ProbitHead(25), n_selected=5)
        for X, y in stream(seed, 10 if uniform else 5, J=25, noise=0.0, uniform=uniform):
            fires.learn(X - 0.5 if uniform else X, y)
        hits += _top5(fires) == {0, 1, 2, 3, 4}
    assert hits >= 19


def test_check8_stability_converges():
    # 5 of the spec's 10 seeds (run time); all must pass, as all 10 did in the prototype
    for seed in range(5):
        fires = FIRES(ProbitHead(25), n_selected=5, history=1)
        tracker = StabilityTracker(25, window=10)
        fss = []
        for X, y in stream(seed, 301, J=25, noise=0.1):
            fires.learn(X, y)
            fss.append(tracker.update(fires.selected))
        first_one = next(t for t, v in enumerate(fss) if v == 1.0)
        assert first_one <= 12, (seed, first_one)
        assert min(fss[50:301]) >= 0.9, seed
        assert all(math.isnan(v) for v in fss[:9])


def test_check9_adaptation_needs_a_high_learning_rate():
    # lr 1.0: 4 seeds (spec: >= 9/10, observed switch after 28-60 batches in 10/10)
    for seed in range(4):
        fires = FIRES(ProbitHead(25, lr_mu=1.0, lr_sigma=1.0), n_selected=5, history=1)
        switched = None
        for t, (X, y) in enumerate(stream(seed, 400, J=25, drift=300, kind="swap")):
            fires.learn(X, y)
            if t == 299:
                assert _top5(fires) == {0, 1, 2, 3, 4}
            if t >= 300 and switched is None and _top5(fires) == {5, 6, 7, 8, 9}:
                switched = t - 300
        assert switched is not None and switched < 100, (seed, switched)
    # default lr 0.01: pinned slow adaptation, no switch within 300 batches (2 seeds; 10/10 in
    # the prototype)
    for seed in range(2):
        fires = FIRES(ProbitHead(25), n_selected=5, history=1)
        for t, (X, y) in enumerate(stream(seed, 600, J=25, drift=300, kind="swap")):
            fires.learn(X, y)
            if t >= 300:
                assert _top5(fires) != {5, 6, 7, 8, 9}, (seed, t)


# ---------------------------------------------------------------------- ERICS
def _erics_pair(J: int = 20):
    """A reference-compatible ERICS training a Probit head (E = 10, lr 0.01) and an ERICS with
    the paper's semantics (no warm-up, no cool-down) reading the same head's snapshots."""
    head = ProbitHead(J, epochs=10)
    return ERICS(head, reference_compat=True), ERICS(head, warm_up=0, refractory=0)


def _count(alerts, lo, hi):
    return sum(lo <= t < hi for t in alerts)


def test_check17_abrupt_drift_is_detected():
    # 3 of the spec's 10 seeds, batches 0..319 only (the checked window ends at 320)
    stationary_counts = []
    for seed in range(3):
        for drift in (300, None):
            ref, paper = _erics_pair()
            for X, y in stream(seed, 320, drift=drift):
                ref.learn(X, y)
                paper.observe()
            if drift is None:
                stationary_counts.append(_count(ref.alert_steps, 300, 320))
                continue
            for e in (ref, paper):
                first = next(t for t in e.alert_steps if t >= 300)
                assert first - 300 <= 5, (seed, first)
            # the reference semantics alert at most every other step (None-reset of alpha); the
            # prototype's 10 alerts at 300, 302, ..., 318 (same seeds, same draws) exactly
            assert [t for t in ref.alert_steps if 300 <= t < 320] == list(range(300, 320, 2))
            assert _count(paper.alert_steps, 300, 320) >= 8
    # the prototype had 0 alerts in 8 of 10 seeds (3 and 6 in the others), mean 0.9
    assert sum(stationary_counts) / len(stationary_counts) <= 2


def test_check18_partial_attribution():
    """One relevant weight flips sign at batch 200: the partial test points at its feature.

    Deviation from the spec (a finding, not a loosened threshold): the spec flips w_0, whose
    magnitude is random in G. With |w_0| near 0.5 the flip hardly changes the labels, and the
    spec's own prototype then raises no partial alert for feature 0 and its MA falls (seeds 0,
    2, 4 of 0..5 here: |w_0| = 0.52, 0.59, 0.58). So the flipped weight here is the largest
    |w_j|. Prototype, seeds 0..7: that feature has the largest MA increase in 8/8 seeds, and
    8, 6, 7, 6, 9, 3, 2, 8 partial alerts in [200, 220); the irrelevant features 0.0-0.13 on
    average. The count is asserted (>= 5, as in the spec) for seeds 0..2 only (run time); the
    ranking against every other feature and the quiet irrelevant features for each seed.
    """
    for seed in range(3):
        ref, _ = _erics_pair()
        for t, (X, y) in enumerate(stream(seed, 221, drift=200, kind="flip_top")):
            ref.learn(X, y)
            if t == 199:
                before = ref.partial_ma
        rng = np.random.default_rng(seed)
        top = int(np.abs(rng.choice([-1, 1], 5) * rng.uniform(0.5, 1.5, 5)).argmax())
        increase = ref.partial_ma - before
        assert int(increase.argmax()) == top, (seed, top, increase)
        counts = torch.zeros(20)
        for t, k in ref.partial_alerts:
            if 200 <= t < 220:
                counts[k] += 1
        assert counts[top] >= 5, (seed, counts)
        assert counts[top] > counts[torch.arange(20) != top].max(), (seed, counts)
        assert counts[5:].mean() <= 1, (seed, counts)


@pytest.mark.parametrize("kind", ["shift", "scale"])
def test_check19_virtual_drift_is_quiet(kind):
    # 2 of the spec's 6 seeds per kind; the prototype had 0 alerts in all 6
    for seed in range(2):
        ref, paper = _erics_pair()
        for X, y in stream(seed, 230, drift=200, kind=kind):
            ref.learn(X, y)
            paper.observe()
        assert _count(ref.alert_steps, 200, 230) <= 1, (seed, ref.alert_steps)
        assert _count(paper.alert_steps, 200, 230) <= 1, (seed, paper.alert_steps)


def test_erics_as_runner_plugin():
    from torchstream.evaluate import Prequential
    from torchstream.sinks import History
    from torchstream.streams import from_numpy

    class Constant:  # the runner's learner; ERICS trains its own head
        task, device, dtype = "classification", torch.device("cpu"), torch.float64

        def __init__(self):
            self.classes_ = []

        def __call__(self, X):
            return torch.full((X.shape[0], 2), 0.5, dtype=torch.float64)

        def learn(self, X, y):
            return torch.tensor(0.0)

        def _add_class(self, c):
            self.classes_.append(c)

    batches = list(stream(1, 60, J=6, drift=30))
    X = torch.cat([b[0] for b in batches])
    y = (torch.cat([b[1] for b in batches]) > 0).long()
    kw = {"window_mvg_average": 10, "window_drift_detect": 10, "refractory": 10}
    erics = ERICS(ProbitHead(6, epochs=10), **kw)
    twin = ERICS(ProbitHead(6, epochs=10), **kw)
    history = History()
    Prequential(
        Constant(),
        from_numpy(X, y, task="classification"),
        batch_size=B,
        plugins=[erics],
        sinks=[history],
    ).run()
    for t in range(60):
        twin.learn(X[t * B : (t + 1) * B], y[t * B : (t + 1) * B])
    assert erics.alert_steps == twin.alert_steps and any(30 <= t < 35 for t in erics.alert_steps)
    assert history.values("erics/ma") == pytest.approx(list(twin.ma_trace), abs=0)
    counts = list(zip(history.steps("alarms/erics"), history.values("alarms/erics")))
    rises = [s for (s, v), (_, before) in zip(counts[1:], counts) if v > before]
    # the count of alarms steps up at each alert's row
    assert rises == [(t + 1) * B - 1 for t in erics.alert_steps] == erics.alerts
