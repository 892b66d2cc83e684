"""The adaptive hierarchical clustering of CDLEEDS (Haug et al. 2022, Alg. 1): a binary tree
of nodes, each with sliding windows of the rows that reached it and of their
prediction-baseline differences; the leaves are the representative spatio-temporal
neighbourhoods (STNs) whose halves are compared with a t-test.

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
    """A node of the clustering tree: windows ``W`` ``[<=w, m]`` (rows) and ``V`` ``[<=w, k]``
    (differences) in time order, their centroid, an age, the last p-values (leaves) and 0 or 2
    children.

    The windows live in buffers of ``2 w`` rows: new rows are written after the current ones
    and the window start moves forward; when the buffer is full the window is copied to its
    front (once every ``w`` rows at most). The centroid comes from a running sum that is
    recomputed exactly at every such copy."""

    __slots__ = (
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
        "p",
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
        self._start = self._end = 0
        self._sum = torch.zeros(m, dtype=dtype, device=device)
        self.centroid = torch.zeros(m, dtype=dtype, device=device)
        self.p = np.full(k, np.nan)
        self.children: tuple[Node, Node] | None = None
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
    def size(self) -> int:
        return self._end - self._start

    @property
    def is_leaf(self) -> bool:
        return self.children is None

    def push(self, X: torch.Tensor, D: torch.Tensor, w: int) -> None:
        """Append the rows (oldest first), keep the last ``w`` and update the centroid."""
        B = X.shape[0]
        if self._bw.shape[0] == 0:
            self._bw = X.new_empty(2 * w, X.shape[1])
            self._bv = D.new_empty(2 * w, D.shape[1])
        if B >= w:
            self._bw[:w] = X[-w:]
            self._bv[:w] = D[-w:]
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
                self._start, self._end = 0, n
                self._sum = self._bw[:n].sum(0)
            self._bw[self._end : self._end + B] = X
            self._bv[self._end : self._end + B] = D
            self._end += B
            self._sum = self._sum + (X[0] if B == 1 else X.sum(0))
        self.centroid = self._sum / self.size

    def state(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "depth": self.depth,
            "age": self.age,
            "W": self.W.clone(),
            "V": self.V.clone(),
            "end": self._end,
            "sum": self._sum.clone(),
            "centroid": self.centroid.clone(),
            "p": torch.from_numpy(self.p.copy()),
            "tested": self.tested,
            "children": None if self.children is None else [c.state() for c in self.children],
        }

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], window: int, dtype: torch.dtype, device: torch.device
    ) -> Node:
        W, V = torch.as_tensor(state["W"]), torch.as_tensor(state["V"])
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
        node._start, node._end = end - n, end
        node._sum = torch.as_tensor(state["sum"]).to(device, dtype).clone()
        node.centroid = torch.as_tensor(state["centroid"]).to(device, dtype).clone()
        node.p = torch.as_tensor(state["p"]).double().cpu().numpy().copy()
        node.tested = bool(state["tested"])
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
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        self.m, self.k = m, k
        self.gamma, self.window, self.max_age, self.max_depth = gamma, window, max_age, max_depth
        self.dtype, self.device = dtype, device
        #: sim(x, c) >= gamma  <=>  ||x - c|| <= radius (RBF kernel with gamma = 1 / m)
        self.radius = math.sqrt(-m * math.log(gamma))
        self.next_id = 0
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
        self._update(self.root, X, D)

    def _update(self, node: Node, X: torch.Tensor, D: torch.Tensor) -> None:
        node.age += 1
        node.push(X, D, self.window)
        children = node.children
        if children is None:
            if self._may_split(node) and self._too_wide(node):
                self._split(node)
            else:
                self._test(node)
            return
        left, right = children
        dist = torch.cdist(
            X,
            torch.stack([left.centroid, right.centroid]),
            compute_mode="donot_use_mm_for_euclid_dist",
        )
        if X.shape[0] == 1:  # one row: no masks
            child = left if bool(dist[0, 0] <= dist[0, 1]) else right
            self._update(child, X, D)
            child.age = node.age
        else:
            go_left = dist[:, 0] <= dist[:, 1]  # ties go left
            n_left = int(go_left.sum())
            for child, rows, n in ((left, go_left, n_left), (right, ~go_left, X.shape[0] - n_left)):
                if n:
                    self._update(child, X[rows], D[rows])
                    child.age = node.age
        if node.age - min(left.age, right.age) >= self.max_age:
            node.children = None  # prune: the node's own windows are current
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
        W, V = node.W.clone(), node.V.clone()
        sq = torch.cdist(W, W, compute_mode="donot_use_mm_for_euclid_dist")
        i, j = divmod(int(torch.argmax(sq)), W.shape[0])
        seeds = torch.cdist(W, W[[i, j]], compute_mode="donot_use_mm_for_euclid_dist")
        go_left = seeds[:, 0] <= seeds[:, 1]
        left, right = self._new(node.depth + 1, node.age), self._new(node.depth + 1, node.age)
        node.children = (left, right)
        node.p = np.full(self.k, np.nan)
        node.tested = False
        self._leaves = None
        self.n_splits += 1
        for child, rows in ((left, go_left), (right, ~go_left)):
            self._update(child, W[rows], V[rows])
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
