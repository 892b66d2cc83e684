"""The adaptive hierarchical clustering of CDLEEDS (Haug et al. 2022, Alg. 1): a binary tree
of nodes, each with sliding windows of the rows that reached it and of their
prediction-baseline differences; the leaves are the representative spatio-temporal
neighbourhoods (STNs) whose halves are compared with a t-test.

**Routing (a deliberate departure from Alg. 1, lines 11 and 24-25).** The paper sends a row to
the child whose *current* centroid is more similar. A child's centroid is the mean of its sliding
window, so it keeps moving (after a split it jumps from the seed row to the mean of the inherited
rows, and every later row moves it and the centroids of all ancestors). The region of input space
that feeds a leaf therefore changes while its window fills, and the older and the newer half of
the window are samples of *different* neighbourhoods. Wherever the model's output varies inside a
leaf — always once ``max_depth`` stops the gamma-splits, e.g. on uniform-like data — the t-test
then rejects without any change of the model: with a fixed logistic model on uniform rows
(d = 10, one row per update) about 4 % of the leaf tests reject at alpha = 0.01 and Fisher's
global test fires at a quarter of the updates, while the same detector on model outputs that do
not depend on ``x`` stays at the nominal level. With ``routing="pivots"`` (the default) an inner
node keeps the two seed rows of its split (the most dissimilar pair, Alg. 1 line 7) and routes
every later row to the nearer seed — the very rule that assigned the inherited window at the split
(line 11 with the seeds as the children's centroids). A leaf is then a fixed region of input space
for its whole life; with a stationary input distribution and a fixed model its window is an
i.i.d. sample and the t-test has its nominal level (about 0.9 % rejections in the same setting).
Virtual drift is still followed through the age pruning (lines 29-31) and new splits.
``routing="centroids"`` keeps the paper's rule.

**Ages (Alg. 1 lines 13 and 27).** A node's age counts the updates it received; a child that
receives rows takes its parent's age. The clock is set *before* the child's own update (as in the
authors' code), so the child forwards its rows, and stamps its own children, with the parent's
current age: a child that last saw rows long ago does not stamp its children with its stale age
(which would make them look older than they are and prune their branch before ``max_age``).

Every window also keeps the stream position of each row (in time order), so the detector can tell
leaves whose window holds recent rows from stale ones, and a test can be restricted to the rows
that arrived after a given position (``NodeTree.test_from``, used when the detector restarts its
tests after a global alert; see :class:`~torchstream.drift.CDLEEDS`).

The work per node is done on whole batches with tensor operations (window push, radius check,
routing, the split's pairwise distances); Python only walks the nodes. The t-test and the stream
positions are small host-side (numpy) computations.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from scipy.special import stdtr

__all__ = ["Node", "NodeTree", "two_sample_t_test"]


def two_sample_t_test(V: torch.Tensor | np.ndarray) -> np.ndarray:
    """Two-sided pooled-variance t-test between the older half ``V[:n//2]`` and the newer half
    ``V[n//2:]`` of a window ``[n, k]``, per column; p-values ``[k]`` (float64 numpy array).

    NaN where the test is undefined: fewer than 4 entries, or both halves constant with equal
    means (0 / 0, as ``scipy.stats.ttest_ind``); 0 where both halves are constant with
    different means.

    >>> V = torch.tensor([[0.0], [1.0], [2.0], [3.0], [4.0], [5.0]])
    >>> t = -3.0 / (1.0 * (2 / 3) ** 0.5)   # means 1 and 4, pooled variance 1, 3 + 3 rows
    >>> bool(abs(two_sample_t_test(V)[0] - 2 * stdtr(4, t)) < 1e-12)
    True
    """
    A = V.detach().cpu().double().numpy() if isinstance(V, torch.Tensor) else np.asarray(V, float)
    n, k = A.shape
    if n < 4:
        return np.full(k, np.nan)
    na = n // 2
    nb = n - na
    a, b = A[:na], A[na:]
    ma, mb = a.sum(0) / na, b.sum(0) / nb
    ra, rb = a - ma, b - mb
    pooled = ((ra * ra).sum(0) + (rb * rb).sum(0)) / (n - 2)
    se = np.sqrt(pooled * (1.0 / na + 1.0 / nb))
    if se.all():
        t = (ma - mb) / se
    else:  # constant halves: +-inf (different means) or NaN (equal means)
        with np.errstate(divide="ignore", invalid="ignore"):
            t = (ma - mb) / se
    return 2.0 * stdtr(n - 2, -np.abs(t))


class Node:
    """A node of the clustering tree: windows ``W`` ``[<=w, m]`` (rows), ``V`` ``[<=w, k]``
    (differences; both views of one buffer) and ``T`` ``[<=w]`` (stream positions of the rows,
    a numpy array) in time order, their centroid, an age, the last p-values (leaves), 0 or 2
    children and, for an inner node, the two seed rows ``pivots`` ``[2, m]`` of its split.

    The windows live in buffers of ``2 w`` rows: new rows are written after the current ones
    and the window start moves forward; when the buffer is full the window is copied to its
    front (once every ``w`` rows at most). The centroid ``mean(W)`` is computed when it is
    asked for (cached until the next push): inner nodes that route by their seed rows never
    need it."""

    __slots__ = (
        "_bt",
        "_bz",
        "_centroid",
        "_cut",
        "_end",
        "_m",
        "_start",
        "age",
        "children",
        "depth",
        "id",
        "newest",
        "p",
        "pivots",
        "tested",
    )

    def __init__(
        self,
        node_id: int,
        depth: int,
        age: int,
        m: int,
        k: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.id = node_id
        self.depth = depth
        self.age = age
        self._m = m
        #: rows and differences side by side ``[2 w, m + k]`` (one write per push)
        self._bz = torch.zeros(0, m + k, dtype=dtype, device=device)
        self._bt = np.zeros(0, dtype=np.int64)
        self._start = self._end = 0
        #: stream position of the newest row in the window (-1: empty)
        self.newest = -1
        self._centroid: torch.Tensor | None = None
        self.p = np.full(k, np.nan)
        self.children: tuple[Node, Node] | None = None
        #: the seed rows of the split ``[2, m]`` (inner nodes)
        self.pivots: torch.Tensor | None = None
        self._cut: tuple[torch.Tensor, torch.Tensor] | None = None  # see NodeTree.cut
        #: whether the node's current p-values come from a test (not the initial NaNs)
        self.tested = False

    @property
    def W(self) -> torch.Tensor:
        """The window of rows ``[n, m]`` (a view, oldest first)."""
        return self._bz[self._start : self._end, : self._m]

    @property
    def V(self) -> torch.Tensor:
        """The window of differences ``[n, k]`` (a view, oldest first)."""
        return self._bz[self._start : self._end, self._m :]

    @property
    def Z(self) -> torch.Tensor:
        """Rows and differences side by side ``[n, m + k]`` (a view, oldest first)."""
        return self._bz[self._start : self._end]

    @property
    def T(self) -> np.ndarray:
        """The stream positions of the rows in the window ``[n]`` (a view, oldest first)."""
        return self._bt[self._start : self._end]

    @property
    def centroid(self) -> torch.Tensor:
        """``mean(W)`` ``[m]`` (zeros while the window is empty)."""
        if self._centroid is None:
            if self._end > self._start:
                self._centroid = self.W.mean(0)
            else:
                self._centroid = self._bz.new_zeros(self._m)
        return self._centroid

    @property
    def size(self) -> int:
        return self._end - self._start

    @property
    def is_leaf(self) -> bool:
        return self.children is None

    def push(self, Z: torch.Tensor, T: np.ndarray, w: int) -> None:
        """Append the rows with their differences ``Z`` ``[B, m + k]`` (oldest first) and their
        stream positions ``T``, keep the last ``w``."""
        B = Z.shape[0]
        if self._bz.shape[0] == 0:
            self._bz = Z.new_empty(2 * w, Z.shape[1])
            self._bt = np.empty(2 * w, dtype=np.int64)
        if B >= w:
            self._bz[:w] = Z[-w:]
            self._bt[:w] = T[-w:]
            self._start, self._end = 0, w
        else:
            leave = self._end - self._start + B - w
            if leave > 0:
                self._start += leave
            if self._end + B > self._bz.shape[0]:  # copy the window to the front
                n = self._end - self._start
                self._bz[:n] = self._bz[self._start : self._end].clone()
                self._bt[:n] = self._bt[self._start : self._end].copy()
                self._start, self._end = 0, n
            self._bz[self._end : self._end + B] = Z
            self._bt[self._end : self._end + B] = T
            self._end += B
        self._centroid = None
        self.newest = int(T[-1])

    def state(self) -> dict[str, object]:
        return {
            "id": self.id,
            "depth": self.depth,
            "age": self.age,
            "W": self.W.clone(),
            "V": self.V.clone(),
            "T": torch.from_numpy(self.T.copy()),
            "end": self._end,
            "p": torch.from_numpy(self.p.copy()),
            "tested": self.tested,
            "pivots": None if self.pivots is None else self.pivots.clone(),
            "children": None if self.children is None else [c.state() for c in self.children],
        }

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], window: int, dtype: torch.dtype, device: torch.device
    ) -> Node:
        W, V = torch.as_tensor(state["W"]), torch.as_tensor(state["V"])
        T = torch.as_tensor(state["T"]).to(torch.int64).cpu().numpy()
        node = cls(
            int(state["id"]),
            int(state["depth"]),
            int(state["age"]),
            W.shape[1],
            V.shape[1],
            dtype,
            device,
        )
        n, end = W.shape[0], int(state["end"])
        if n:  # the window at the same place of its buffer: the same copies later
            node._bz = torch.zeros(2 * window, W.shape[1] + V.shape[1], dtype=dtype, device=device)
            node._bz[end - n : end, : W.shape[1]] = W.to(device, dtype)
            node._bz[end - n : end, W.shape[1] :] = V.to(device, dtype)
            node._bt = np.zeros(2 * window, dtype=np.int64)
            node._bt[end - n : end] = T
        node._start, node._end = end - n, end
        node.newest = int(T[-1]) if n else -1
        node.p = torch.as_tensor(state["p"]).double().cpu().numpy().copy()
        node.tested = bool(state["tested"])
        if state["pivots"] is not None:
            node.pivots = torch.as_tensor(state["pivots"]).to(device, dtype).clone()
        if state["children"] is not None:
            left, right = (cls.from_state(s, window, dtype, device) for s in state["children"])
            node.children = (left, right)
        return node


class NodeTree:
    """The clustering tree with CDLEEDS' update rule (see :class:`~torchstream.drift.CDLEEDS`
    for the parameters)."""

    def __init__(
        self,
        m: int,
        k: int,
        *,
        gamma: float,
        window: int,
        max_age: int,
        max_depth: int | None,
        routing: str = "pivots",
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        if routing not in ("pivots", "centroids"):
            raise ValueError(f"routing must be 'pivots' or 'centroids', got {routing!r}")
        self.m, self.k = m, k
        self.gamma, self.window, self.max_age, self.max_depth = gamma, window, max_age, max_depth
        self.routing = routing
        self.dtype, self.device = dtype, device
        #: sim(x, c) >= gamma  <=>  ||x - c|| <= radius (RBF kernel with gamma = 1 / m)
        self.radius = math.sqrt(-m * math.log(gamma))
        self.next_id = 0
        #: rows seen so far (the stream position of the next row)
        self.n_rows = 0
        #: the t-tests use the rows from this stream position on (see ``restart_tests``)
        self.test_from = 0
        self.root = self._new(depth=0, age=0)
        #: (node id, p-values) of the tests run in the last update
        self.tests: list[tuple[int, np.ndarray]] = []
        #: counts of structural changes
        self.n_splits = 0
        self.n_prunes = 0
        self._leaves: list[Node] | None = None

    def _new(self, depth: int, age: int) -> Node:
        node = Node(self.next_id, depth, age, self.m, self.k, self.dtype, self.device)
        self.next_id += 1
        return node

    # ------------------------------------------------------------------ update
    def update(self, X: torch.Tensor, D: torch.Tensor) -> None:
        self.tests = []
        B = X.shape[0]
        T = np.arange(self.n_rows, self.n_rows + B, dtype=np.int64)
        self.n_rows += B
        self.root.age += 1
        self._update(self.root, torch.cat([X, D], 1), T)

    def targets(self, node: Node) -> torch.Tensor:
        """The two points ``[2, m]`` an inner node routes to (nearer one wins, ties left)."""
        assert node.children is not None
        if self.routing == "pivots":
            assert node.pivots is not None
            return node.pivots
        return torch.stack([node.children[0].centroid, node.children[1].centroid])

    def cut(self, node: Node) -> tuple[torch.Tensor, torch.Tensor]:
        """``(u, c)`` with ``u = b - a`` and ``c = (|b|^2 - |a|^2) / 2`` for the targets ``a, b``
        of an inner node: ``|x - a| <= |x - b|`` iff ``x . u <= c`` (one product per row;
        cached for fixed seed rows)."""
        if self.routing == "pivots" and node._cut is not None:
            return node._cut
        a, b = self.targets(node)
        out = (b - a, 0.5 * (b.dot(b) - a.dot(a)))
        if self.routing == "pivots":
            node._cut = out
        return out

    def _update(self, node: Node, Z: torch.Tensor, T: np.ndarray) -> None:
        """Alg. 1 at ``node``, whose age the caller has already advanced (lines 1-4 with line 13
        / 27 of its parent)."""
        node.push(Z, T, self.window)
        children = node.children
        if children is None:
            if self._may_split(node) and self._too_wide(node):
                self._split(node)
            else:
                self._test(node)
            return
        left, right = children
        X = Z[:, : self.m]
        u, c = self.cut(node)
        near_left = X @ u <= c  # ties go left
        if X.shape[0] == 1:  # one row: no masks
            child = left if bool(near_left[0]) else right
            child.age = node.age
            self._update(child, Z, T)
        else:
            go_left = near_left.cpu().numpy()
            for child, keep in ((left, go_left), (right, ~go_left)):
                idx = np.flatnonzero(keep)
                if idx.size == 0:
                    continue
                child.age = node.age
                if idx.size == X.shape[0]:  # the whole batch: no copy
                    self._update(child, Z, T)
                else:
                    rows = torch.from_numpy(idx).to(Z.device)
                    self._update(child, Z.index_select(0, rows), T[idx])
        if node.age - min(left.age, right.age) >= self.max_age:
            node.children = None  # prune: the node's own windows are current
            node.pivots = node._cut = None
            self._leaves = None
            self.n_prunes += 1
            self._test(node)

    def _may_split(self, node: Node) -> bool:
        return node.size >= 2 and (self.max_depth is None or node.depth < self.max_depth)

    def _too_wide(self, node: Node) -> bool:
        sq = (node.W - node.centroid).square().sum(1)
        return bool(sq.max() > self.radius**2)

    def _split(self, node: Node) -> None:
        Z, T = node.Z.clone(), node.T.copy()
        W = Z[:, : self.m]
        sq = torch.cdist(W, W, compute_mode="donot_use_mm_for_euclid_dist")
        i, j = divmod(int(torch.argmax(sq)), W.shape[0])
        node.pivots = W[[i, j]].clone()
        node._cut = None
        seeds = (W.unsqueeze(1) - node.pivots).square().sum(2)
        go_left = seeds[:, 0] <= seeds[:, 1]
        mask = go_left.cpu().numpy()
        # the children take the parent's age (Alg. 1 line 13) before their first update
        left = self._new(node.depth + 1, node.age)
        right = self._new(node.depth + 1, node.age)
        node.children = (left, right)
        node.p = np.full(self.k, np.nan)
        node.tested = False
        self._leaves = None
        self.n_splits += 1
        for child, rows, keep in ((left, go_left, mask), (right, ~go_left, ~mask)):
            self._update(child, Z[rows], T[keep])

    def _test(self, node: Node) -> None:
        V = node.V
        if self.test_from > 0 and node.size and node.T[0] < self.test_from:
            V = V[int(np.searchsorted(node.T, self.test_from)) :]
        node.p = two_sample_t_test(V)
        node.tested = True
        self.tests.append((node.id, node.p))

    def restart_tests(self) -> None:
        """From now on, the t-tests use only the rows that arrive after this call; every node's
        p-values become NaN (the clustering is kept)."""
        self.test_from = self.n_rows
        for node, _ in self.nodes():
            node.p = np.full(self.k, np.nan)
            node.tested = False

    # ------------------------------------------------------------------ views
    def nodes(self) -> Iterator[tuple[Node, Node | None]]:
        """Every node with its parent (depth first, left before right)."""
        stack: list[tuple[Node, Node | None]] = [(self.root, None)]
        while stack:
            node, parent = stack.pop()
            yield node, parent
            if node.children is not None:
                stack.append((node.children[1], node))
                stack.append((node.children[0], node))

    def leaves(self) -> list[Node]:
        """The leaves, depth first, left before right (cached between structural changes)."""
        if self._leaves is None:
            self._leaves = [n for n, _ in self.nodes() if n.children is None]
        return self._leaves
