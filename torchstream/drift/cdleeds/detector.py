"""CDLEEDS: change detection for local explainability in evolving data streams [CD]_.

For a locally accurate attribution method the attributions of ``x`` sum to ``f_t(x) - phi_t^0``
(the model output minus the baseline's output). A change of that *prediction-baseline
difference* near ``x`` therefore means that the attributions of ``x`` changed, and it can be
seen without computing a single attribution. CDLEEDS keeps a binary tree of clusters (see
:mod:`torchstream.drift.cdleeds.tree`): every node holds sliding windows (``window`` rows) of
the rows that reached it and of their differences; a leaf whose rows are not all within RBF
similarity ``gamma`` of its centroid splits at its two most dissimilar rows (until
``max_depth``), an inner node routes rows to the nearer of those two seed rows (the paper: to the
more similar child centroid, ``routing="centroids"``; see the tree module for why the default
differs) and prunes its children when one of them has not received rows for ``max_age`` of its
updates. At each leaf that receives rows (and at a node that just became a leaf by pruning), the
older and the newer half of its difference window are compared with a two-sided pooled-variance
t-test per output column (from 4 rows on, as the authors' code): a p-value ``<= significance``
flags a
**local change** in that neighbourhood. A leaf keeps its last p-values until it receives rows
again, is split (its p-values become NaN, its children are tested on the rows they inherit) or is
pruned away.

**Global drift** (Sec. 4.2 of the paper): the p-values of the *current* leaves are combined per
output column with Fisher's method (``-2 sum ln p ~ chi2(2N)``, NaNs ignored, ``p = 0`` replaced
by ``1e-10``) and compared with the mean-FDR corrected level ``significance (N + 1) / (2N)``, N
the
number of combined p-values; :attr:`CDLEEDS.drift_detected` follows river's convention. The paper
combines "the test results of leaf nodes" and defines the STN of a centroid over the interval of
the last ``w`` time steps (Alg. 1, header); the authors' code combines every leaf, however long
ago it last saw a row. Here a leaf takes part only if its window holds at least one of the last
``window`` rows of the stream (the rows in the root's window): a leaf in a region that no longer
receives rows carries no evidence about the present, and its last — possibly small — p-value
would otherwise keep the global test firing until the branch is pruned (``max_age`` updates of its
parent, i.e. up to ``max_age * 2**depth`` rows). Under no change this does not alter the level:
the p-values of disjoint leaves are independent and (with pivot routing) uniform, so Fisher's
statistic is ``chi2(2N)`` and an update alarms with probability
``significance (N + 1) / (2N) <= significance``.
The alarms of consecutive updates are strongly dependent (a leaf's window moves by one row), so
they come in bursts.

**Under a learning model** the rule above alarms at almost every update (so do the paper's
Alg. 1 and the authors' code, which this follows step by step): the monitored difference of a
neighbourhood moves with every update of the model (that is what CDLEEDS is for: the
attributions change), and inside a leaf the model's output is often nearly flat, so a move of a
few thousandths — the within-window sd on SEA with a Hoeffding tree is 0.003-0.01 — is highly
significant for the t-test, whose window of ``window`` rows spans thousands of stream rows.
Fisher's method then turns one leaf at ``p = 1e-10`` among 25 (the others uniform on average)
into a combined ``p`` of ``1.6e-4``, far below the corrected level; and the shared baseline output
moves every leaf's mean together, so the leaf tests are not independent (with a frozen model on
stationary SEA rows an EWMA baseline, whose ``b_t`` wanders, raises the share of alarmed updates
from about 0.5 % with a constant baseline output to 12-21 %). With
``reset_on_drift=True`` the tests restart after each alert on the rows that follow it, so the
next alert needs evidence gathered since the last one. The paper does not say how its global
experiment handled this; the restart gives delays of the paper's order (hundreds to thousands of
rows) in ``torchstream reproduce cdleeds``.

**Recomputation**: :meth:`CDLEEDS.monitor` registers observations whose attributions are kept;
:meth:`CDLEEDS.detect_local_change` says which of them to recompute — those whose most similar
leaf (flat argmax of the RBF similarity over all leaf centroids) changed since the last query, or
whose leaf flags a change.

Batches: a batch is one update (the ages count updates, as in the authors' code); with one row
per update the paper's per-observation algorithm is reproduced.

References
----------
.. [CD] J. Haug, A. Braun, S. Zürn, G. Kasneci (2022). Change detection for local
   explainability in evolving data streams. CIKM 2022, 706-716.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.special import chdtrc

from torchstream.base import DriftDetectorBase
from torchstream.checkpoint import check_settings
from torchstream.drift.cdleeds.tree import Node, NodeTree
from torchstream.typing import BatchView

__all__ = [
    "CDLEEDS",
    "LocalChange",
    "corrected_significance",
    "fisher_combine",
]


def corrected_significance(significance: float, n_tests: int) -> float:
    """The mean false-discovery-rate level ``significance (N + 1) / (2N)`` for ``N`` tests."""
    if n_tests < 1:
        raise ValueError(f"n_tests must be >= 1, got {n_tests}")
    return significance * (n_tests + 1) / (2 * n_tests)


def fisher_combine(p_values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Fisher's combination of the p-values ``[N, k]`` per column, NaNs ignored and zeros
    replaced by ``1e-10``: ``(combined p [k], number of tests [k])`` (NaN where a column has no
    test).

    Two tests at ``p = 0.5``: ``x = -4 ln 0.5``, and ``chi2(4)`` has survival function
    ``exp(-x/2) (1 + x/2) = 0.25 (1 + 2 ln 2)``:

    >>> p, n = fisher_combine(torch.tensor([[0.5], [0.5], [float('nan')]]))
    >>> round(p.item(), 4), n.item()
    (0.5966, 2)
    """
    P = torch.as_tensor(p_values).detach().double().cpu()
    if P.dim() == 1:
        P = P.unsqueeze(1)
    valid = ~torch.isnan(P)
    P = torch.where(P == 0, torch.full_like(P, 1e-10), P)
    stat = torch.where(valid, -2.0 * torch.log(P), torch.zeros_like(P)).sum(0)
    n = valid.sum(0)
    p = chdtrc(2 * n.numpy(), stat.numpy())
    p = torch.from_numpy(np.where(n.numpy() > 0, p, np.nan))
    return p, n


@dataclass
class LocalChange:
    """The answer of :meth:`CDLEEDS.detect_local_change`.

    Attributes
    ----------
    leaf_ids
        Id of each leaf ``[L]``.
    centroids
        Leaf centroids ``[L, m]``.
    p_values
        Leaf p-values ``[L, k]`` (NaN: not tested).
    change
        Leaves that flag a local change (any p <= significance) ``[L]``.
    recompute
        Monitored observations to recompute ``[n]`` (None without monitored observations).
    leaf_of
        Index into the leaves of each monitored observation ``[n]`` (None without).
    """

    leaf_ids: torch.Tensor
    centroids: torch.Tensor
    p_values: torch.Tensor
    change: torch.Tensor
    recompute: torch.Tensor | None
    leaf_of: torch.Tensor | None


def _number(value: Any, name: str, low: float, high: float, *, open_low: bool = True) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    if ok:
        ok = (value > low if open_low else value >= low) and value < high
    if not ok:
        bracket = "(" if open_low else "["
        raise ValueError(f"{name} must be a number in {bracket}{low}, {high}), got {value!r}")
    return float(value)


def _integer(value: Any, name: str, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    return value


class CDLEEDS(DriftDetectorBase):
    """Local change and global drift detection from prediction-baseline differences.

    Parameters
    ----------
    gamma
        Minimum RBF similarity ``exp(-||x - c||^2 / m)`` of a leaf's rows to its centroid.
    significance
        Significance level of the leaf t-tests (and of the global test, corrected).
    window
        Sliding-window length ``w`` per node (the t-test compares ``w/2`` with ``w/2``).
    max_age
        Prune a node's children when one is this many updates older than the node.
    max_depth
        Maximum depth of the tree (``None``: unlimited; deep leaves may violate ``gamma``).
    routing
        ``"pivots"``: an inner node routes a row to the nearer of the two seed rows of its split,
        so a leaf is a fixed region and its t-test keeps its level under no change;
        ``"centroids"``: to the nearer current child centroid, as in the paper's Alg. 1 (the
        leaf regions move, which inflates the local and global false alarms wherever the
        model's output varies inside a leaf).
    refractory
        After a reported global alert, alerts in the next ``refractory`` updates are not
        reported (0: every update that passes the test is an alert, as in the paper).
    reset_on_drift
        After a reported global alert, restart the tests: at the next update every node's
        p-values become NaN and from then on the t-tests use only the rows that arrive after
        the alert (the clustering is kept; the alerting update's local changes stay visible to
        :meth:`detect_local_change` until then). The next alert then needs a change *after*
        the previous one, as with an error-rate detector that restarts its statistics.
        ``False`` (default): the paper's rule, whose tests keep
        comparing the two halves of each window across an alert, so one change raises an
        alert at every update until the windows have flushed. Meant for global drift
        detection: after a restart the leaves flag no local change until they hold 4 new rows.
    dtype, device
        Of the windows.

    Attributes
    ----------
    drift_detected
        Whether the last update raised a (reported) global alert.
    alerts
        Rows of the reported global alerts: the last row of the alerting update, counted from
        the first row :meth:`observe` saw (or from ``start``).
    alert_steps
        Update indices (0-based) of the reported global alerts.
    new_regions
        At an alert, the centroids ``[r, m]`` of the leaves that flag a local change (None
        when no leaf does, and between alerts).
    global_p_values
        Fisher-combined p-value per output column after the last update ``[k]`` (NaN: no
        current leaf with a p-value).
    n_tests, n_rejections
        Leaf t-tests run so far and how many gave ``p <= significance`` (any column).

    Examples
    --------
    Two clusters of rows; the model's output changes at step 300, on the cluster near
    ``(0.8, 0.8)`` only:

    >>> g = torch.Generator().manual_seed(0)
    >>> det = CDLEEDS(max_depth=3)
    >>> centres = torch.tensor([[0.2, 0.2], [0.8, 0.8]], dtype=torch.float64)
    >>> for t in range(600):
    ...     x = centres[t % 2] + 0.05 * torch.randn(1, 2, generator=g, dtype=torch.float64)
    ...     out = torch.sigmoid(x.sum(1)) + (0.2 if t >= 300 and t % 2 else 0.0)
    ...     det.observe(x, out)
    >>> res = det.detect_local_change()
    >>> [(c.round(decimals=1).tolist(), bool(f)) for c, f in zip(res.centroids, res.change)]
    [([0.2, 0.2], False), ([0.8, 0.8], True)]
    >>> det.alerts[0] >= 300, det.alert_steps == det.alerts, det.drift_detected  # 1 row each
    (True, True, True)
    """

    name = "cdleeds"

    def __init__(
        self,
        gamma: float = 0.95,
        significance: float = 0.01,
        window: int = 200,
        max_age: int = 100,
        max_depth: int | None = 5,
        *,
        routing: str = "pivots",
        refractory: int = 0,
        reset_on_drift: bool = False,
        dtype: torch.dtype = torch.float64,
        device: torch.device | str | None = None,
    ) -> None:
        self.gamma = _number(gamma, "gamma", 0.0, 1.0)
        self.significance = _number(significance, "significance", 0.0, 1.0)
        self.window = _integer(window, "window", 4)
        self.max_age = _integer(max_age, "max_age", 1)
        self.max_depth = None if max_depth is None else _integer(max_depth, "max_depth", 0)
        if routing not in ("pivots", "centroids"):
            raise ValueError(f"routing must be 'pivots' or 'centroids', got {routing!r}")
        self.routing = routing
        self.refractory = _integer(refractory, "refractory", 0)
        if not isinstance(reset_on_drift, bool):
            raise TypeError(f"reset_on_drift must be a bool, got {reset_on_drift!r}")
        self.reset_on_drift = reset_on_drift
        self.dtype = dtype
        self.device = torch.device("cpu") if device is None else torch.device(device)
        self.tree: NodeTree | None = None
        self.n_updates = 0
        super().__init__()  # alerts, new_alerts, drift_detected, n_rows
        self.alert_steps: list[int] = []
        self.global_p_values = torch.zeros(0, dtype=torch.float64)
        self.n_tests = 0
        self.n_rejections = 0
        self._restart = False  # restart the tests at the next update (reset_on_drift)
        self._monitored: torch.Tensor | None = None
        self._last_leaf: torch.Tensor | None = None  # leaf id per monitored row (-1: none)

    # ------------------------------------------------------------------ input
    def _inputs(self, X: Any, y_pred: Any, baseline_pred: Any) -> tuple[torch.Tensor, torch.Tensor]:
        X = torch.as_tensor(X)
        if X.dim() != 2:
            raise ValueError(f"X must have shape [B, m], got {list(X.shape)}")
        B, m = X.shape
        if self.tree is not None and m != self.tree.m:
            raise ValueError(f"X has {m} features, CDLEEDS was started with {self.tree.m}")
        out = torch.as_tensor(y_pred).detach()
        if out.dim() == 1:
            out = out.unsqueeze(1)
        if out.dim() != 2 or out.shape[0] != B:
            raise ValueError(
                f"y_pred must have shape [B] or [B, k] for B={B} rows, got "
                f"{list(torch.as_tensor(y_pred).shape)}"
            )
        base = torch.as_tensor(baseline_pred).detach().to(out.device, self.dtype)
        if base.dim() == 1 and out.shape[1] == 1 and base.shape[0] == B:
            base = base.unsqueeze(1)  # one baseline output per row of a one-output model
        try:
            D = out.to(self.dtype) - base
        except RuntimeError:
            D = None
        if D is None or D.shape != out.shape:
            raise ValueError(
                f"baseline_pred of shape {list(base.shape)} does not broadcast "
                f"to y_pred {list(out.shape)}"
            )
        X = X.to(self.device, self.dtype)
        D = D.to(self.device)
        for name, T in (("X", X), ("y_pred - baseline_pred", D)):
            bad = ~torch.isfinite(T)
            if bool(bad.any()):
                raise ValueError(f"{name} row {int(bad.any(1).nonzero()[0])} is not finite")
        if self.tree is not None and D.shape[1] != self.tree.k:
            raise ValueError(
                f"y_pred has {D.shape[1]} outputs, CDLEEDS was started with {self.tree.k}"
            )
        return X, D

    # ------------------------------------------------------------------ update
    def observe(
        self, X: torch.Tensor, y_pred: torch.Tensor, baseline_pred: torch.Tensor | float = 0.0,
        *, start: int | None = None,
    ) -> None:
        """One update with the rows ``X`` ``[B, m]``, the model's outputs ``y_pred`` ``[B]`` /
        ``[B, k]`` and the baseline's output ``baseline_pred`` (a number, ``[k]`` or ``[B, k]``);
        the monitored difference is ``y_pred - baseline_pred``. ``start``: the stream row of
        the first row (default: the rows seen so far); an alert is at the batch's last row."""
        X, D = self._inputs(X, y_pred, baseline_pred)
        if X.shape[0] == 0:
            raise ValueError("X has no rows")
        if self.tree is None:
            self.tree = NodeTree(
                X.shape[1],
                D.shape[1],
                gamma=self.gamma,
                window=self.window,
                max_age=self.max_age,
                max_depth=self.max_depth,
                routing=self.routing,
                dtype=self.dtype,
                device=self.device,
            )
        if self._restart:
            self.tree.restart_tests()
            self._restart = False
        self.tree.update(X, D)
        for _, p in self.tree.tests:
            self.n_tests += 1
            self.n_rejections += int(bool((p <= self.significance).any()))
        self._advance(int(X.shape[0]), start)
        self._global_test(self.n_rows - 1)
        self.n_updates += 1

    def update(self, batch: BatchView) -> None:
        """The runner's update: :meth:`observe` the batch's rows and the model's outputs
        before learning them, against a baseline output of 0 (a
        :class:`~torchstream.drift.cdleeds.LocalChangeMonitor` supplies the model's output
        at a baseline input)."""
        self.observe(batch.X, batch.y_pred, start=batch.start)

    def current_leaves(self) -> list[Node]:
        """The leaves whose window holds at least one of the last ``window`` rows of the stream
        (those that take part in the global test)."""
        tree = self.tree
        if tree is None:
            return []
        oldest = tree.n_rows - self.window
        return [leaf for leaf in tree.leaves() if leaf.newest >= oldest]

    def _global_test(self, row: int) -> None:
        assert self.tree is not None
        P = np.stack([leaf.p for leaf in self.current_leaves()])
        valid = ~np.isnan(P)
        n = valid.sum(0)
        logs = np.log(np.where(valid, np.where(P == 0, 1e-10, P), 1.0))
        p = np.where(n > 0, chdtrc(2 * n, -2.0 * logs.sum(0)), np.nan)
        self.global_p_values = torch.from_numpy(p)
        level = self.significance * (n + 1) / (2 * np.maximum(n, 1))
        hit = bool(((n > 0) & (p <= level)).any())
        t = self.n_updates
        if hit and self.alert_steps and t - self.alert_steps[-1] <= self.refractory:
            hit = False
        regions = None
        if hit:
            self.alert_steps.append(t)
            self._restart = self.reset_on_drift
            change = self.leaf_change
            regions = self.leaf_centroids[change] if bool(change.any()) else None
        self._alarm([row] if hit else [], regions=regions)

    # ------------------------------------------------------------------ views
    def _leaves(self) -> list[Node]:
        if self.tree is None:
            raise ValueError("CDLEEDS has no neighbourhoods yet: call observe() first")
        return self.tree.leaves()

    @property
    def n_leaves(self) -> int:
        return 0 if self.tree is None else len(self.tree.leaves())

    @property
    def leaf_centroids(self) -> torch.Tensor:
        """Centroids of the leaves ``[L, m]`` (depth-first order, left before right)."""
        return torch.stack([leaf.centroid for leaf in self._leaves()])

    @property
    def leaf_p_values(self) -> torch.Tensor:
        """Last p-values of the leaves ``[L, k]`` (NaN: not tested)."""
        return torch.from_numpy(np.stack([leaf.p for leaf in self._leaves()]))

    @property
    def leaf_change(self) -> torch.Tensor:
        """Leaves that flag a local change ``[L]`` (bool)."""
        return (self.leaf_p_values <= self.significance).any(1)

    @property
    def last_tests(self) -> list[tuple[int, torch.Tensor]]:
        """``(leaf id, p-values [k])`` of the t-tests run in the last update."""
        return (
            []
            if self.tree is None
            else [(i, torch.from_numpy(p.copy())) for i, p in self.tree.tests]
        )

    def node_of(self, node_id: int) -> Node:
        """The node with id ``node_id``."""
        for node, _ in self._nodes():
            if node.id == node_id:
                return node
        raise KeyError(f"no node with id {node_id}")

    def _nodes(self) -> list[tuple[Node, Node | None]]:
        return [] if self.tree is None else list(self.tree.nodes())

    def assign(self, X: torch.Tensor) -> torch.Tensor:
        """Index into the leaves of the most similar leaf centroid for each row ``[n]``."""
        X = torch.as_tensor(X).to(self.device, self.dtype)
        C = self.leaf_centroids
        if X.dim() != 2 or X.shape[1] != C.shape[1]:
            raise ValueError(f"X must have shape [n, {C.shape[1]}], got {list(X.shape)}")
        return torch.cdist(X, C).argmin(1)

    # ------------------------------------------------------------------ monitoring
    def monitor(self, X: torch.Tensor) -> None:
        """Register the observations ``X`` ``[n, m]`` whose attributions are kept (replaces any
        earlier set); their current leaves become the reference of the next query."""
        X = torch.as_tensor(X).to(self.device, self.dtype)
        if X.dim() != 2 or (self.tree is not None and X.shape[1] != self.tree.m):
            raise ValueError(f"X must have shape [n, m], got {list(X.shape)}")
        self._monitored = X.clone()
        self._last_leaf = None
        if self.tree is not None:
            leaves = self._leaves()
            ids = torch.tensor([leaf.id for leaf in leaves])
            self._last_leaf = ids[self.assign(X).cpu()]

    def detect_local_change(self) -> LocalChange:
        """Leaves with local change and the monitored observations to recompute (their leaf
        changed since the last query, or their leaf flags change)."""
        leaves = self._leaves()
        ids = torch.tensor([leaf.id for leaf in leaves])
        P = torch.from_numpy(np.stack([leaf.p for leaf in leaves]))
        change = (P <= self.significance).any(1)
        centroids = torch.stack([leaf.centroid for leaf in leaves])
        recompute = leaf_of = None
        if self._monitored is not None:
            leaf_of = torch.cdist(self._monitored, centroids).argmin(1).cpu()
            now = ids[leaf_of]
            moved = (
                torch.zeros_like(now, dtype=torch.bool)
                if self._last_leaf is None
                else now != self._last_leaf
            )
            recompute = moved | change[leaf_of]
            self._last_leaf = now
        return LocalChange(ids, centroids, P, change, recompute, leaf_of)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        tree = None
        if self.tree is not None:
            tree = {
                "m": self.tree.m,
                "k": self.tree.k,
                "next_id": self.tree.next_id,
                "n_rows": self.tree.n_rows,
                "test_from": self.tree.test_from,
                "root": self.tree.root.state(),
                "tests": [(i, torch.from_numpy(p.copy())) for i, p in self.tree.tests],
                "n_splits": self.tree.n_splits,
                "n_prunes": self.tree.n_prunes,
            }
        return {
            "config": self._config(),
            "tree": tree,
            "n_updates": self.n_updates,
            "drift_detected": self.drift_detected,
            "alerts": list(self.alerts),
            "alert_steps": list(self.alert_steps),
            "n_rows": self.n_rows,
            "global_p_values": self.global_p_values.clone(),
            "n_tests": self.n_tests,
            "n_rejections": self.n_rejections,
            "restart": self._restart,
            "monitored": None if self._monitored is None else self._monitored.clone(),
            "last_leaf": None if self._last_leaf is None else self._last_leaf.clone(),
        }

    def _config(self) -> dict[str, object]:
        return {
            "gamma": self.gamma,
            "significance": self.significance,
            "window": self.window,
            "max_age": self.max_age,
            "max_depth": self.max_depth,
            "routing": self.routing,
            "refractory": self.refractory,
            "reset_on_drift": self.reset_on_drift,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_settings(state["config"], self._config(), "CDLEEDS", stored="has config")
        tree = state["tree"]
        if tree is None:
            self.tree = None
        else:
            self.tree = NodeTree(
                int(tree["m"]),
                int(tree["k"]),
                gamma=self.gamma,
                window=self.window,
                max_age=self.max_age,
                max_depth=self.max_depth,
                routing=self.routing,
                dtype=self.dtype,
                device=self.device,
            )
            self.tree.n_rows = int(tree["n_rows"])
            self.tree.test_from = int(tree["test_from"])
            self.tree.root = Node.from_state(tree["root"], self.window, self.dtype, self.device)
            self.tree.next_id = int(tree["next_id"])
            self.tree.tests = [
                (int(i), torch.as_tensor(p).double().numpy().copy()) for i, p in tree["tests"]
            ]
            self.tree.n_splits, self.tree.n_prunes = int(tree["n_splits"]), int(tree["n_prunes"])
        self.n_updates = int(state["n_updates"])
        self.drift_detected = bool(state["drift_detected"])
        self.alerts = [int(a) for a in state["alerts"]]
        self.alert_steps = [int(a) for a in state["alert_steps"]]
        self.n_rows = int(state["n_rows"])
        self.global_p_values = torch.as_tensor(state["global_p_values"]).clone()
        self.n_tests, self.n_rejections = int(state["n_tests"]), int(state["n_rejections"])
        self._restart = bool(state["restart"])
        mon, last = state["monitored"], state["last_leaf"]
        self._monitored = (
            None if mon is None else torch.as_tensor(mon).to(self.device, self.dtype).clone()
        )
        self._last_leaf = None if last is None else torch.as_tensor(last).clone()

    def __repr__(self) -> str:
        cfg = ", ".join(f"{k}={v!r}" for k, v in self._config().items())
        return f"CDLEEDS({cfg}, leaves={self.n_leaves}, alerts={len(self.alerts)})"
