"""CDLEEDS' restart after a global alert (``reset_on_drift``): the leaf tests use only the rows
that arrive after the alert, so one change gives one alert instead of a burst that lasts until
the windows have flushed."""

from __future__ import annotations

import numpy as np
import torch

from torchstream.drift.cdleeds import CDLEEDS, two_sample_t_test

F64 = torch.float64


def blob_stream(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows alternating between two Gaussian blobs (sd 0.05) and a fixed logistic output."""
    g = torch.Generator().manual_seed(seed)
    C = torch.tensor([[0.2, 0.2], [0.8, 0.8]], dtype=F64)
    X = C[torch.arange(n) % 2] + 0.05 * torch.randn(n, 2, generator=g, dtype=F64)
    return X, torch.sigmoid(3.0 * (X[:, 0] - X[:, 1]) + 2.0 * X[:, 0])


def run(det: CDLEEDS, X: torch.Tensor, out: torch.Tensor, check_tests: bool = False) -> None:
    for t in range(X.shape[0]):
        det.observe(X[t : t + 1], out[t : t + 1])
        if check_tests:  # every test of this update used the rows since the last restart only
            leaves = {leaf.id: leaf for leaf in det.tree.leaves()}
            for leaf_id, p in det.last_tests:
                leaf = leaves[leaf_id]
                keep = torch.from_numpy(leaf.T >= det.tree.test_from)
                np.testing.assert_array_equal(p.numpy(), two_sample_t_test(leaf.V[keep]))


def test_one_change_one_alert_with_restart():
    # The output of every row rises by 0.1 at t0 (sd of the outputs inside a blob: about 0.02)
    # and stays there: one global change. The published rule keeps alarming while the older
    # half of a leaf window still holds pre-change rows: each blob's leaf gets every other row,
    # so about window = 200 updates after t0. With the restart the windows that are tested after
    # the first alert hold post-change rows only (a true null): alarms come at about the
    # corrected level, alpha (N + 1) / (2N) = 0.0075 for N = 2 leaves, i.e. an expected 4.5
    # in 600 updates; 15 allows Poisson-like clumping (P(Poisson(4.5) > 15) < 1e-4).
    t0, n = 2000, 2600
    X, out = blob_stream(n, seed=0)
    out[t0:] += 0.1
    plain, restart = CDLEEDS(), CDLEEDS(reset_on_drift=True)
    run(plain, X, out)
    run(restart, X, out, check_tests=True)
    after_plain = [a for a in plain.alert_steps if a >= t0]
    after_restart = [a for a in restart.alert_steps if a >= t0]
    assert after_plain and after_restart and after_restart[0] == after_plain[0]
    assert after_restart[0] - t0 <= 100  # detected as fast as the published rule
    assert len(after_plain) >= 150
    assert len(after_restart) <= 15
    # before the change both saw the same rows and raised the same (false) alarms until the
    # first one; the restart only ever removes evidence
    assert len(restart.alert_steps) <= len(plain.alert_steps)


def test_restart_clears_the_leaf_p_values_and_keeps_the_clustering():
    X, out = blob_stream(1200, seed=1)
    out[1000:] += 0.2
    det = CDLEEDS(reset_on_drift=True)
    alerted_at = None
    for t in range(X.shape[0]):
        leaves_before = [leaf.id for leaf in det.tree.leaves()] if det.tree is not None else []
        since = 0 if det.tree is None else det.tree.test_from
        det.observe(X[t : t + 1], out[t : t + 1])
        if det.drift_detected and t >= 1000:
            alerted_at = t
            break
    assert alerted_at is not None
    # the alerting update's p-values (its local changes) are still there for
    # detect_local_change(): the restart waits for the next update
    assert det.tree.test_from == since and not np.isnan(det.leaf_p_values.numpy()).any()
    det.observe(X[alerted_at + 1 : alerted_at + 2], out[alerted_at + 1 : alerted_at + 2])
    assert det.tree.test_from == alerted_at + 1  # the rows after the alert
    assert [leaf.id for leaf in det.tree.leaves()] == leaves_before  # the clustering is kept
    assert np.isnan(det.leaf_p_values.numpy()).all()
    assert not det.leaf_change.any()
    # the next tests need 4 rows after the alert per leaf: NaN until then
    for t in range(alerted_at + 2, alerted_at + 7):
        det.observe(X[t : t + 1], out[t : t + 1])
        for _, p in det.last_tests:
            assert np.isnan(p.numpy()).all()
    for t in range(alerted_at + 7, alerted_at + 12):
        det.observe(X[t : t + 1], out[t : t + 1])
    assert not np.isnan(det.leaf_p_values.numpy()).any()
