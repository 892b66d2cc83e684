"""ERICS defaults: no start-up alert storm (warm-up of M + W steps, cool-down of W steps), while
``reference_compat=True`` keeps the published behaviour exactly."""

from __future__ import annotations

from collections import deque

import numpy as np
import pytest
import torch

from torchstream.drift import ERICS
from torchstream.models.distributional import ProbitHead
from torchstream.streams.synthetic import Agrawal, ConceptDrift

F64 = torch.float64
B = 100


def _agrawal(seed: int, n_batches: int = 200, drift: int = 120):
    """Agrawal function 0 -> 1 at batch ``drift`` (10% perturbation), min-max scaled."""
    a = Agrawal(0, seed=2 * seed, n_samples=None, perturbation=0.1)
    b = Agrawal(1, seed=2 * seed + 1, n_samples=None, perturbation=0.1)
    stream = ConceptDrift(a, b, position=drift * B, width=B, seed=seed)
    parts = list(stream.take(n_batches * B).batches(B, dtype=F64))
    X, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
    lo, hi = X.min(0).values, X.max(0).values
    return (X - lo) / torch.where(hi > lo, hi - lo, torch.ones_like(hi)), y


def _walk(T: int = 400, K: int = 5, seed: int = 0):
    """Random snapshots with a jump of every mean at step 250."""
    g = torch.Generator().manual_seed(seed)
    mu, out = torch.zeros(K, dtype=F64), []
    for t in range(T):
        mu = mu + 0.01 * torch.randn(K, generator=g, dtype=F64) + (0.5 if t == 250 else 0.0)
        out.append((mu.clone(), 1.0 + 0.1 * torch.rand(K, generator=g, dtype=F64)))
    return out


def test_defaults_follow_the_windows():
    e = ERICS()
    assert (e.warm_up, e.refractory) == (100, 50)  # M + W, W at M = W = 50
    e = ERICS(window_mvg_average=20, window_drift_detect=10)
    assert (e.warm_up, e.refractory) == (30, 10)
    assert (ERICS(warm_up=7, refractory=3).warm_up, ERICS(refractory=3).refractory) == (7, 3)
    ref = ERICS(reference_compat=True)
    assert (ref.warm_up, ref.refractory) == (0, 0)
    ref = ERICS(reference_compat=True, warm_up=5, refractory=2)
    assert (ref.warm_up, ref.refractory) == (5, 2)
    assert "warm_up=100, refractory=50" in repr(ERICS())


def _reference_alerts(snaps, M: int, W: int, beta: float) -> list[int]:
    """The reference rules written out step by step (global test only): a window of the last M
    snapshots starting with (0, 1), so M - 1 pairs over 2M; D against the oldest of the last W
    MA values; the threshold unset after an alert and set to |D| at the next step; no clamp."""
    K = snaps[0][0].shape[0]
    window = deque([(np.zeros(K), np.ones(K))], maxlen=M)
    mas: deque[float] = deque(maxlen=W)
    alpha, delta, alerts = None, 0, []
    for t, (mu, sigma) in enumerate(snaps):
        window.append((mu.numpy(), sigma.numpy()))
        if alpha is not None:
            alpha -= alpha * beta * delta
        delta += 1
        pairs = list(zip(list(window)[:-1], list(window)[1:]))
        ma = sum(abs(((s1**2 + (m0 - m1) ** 2) / s0**2 - 1).sum()) for (m0, s0), (m1, s1) in pairs)
        mas.append(ma / (2 * M))
        d = mas[-1] - mas[0] if len(mas) > 1 else mas[-1]
        if alpha is None:
            alpha = abs(d)
        if d > alpha:
            alerts.append(t)
            alpha, delta = None, 0
    return alerts


@pytest.mark.parametrize("beta", [1e-4, 1e-2])
def test_reference_compat_is_unchanged_by_the_defaults(beta):
    snaps = _walk()
    e = ERICS(window_mvg_average=20, window_drift_detect=10, beta=beta, reference_compat=True)
    explicit = ERICS(
        window_mvg_average=20, window_drift_detect=10, beta=beta, reference_compat=True,
        warm_up=0, refractory=0,
    )
    for m, s in snaps:
        e.observe(m, s)
        explicit.observe(m, s)
    assert e.alert_steps == explicit.alert_steps and e.partial_alerts == explicit.partial_alerts
    assert list(e.threshold_trace) == list(explicit.threshold_trace)
    assert e.alert_steps == _reference_alerts(snaps, 20, 10, beta)
    # alerts in the first M + W steps are reported in reference mode
    assert any(t < 30 for t in e.alert_steps)
    assert all(b - a >= 2 for a, b in zip(e.alert_steps, e.alert_steps[1:]))  # at most every second step


def test_one_report_per_jump_and_warm_up_follows_the_threshold():
    """mu_0 jumps 0 -> 1 at step 30 (inside the warm-up) and mu_1 by as much at 200."""
    e, raw = ERICS(), ERICS(warm_up=0, refractory=0)
    for t in range(300):
        mu = torch.zeros(3, dtype=F64)
        mu[0] = 1.0 if t >= 30 else 0.0
        mu[1] = 1.0 if t >= 200 else 0.0
        for det in (e, raw):
            det.observe(mu, torch.ones(3, dtype=F64))
    # without warm-up and cool-down: an alert at every step while a jump is in the W window
    assert raw.alert_steps == list(range(30, 80)) + list(range(200, 250))
    assert e.alert_steps == [200] and e.partial_alerts == [(200, 1)]
    # the threshold followed the masked alerts: at step 100 it is D's plateau 1/(2M) = 0.01 of
    # the last masked alert (step 79) decayed at steps 80..100 (factors 1 - beta * n, n = 1..21)
    assert e.threshold_trace[100] == pytest.approx(
        0.01 * np.prod(1 - 1e-4 * np.arange(1, 22)), rel=1e-12
    )


def test_no_start_up_storm_on_a_probit_head():
    """Agrawal 0 -> 1 at batch 120 with a Probit head (E = 10). Seeds 0..9: without warm-up and
    cool-down 52-57 alerts in batches 0..59, the reference code 26-28; with the defaults exactly
    one alert per stream, at batch 126-136 (2 seeds here: run time)."""
    for seed in range(2):
        X, y = _agrawal(seed)
        head = ProbitHead(X.shape[1], epochs=10)
        e, raw = ERICS(head), ERICS(head, warm_up=0, refractory=0)
        ref = ERICS(head, reference_compat=True)
        for t in range(200):
            head.learn(X[t * B : (t + 1) * B], y[t * B : (t + 1) * B])
            for det in (e, raw, ref):
                det.observe()
        assert sum(t < 60 for t in raw.alert_steps) >= 45, raw.alert_steps
        startup = [t for t in ref.alert_steps if t < 60]
        assert len(startup) >= 20 and all(b - a >= 2 for a, b in zip(startup, startup[1:]))
        assert len(e.alert_steps) == 1 and 120 <= e.alert_steps[0] <= 170, (seed, e.alert_steps)


def test_resume_inside_the_warm_up_is_exact():
    snaps = _walk(seed=3)
    kw = {"window_mvg_average": 20, "window_drift_detect": 10, "beta": 1e-3}
    a = ERICS(**kw)
    for m, s in snaps[:15]:  # inside the warm-up of 30 steps
        a.observe(m, s)
    b = ERICS(**kw)
    b.load_state_dict(a.state_dict())
    for m, s in snaps[15:]:
        a.observe(m, s)
        b.observe(m, s)
    assert a.alert_steps == b.alert_steps and a.partial_alerts == b.partial_alerts
    assert list(a.threshold_trace) == list(b.threshold_trace)
    assert a.alert_steps and min(a.alert_steps) >= 30
    assert all(y - x > 10 for x, y in zip(a.alert_steps, a.alert_steps[1:]))
