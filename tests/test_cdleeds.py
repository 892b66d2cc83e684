"""CDLEEDS: the leaf t-test, Fisher's global test, the clustering invariants, local change only
where the model changed, stationarity, global drift, age pruning and exact resume (spec §2 and
§7 checks 11-15)."""

from __future__ import annotations

import copy
import io
import math

import numpy as np
import pytest
import torch
from scipy import stats

from torchstream.drift.cdleeds import (
    CDLEEDS,
    corrected_significance,
    fisher_combine,
    two_sample_t_test,
)

F64 = torch.float64
A, B = (0.2, 0.2), (0.8, 0.8)


def blobs(n: int, centres, seed: int, sigma: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows from Gaussian blobs (blob index cycles) and the blob index of each row."""
    g = torch.Generator().manual_seed(seed)
    C = torch.tensor(centres, dtype=F64)
    which = torch.arange(n) % len(centres)
    return C[which] + sigma * torch.randn(n, 2, generator=g, dtype=F64), which


def logistic(X: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(3.0 * (X[:, 0] - X[:, 1]) + 2.0 * X[:, 0])


# ---------------------------------------------------------------------------- statistics
def test_t_test_matches_scipy_pooled_two_sided():
    g = torch.Generator().manual_seed(0)
    for n in (4, 7, 200):
        V = torch.randn(n, 3, generator=g, dtype=F64)
        ref = stats.ttest_ind(V[: n // 2].numpy(), V[n // 2 :].numpy(), axis=0).pvalue
        np.testing.assert_allclose(two_sample_t_test(V), ref, rtol=1e-10)
    assert np.isnan(two_sample_t_test(torch.zeros(3, 1, dtype=F64))).all()  # < 4 entries
    assert np.isnan(two_sample_t_test(torch.ones(6, 1, dtype=F64)))[0]  # 0 / 0
    step = torch.tensor([[0.0]] * 3 + [[1.0]] * 3, dtype=F64)
    assert two_sample_t_test(step)[0] == 0.0  # constant halves, different means


def test_fisher_combination_and_corrected_significance():
    # check 15: all leaves at p = 0.5 -> no drift; one leaf at 1e-12 -> drift
    N = 8
    p, n = fisher_combine(torch.full((N, 1), 0.5, dtype=F64))
    assert n.item() == N and p.item() > corrected_significance(0.01, N)
    P = torch.full((N, 1), 0.5, dtype=F64)
    P[3] = 1e-12
    p, _ = fisher_combine(P)
    assert p.item() < corrected_significance(0.01, N)
    ref = stats.combine_pvalues(P[:, 0].numpy(), method="fisher").pvalue
    assert p.item() == pytest.approx(ref, rel=1e-10)
    assert corrected_significance(0.01, 8) == 0.01 * 9 / 16  # = 0.005625
    assert corrected_significance(0.01, 32) == 0.01 * 33 / 64  # 0.00516; the paper: 0.0052
    # zeros become 1e-10, NaNs are ignored (per column)
    p, n = fisher_combine(torch.tensor([[0.0, math.nan], [math.nan, math.nan]], dtype=F64))
    assert n.tolist() == [1, 0] and math.isnan(p[1].item())
    assert p[0].item() == pytest.approx(stats.chi2.sf(-2 * math.log(1e-10), 2), rel=1e-10)


# ---------------------------------------------------------------------------- the tree
def _leaf_checks(det: CDLEEDS) -> None:
    tree = det.tree
    for node, _ in tree.nodes():
        assert node.size <= det.window
        if node.size:
            assert torch.allclose(node.centroid, node.W.mean(0), atol=1e-9, rtol=0)
        may_split = det.max_depth is None or node.depth < det.max_depth
        if node.children is None and may_split and node.size >= 2:
            sim = torch.exp(-((node.W - node.centroid) ** 2).sum(1) / tree.m)
            assert bool((sim >= det.gamma).all())


def _expected_leaf(det: CDLEEDS, x: torch.Tensor) -> int:
    """Descend by hand: to the nearer seed row of each split (pivots) or the nearer current child
    centroid (the paper's rule)."""
    node = det.tree.root
    while node.children is not None:
        left, right = node.children
        if det.routing == "pivots":
            a, b = node.pivots
        else:
            a, b = left.centroid, right.centroid
        node = left if ((x - a) ** 2).sum() <= ((x - b) ** 2).sum() else right
    return node.id


def _subtree(node):
    yield node, None
    for child in node.children or ():
        yield from _subtree(child)


@pytest.mark.parametrize("routing", ["pivots", "centroids"])
def test_cluster_invariants_and_routing(routing):
    # check 13 on a uniform 2-D stream (no pruning, unlimited depth, short windows)
    g = torch.Generator().manual_seed(1)
    X = torch.rand(600, 2, generator=g, dtype=F64)
    det = CDLEEDS(window=30, max_age=10**6, max_depth=None, routing=routing)
    n_split_steps = 0
    for t in range(X.shape[0]):
        x = X[t : t + 1]
        target = _expected_leaf(det, x[0]) if det.tree is not None else 0
        splits = det.tree.n_splits if det.tree is not None else 0
        det.observe(x, logistic(x))
        node = det.node_of(target)
        if node.children is None:
            assert torch.equal(node.W[-1], x[0])  # the row reached the predicted leaf
        else:  # ... which split: the row is the newest row of one of its children
            n_split_steps += 1
            assert any(c.size and torch.equal(c.W[-1], x[0]) for c in node.children)
        if det.tree.n_splits > splits or t % 50 == 0:
            _leaf_checks(det)
    assert n_split_steps >= 3 and det.n_leaves >= 4
    if routing == "pivots":  # a fixed region per node: every row below the left child is on
        for node, _ in det.tree.nodes():  # the left seed's side of the split, and vice versa
            if node.children is None:
                continue
            for side, child in enumerate(node.children):
                rows = torch.cat([n.W for n, _ in _subtree(child)])
                dist = torch.cdist(rows, node.pivots)
                near = dist[:, 0] <= dist[:, 1]
                assert bool(near.all() if side == 0 else (~near).all())


def test_ages_follow_the_parent_clock_at_every_depth():
    # Alg. 1 lines 13/27: a child that receives rows takes its parent's age *before* it forwards
    # them, so every node on the path of the newest row carries the root's age (a node that was
    # idle for a while must not stamp its own children with its stale age: that made deep
    # branches look older than they are and pruned them early).
    g = torch.Generator().manual_seed(11)
    X = torch.rand(1500, 2, generator=g, dtype=F64)
    det = CDLEEDS(window=30, max_age=10**6, max_depth=None)
    stale_visits = 0
    for t in range(X.shape[0]):
        before = {n.id: n.age for n, _ in det.tree.nodes()} if det.tree is not None else {}
        det.observe(X[t : t + 1], logistic(X[t : t + 1]))
        root_age = det.tree.root.age
        for node, parent in det.tree.nodes():
            if parent is not None:
                assert node.age <= parent.age
            if node.newest == t:  # on the path of this row
                assert node.age == root_age
                if node.id in before and before[node.id] < root_age - 1 and node.children:
                    stale_visits += 1  # an idle inner node below the root was revisited
    assert stale_visits > 50  # the case the rule is about occurs often here


def test_age_pruning_happens_exactly_after_max_age():
    # check 14: two blobs, then only blob A; the B leaf stops receiving rows
    det = CDLEEDS(window=40, max_age=20)
    X, _ = blobs(200, [A, B], seed=2)
    for t in range(200):
        det.observe(X[t : t + 1], logistic(X[t : t + 1]))
    root = det.tree.root
    assert root.children is not None and det.n_leaves == 2
    prunes = det.tree.n_prunes
    XA, _ = blobs(100, [A], seed=3)
    b_leaf = max(root.children, key=lambda c: float(c.centroid[0]))
    last_b = b_leaf.age  # = the root's age when the B leaf last received a row
    pruned_at = None
    for t in range(60):
        det.observe(XA[t : t + 1], logistic(XA[t : t + 1]))
        if root.children is None and pruned_at is None:
            pruned_at = root.age
    assert pruned_at == last_b + det.max_age
    # the pruned root still holds B rows in its window, so it splits again and the starved B
    # child is pruned once more; when the window holds only A rows, one leaf remains
    assert det.tree.n_prunes == prunes + 2 and det.n_leaves == 1


# ---------------------------------------------------------------------------- detection
def test_local_change_only_in_the_changed_region():
    # check 11: f changes only on blob A at t0; constant baseline
    t0, n_post = 1000, 800
    X, which = blobs(t0 + n_post, [A, B], seed=4)
    out = logistic(X)
    out[t0:] += 0.15 * (which[t0:] == 0)
    det = CDLEEDS()
    for t in range(t0):
        det.observe(X[t : t + 1], out[t : t + 1], baseline_pred=0.3)
    assert det.n_leaves == 2
    mon, mon_which = blobs(20, [A, B], seed=5)
    det.monitor(mon)
    det.detect_local_change()
    queued = torch.zeros(20)
    tests = {0: [0, 0], 1: [0, 0]}  # blob -> [tests, rejections]
    for t in range(t0, t0 + n_post):
        det.observe(X[t : t + 1], out[t : t + 1], baseline_pred=0.3)
        for leaf_id, p in det.last_tests:
            blob = int(det.node_of(leaf_id).centroid[0] > 0.5)
            tests[blob][0] += 1
            tests[blob][1] += int(p.item() <= det.significance)
        res = det.detect_local_change()
        queued += res.recompute.double()
        # the rule: queued <=> the leaf flags change (no leaf changes here)
        assert torch.equal(res.recompute, res.change[res.leaf_of])
    assert tests[0][1] >= 1  # a leaf in A flags change
    assert tests[1][1] / tests[1][0] <= 2 * det.significance  # false alarms in B
    share = queued / n_post
    assert share[mon_which == 0].min() > 0.2  # A: recomputed during the transition
    assert share[mon_which == 1].max() <= 2 * det.significance


def test_stationary_stream_false_alarms():
    # check 12 (6000 rows instead of 50k to keep the suite fast). Under H0 each leaf p-value is
    # uniform, so P(p <= 0.01) = 0.01 per test; the global test is calibrated at about
    # alpha_corr = 0.01 * (N + 1) / (2N) = 0.0075 (N = 2), and consecutive tests share all but
    # one row of their windows, so rejections come in runs: 2x the nominal rate leaves room for
    # that autocorrelation. (Blobs 8.5 sigma from the boundary between them: the clustering is
    # stable; clusters that straddle the gamma radius make it split and re-route, which is not
    # stationary for the leaf windows.)
    X, _ = blobs(6000, [A, B], seed=6)
    det = CDLEEDS()
    for t in range(X.shape[0]):
        det.observe(X[t : t + 1], logistic(X[t : t + 1]))
    assert det.n_leaves == 2
    assert det.n_rejections / det.n_tests <= 0.02
    assert len(det.alert_steps) / det.n_updates <= 0.02


def _uniform(n: int, d: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Uniform rows in [0, 1]^d and a fixed logistic model whose output varies over the whole
    cube (the stream of the reproduction script's timing run)."""
    g = torch.Generator().manual_seed(seed)
    X = torch.rand(n, d, generator=g, dtype=F64)
    return X, torch.sigmoid(4 * (X.sum(1) - d / 2) / d**0.5)


def _run(det: CDLEEDS, X: torch.Tensor, out: torch.Tensor) -> int:
    alarms = 0
    for t in range(X.shape[0]):
        det.observe(X[t : t + 1], out[t : t + 1])
        alarms += det.drift_detected
    return alarms


@pytest.mark.parametrize(("d", "seeds"), [(10, (0, 1)), (2, (0,))])
def test_stationary_uniform_stream_is_calibrated(d, seeds):
    # Fixed model, uniform rows, 3000 one-row updates: the leaves sit at max_depth, so the model
    # output varies inside every leaf. With pivot routing a leaf is a fixed region, its window an
    # i.i.d. sample, and a leaf test rejects with probability alpha; the p-values of disjoint
    # leaves are independent, so an update alarms with probability alpha (N + 1) / (2N) <= alpha.
    # Consecutive updates share all but one row of every window, so alarms come in bursts of up
    # to ~100 updates (over 8 seeds at d = 10: mean rate 0.7 %, single runs 0 % .. 2.8 %); two
    # runs are pooled at d = 10 so one burst does not decide the test, and 2 alpha bounds both
    # the leaf rejection rate and the global alarm rate.
    alarms = updates = tests = rejections = 0
    for seed in seeds:
        X, out = _uniform(3000, d, seed)
        det = CDLEEDS()
        alarms += _run(det, X, out)
        updates += det.n_updates
        tests, rejections = tests + det.n_tests, rejections + det.n_rejections
    assert tests >= updates  # every update tests at least one leaf
    assert rejections / tests <= 2 * det.significance
    assert alarms / updates <= 2 * det.significance


def test_local_change_on_a_uniform_stream():
    # From t0 the model adds 0.2 to its output where x0 < 0.3 (30 % of the rows). The global test
    # must alarm within 400 updates (120 changed rows spread over the ~4 leaves of the region:
    # enough for the newer half of a leaf window to shift its mean by several standard errors);
    # leaves whose window holds no row of the region are under H0 and flag at <= 2 alpha.
    X, out = _uniform(3000, 2, 101)
    t0, region = 1500, X[:, 0] < 0.3
    out[t0:] += 0.2 * region[t0:]
    det = CDLEEDS()
    first = None
    tests_out = rejections_out = flagged_in = 0
    for t in range(X.shape[0]):
        det.observe(X[t : t + 1], out[t : t + 1])
        if t < t0:
            continue
        if det.drift_detected and first is None:
            first = t - t0
        leaves = {leaf.id: leaf for leaf in det.tree.leaves()}
        for i, p in det.last_tests:
            if i not in leaves:  # pruned in the same update
                continue
            reject = bool(p[0] <= det.significance)
            if bool((leaves[i].W[:, 0] < 0.3).any()):
                flagged_in += reject
            else:
                tests_out, rejections_out = tests_out + 1, rejections_out + reject
    assert first is not None and first <= 400
    assert flagged_in > 0 and tests_out > 100
    assert rejections_out / tests_out <= 2 * det.significance
    res = det.detect_local_change()
    for leaf, flag in zip(det.tree.leaves(), res.change.tolist()):
        if flag:
            assert bool((leaf.W[:, 0] < 0.3).any())


def test_global_drift_after_abrupt_change():
    t0 = 3000
    X, _ = blobs(t0 + 600, [A, B], seed=7)
    out = logistic(X)
    out[t0:] = 1.0 - out[t0:]  # the concept flips everywhere
    det = CDLEEDS(refractory=200)
    for t in range(X.shape[0]):
        det.observe(X[t : t + 1], out[t : t + 1])
    after = [a for a in det.alert_steps if a >= t0]
    assert after and after[0] - t0 <= 150
    assert det.global_p_values.numel() == 1


def test_batches_route_rows_with_masks():
    X, _ = blobs(1200, [A, B], seed=8)
    det = CDLEEDS()
    for t in range(0, 1200, 20):
        det.observe(X[t : t + 20], logistic(X[t : t + 20]))
    assert det.n_updates == 60 and det.n_leaves == 2
    leaf = det.assign(torch.tensor([A, B], dtype=F64))
    assert leaf[0] != leaf[1]
    assert torch.allclose(det.leaf_centroids[leaf], torch.tensor([A, B], dtype=F64), atol=0.02)
    for node in det.tree.leaves():  # each leaf holds rows of one blob only
        assert float(node.W[:, 0].std()) < 0.1


@pytest.mark.parametrize("reset", [False, True])
def test_checkpoint_resume_is_exact(reset):
    X, _ = blobs(700, [A, B], seed=9)
    out = logistic(X)
    out[400:] += 0.2
    det = CDLEEDS(window=60, max_age=30, reset_on_drift=reset)
    for t in range(300):
        det.observe(X[t : t + 1], out[t : t + 1])
    det.monitor(X[:10])
    buf = io.BytesIO()
    torch.save(det.state_dict(), buf)
    buf.seek(0)
    other = CDLEEDS(window=60, max_age=30, reset_on_drift=reset)
    other.load_state_dict(torch.load(buf, weights_only=True))
    twin = copy.deepcopy(det)
    for t in range(300, 700):
        for d in (det, other, twin):
            d.observe(X[t : t + 1], out[t : t + 1])
    assert det.alert_steps == other.alert_steps == twin.alert_steps and det.alert_steps
    assert torch.equal(det.leaf_centroids, other.leaf_centroids)
    np.testing.assert_array_equal(det.leaf_p_values.numpy(), other.leaf_p_values.numpy())
    a, b = det.detect_local_change(), other.detect_local_change()
    assert torch.equal(a.recompute, b.recompute)
    with pytest.raises(ValueError, match="config"):
        CDLEEDS(window=61).load_state_dict(det.state_dict())


def test_bad_input():
    det = CDLEEDS()
    with pytest.raises(ValueError, match="gamma"):
        CDLEEDS(gamma=1.0)
    with pytest.raises(ValueError, match="window"):
        CDLEEDS(window=2)
    with pytest.raises(TypeError, match="reset_on_drift"):
        CDLEEDS(reset_on_drift=1)
    with pytest.raises(ValueError, match="X must have shape"):
        det.observe(torch.zeros(3), torch.zeros(3))
    with pytest.raises(ValueError, match="y_pred"):
        det.observe(torch.zeros(3, 2), torch.zeros(4))
    with pytest.raises(ValueError, match="baseline_pred"):
        det.observe(torch.zeros(3, 2), torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match="not finite"):
        det.observe(torch.zeros(2, 2), torch.tensor([0.0, math.nan]))
    with pytest.raises(ValueError, match="no neighbourhoods"):
        det.detect_local_change()
    det.observe(torch.zeros(2, 2), torch.zeros(2))
    with pytest.raises(ValueError, match="3 features"):
        det.observe(torch.zeros(2, 3), torch.zeros(2))
    with pytest.raises(ValueError, match="outputs"):
        det.observe(torch.zeros(2, 2), torch.zeros(2, 2))
