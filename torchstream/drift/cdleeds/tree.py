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

Every window also keeps the stream position of each row, so the detector can tell leaves whose
window holds recent rows from stale ones (see :class:`~torchstream.drift.CDLEEDS`).

The work per node is done on whole batches with tensor operations (window push, centroid,
radius check, routing, the split's pairwise distances, the t-test); Python only walks the nodes.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import torch
from scipy.special import stdtr

__all__ = ["Node", "NodeTree", "two_sample_t_test"]


def two_sample_t_test(V: torch.Tensor) -> np.ndarray:
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
    n, k = V.shape
    if n < 4:
        return np.full(k, np.nan)
    h = n // 2
    va, ma = torch.var_mean(V[:h], 0)
    vb, mb = torch.var_mean(V[h:], 0)
    va, ma, vb, mb = torch.stack([va, ma, vb, mb]).double().cpu().numpy()
    na, nb = h, n - h
    pooled = ((na - 1) * va + (nb - 1) * vb) / (na + nb - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = (ma - mb) / np.sqrt(pooled * (1.0 / na + 1.0 / nb))
    return np.asarray(2.0 * stdtr(na + nb - 2, -np.abs(t)), dtype=np.float64)


class Node:
    """A node of the clustering tree: windows ``W`` ``[<=w, m]`` (rows), ``V`` ``[<=w, k]``
    (differences) and ``T`` ``[<=w]`` (stream positions of the rows) in time order, their
    centroid, an age, the last p-values (leaves), 0 or 2 children and, for an inner node, the two
    seed rows ``pivots`` ``[2, m]`` of its split.

    The windows live in buffers of ``2 w`` rows: new rows are written after the current ones
    and the window start moves forward; when the buffer is full the window is copied to its
    front (once every ``w`` rows at most). The centroid comes from a running sum that is
    recomputed exactly at every such copy."""

    __slots__ = (
        "_bt",
        "_bv",
        "_bw",
        "_end",
        "_start",
        "_sum",
        "age",
        "centroid",
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
        self._bw = torch.zeros(0, m, dtype=dtype, device=device)
        self._bv = torch.zeros(0, k, dtype=dtype, device=device)
        self._bt = torch.zeros(0, dtype=torch.int64, device=device)
        self._start = self._end = 0
        #: stream position of the newest row in the window (-1: empty)
        self.newest = -1
        self._sum = torch.zeros(m, dtype=dtype, device=device)
        self.centroid = torch.zeros(m, dtype=dtype, device=device)
        self.p = np.full(k, np.nan)
        self.children: tuple[Node, Node] | None = None
        #: the seed rows of the split ``[2, m]`` (inner nodes)
        self.pivots: torch.Tensor | None = None
        #: whether the node's current p-values come from a test (not the initial NaNs)
        self.tested = False

    @property
    def W(self) -> torch.Tensor:
        """The window of rows ``[n, m]`` (a view, oldest first)."""
        return self._bw[self._start : self._end]

    @property
    def V(self) -> torch.Tensor:
        """The window of differences ``[n, k]`` (a view, oldest first)."""
        return self._bv[self._start : self._end]

    @property
    def T(self) -> torch.Tensor:
        """The stream positions of the rows in the window ``[n]`` (a view, oldest first)."""
        return self._bt[self._start : self._end]

    @property
    def size(self) -> int:
        return self._end - self._start

    @property
    def is_leaf(self) -> bool:
        return self.children is None

    def push(self, X: torch.Tensor, D: torch.Tensor, T: torch.Tensor, w: int) -> None:
        """Append the rows (oldest first) with their stream positions ``T``, keep the last ``w``
        and update the centroid."""
        B = X.shape[0]
        if self._bw.shape[0] == 0:
            self._bw = X.new_empty(2 * w, X.shape[1])
            self._bv = D.new_empty(2 * w, D.shape[1])
            self._bt = T.new_empty(2 * w)
        if B >= w:
            self._bw[:w] = X[-w:]
            self._bv[:w] = D[-w:]
            self._bt[:w] = T[-w:]
            self._start, self._end = 0, w
            self._sum = self._bw[:w].sum(0)
        else:
            leave = self.size + B - w
            if leave == 1:
                self._sum = self._sum - self._bw[self._start]
                self._start += 1
            elif leave > 1:
                self._sum = self._sum - self._bw[self._start : self._start + leave].sum(0)
                self._start += leave
            if self._end + B > self._bw.shape[0]:  # copy the window to the front
                n = self.size
                self._bw[:n] = self._bw[self._start : self._end].clone()
                self._bv[:n] = self._bv[self._start : self._end].clone()
                self._bt[:n] = self._bt[self._start : self._end].clone()
                self._start, self._end = 0, n
                self._sum = self._bw[:n].sum(0)
            self._bw[self._end : self._end + B] = X
            self._bv[self._end : self._end + B] = D
            self._bt[self._end : self._end + B] = T
            self._end += B
            self._sum = self._sum + (X[0] if B == 1 else X.sum(0))
        self.centroid = self._sum / self.size
        self.newest = int(T[-1])

    def state(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "depth": self.depth,
            "age": self.age,
            "W": self.W.clone(),
            "V": self.V.clone(),
            "T": self.T.clone(),
            "end": self._end,
            "sum": self._sum.clone(),
            "centroid": self.centroid.clone(),
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
        T = torch.as_tensor(state["T"])
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
            node._bw = torch.zeros(2 * window, W.shape[1], dtype=dtype, device=device)
            node._bv = torch.zeros(2 * window, V.shape[1], dtype=dtype, device=device)
            node._bw[end - n : end] = W.to(device, dtype)
            node._bv[end - n : end] = V.to(device, dtype)
            node._bt = torch.zeros(2 * window, dtype=torch.int64, device=device)
            node._bt[end - n : end] = T.to(device, torch.int64)
        node._start, node._end = end - n, end
        node.newest = int(T[-1]) if n else -1
        node._sum = torch.as_tensor(state["sum"]).to(device, dtype).clone()
        node.centroid = torch.as_tensor(state["centroid"]).to(device, dtype).clone()
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
        T = torch.arange(self.n_rows, self.n_rows + B, dtype=torch.int64, device=self.device)
        self.n_rows += B
        self._update(self.root, X, D, T)

    def targets(self, node: Node) -> torch.Tensor:
        """The two points ``[2, m]`` an inner node routes to (nearer one wins, ties left)."""
        assert node.children is not None
        if self.routing == "pivots":
            assert node.pivots is not None
            return node.pivots
        return torch.stack([node.children[0].centroid, node.children[1].centroid])

    def _update(self, node: Node, X: torch.Tensor, D: torch.Tensor, T: torch.Tensor) -> None:
        node.age += 1
        node.push(X, D, T, self.window)
        children = node.children
        if children is None:
            if self._may_split(node) and self._too_wide(node):
                self._split(node)
            else:
                self._test(node)
            return
        left, right = children
        dist = torch.cdist(X, self.targets(node), compute_mode="donot_use_mm_for_euclid_dist")
        if X.shape[0] == 1:  # one row: no masks
            child = left if bool(dist[0, 0] <= dist[0, 1]) else right
            self._update(child, X, D, T)
            child.age = node.age
        else:
            go_left = dist[:, 0] <= dist[:, 1]  # ties go left
            n_left = int(go_left.sum())
            for child, rows, n in ((left, go_left, n_left), (right, ~go_left, X.shape[0] - n_left)):
                if n:
                    self._update(child, X[rows], D[rows], T[rows])
                    child.age = node.age
        if node.age - min(left.age, right.age) >= self.max_age:
            node.children = None  # prune: the node's own windows are current
            node.pivots = None
            self._leaves = None
            self.n_prunes += 1
            self._test(node)

    def _may_split(self, node: Node) -> bool:
        return node.size >= 2 and (self.max_depth is None or node.depth < self.max_depth)

    def _too_wide(self, node: Node) -> bool:
        dist = torch.cdist(
            node.W, node.centroid.unsqueeze(0), compute_mode="donot_use_mm_for_euclid_dist"
        )
        return bool(dist.max() > self.radius)

    def _split(self, node: Node) -> None:
        W, V, T = node.W.clone(), node.V.clone(), node.T.clone()
        sq = torch.cdist(W, W, compute_mode="donot_use_mm_for_euclid_dist")
        i, j = divmod(int(torch.argmax(sq)), W.shape[0])
        node.pivots = W[[i, j]].clone()
        seeds = torch.cdist(W, node.pivots, compute_mode="donot_use_mm_for_euclid_dist")
        go_left = seeds[:, 0] <= seeds[:, 1]
        left, right = self._new(node.depth + 1, node.age), self._new(node.depth + 1, node.age)
        node.children = (left, right)
        node.p = np.full(self.k, np.nan)
        node.tested = False
        self._leaves = None
        self.n_splits += 1
        for child, rows in ((left, go_left), (right, ~go_left)):
            self._update(child, W[rows], V[rows], T[rows])
            child.age = node.age

    def _test(self, node: Node) -> None:
        node.p = two_sample_t_test(node.V)
        node.tested = True
        self.tests.append((node.id, node.p))

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
