"""A bank of ``d`` incremental regression trees held in tensors (one tree per feature).

Tree ``i`` predicts feature ``i`` from the other features. All trees live in fixed-capacity
arrays in heap layout: node ``k`` has the children ``2k + 1`` (``x <= threshold``) and
``2k + 2``, so a tree of depth ``R`` has at most ``2^(R + 1) - 1`` nodes and no child pointers
are needed. Routing a batch through all trees is a loop over the ``R`` depth levels only.

Growth is Hoeffding-style (variance reduction, as in Hoeffding regression trees):

* a leaf takes ``Q`` candidate thresholds per feature from the recent rows (a geometric
  reservoir of full rows kept by the sampler) that fall into its region: ``ceil(Q / 2)``
  quantiles (levels ``k / (ceil(Q / 2) + 1)``) and ``floor(Q / 2)`` equally spaced points between
  their minimum and maximum (offset by half a step; these also find gaps between clusters,
  which quantiles miss); it waits until at least ``Q + 1`` such rows exist;
* from then on it accumulates, per feature and candidate, the count, sum and sum of squares of
  its target on the ``x <= threshold`` side (and the totals);
* every ``grace_period`` rows it evaluates the relative variance reduction ``r`` of every
  candidate; with ``eps = sqrt(ln(1 / delta) / (2 n))`` (Hoeffding bound for a merit in
  ``[0, 1]``) it splits on the best candidate if ``r_best - max(r_second, 0) > eps`` (the best
  feature beats the runner-up feature and not splitting) or, for ties, if ``eps < tau`` and
  ``r_best > eps``;
* a split's children start with the visit counts ``n_left``, ``n_right`` of the candidate's
  statistics, so that the split ratio is known from the start.

The tree structure is held fixed while a batch is routed; split attempts happen after the batch
(``B = 1`` is the row-by-row algorithm).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import torch

F64 = torch.float64

#: Tensors that make up the state of a bank (all on the bank's device).
_STATE_KEYS = (
    "feature",
    "threshold",
    "active",
    "visits",
    "candidates",
    "has_candidates",
    "stat_n",
    "stat_sum",
    "stat_sq",
    "le_n",
    "le_sum",
    "le_sq",
)


class TreeBank:
    """``d`` regression trees of depth at most ``max_depth`` in heap layout (see the module doc).

    Attributes (``N = 2^(max_depth + 1) - 1`` nodes per tree, ``Q = n_thresholds``):
    ``feature [d, N]`` split feature (-1: leaf or unused), ``threshold [d, N]``,
    ``active [d, N]`` node exists, ``visits [d, N]`` rows that reached the node (a split's
    children start with the counts of its statistics), ``candidates [d, N, d, Q]`` and
    ``has_candidates [d, N]``, the leaf statistics ``stat_n / stat_sum / stat_sq [d, N]`` and
    ``le_n / le_sum / le_sq [d, N, d, Q]`` (rows with ``x_k <= candidate``).
    """

    def __init__(
        self,
        n_features: int,
        max_depth: int,
        n_thresholds: int,
        grace_period: int,
        delta: float,
        tau: float,
        device: torch.device | str | None = None,
    ) -> None:
        self.d, self.max_depth, self.q = n_features, max_depth, n_thresholds
        self.grace_period, self.delta, self.tau = grace_period, delta, tau
        self.n_nodes = 2 ** (max_depth + 1) - 1
        d, n, q = self.d, self.n_nodes, self.q
        kw = {"device": device}
        self.feature = torch.full((d, n), -1, dtype=torch.long, **kw)
        self.threshold = torch.zeros(d, n, dtype=F64, **kw)
        self.active = torch.zeros(d, n, dtype=torch.bool, **kw)
        self.active[:, 0] = True
        self.visits = torch.zeros(d, n, dtype=F64, **kw)
        self.candidates = torch.zeros(d, n, d, q, dtype=F64, **kw)
        self.has_candidates = torch.zeros(d, n, dtype=torch.bool, **kw)
        self.stat_n = torch.zeros(d, n, dtype=F64, **kw)
        self.stat_sum = torch.zeros(d, n, dtype=F64, **kw)
        self.stat_sq = torch.zeros(d, n, dtype=F64, **kw)
        self.le_n = torch.zeros(d, n, d, q, dtype=F64, **kw)
        self.le_sum = torch.zeros(d, n, d, q, dtype=F64, **kw)
        self.le_sq = torch.zeros(d, n, d, q, dtype=F64, **kw)
        heap = torch.arange(n, dtype=F64, **kw)
        self.node_depth = torch.floor(torch.log2(heap + 1) + 1e-9).long()

    # ------------------------------------------------------------------ helpers
    @property
    def device(self) -> torch.device:
        return self.feature.device

    def depth(self, node: torch.Tensor) -> torch.Tensor:
        """Depth of heap index ``node`` (root: 0)."""
        return self.node_depth[node]

    def to(self, device: torch.device | str) -> None:
        for key in (*_STATE_KEYS, "node_depth"):
            setattr(self, key, getattr(self, key).to(device))

    def is_leaf(self) -> torch.Tensor:
        """``[d, N]``: the node exists and does not split."""
        return self.active & (self.feature < 0)

    # ------------------------------------------------------------------ routing
    def route(self, X: torch.Tensor) -> torch.Tensor:
        """Nodes visited by each row in each tree, ``[n, d, max_depth + 1]`` (entry ``l`` is the
        node at depth ``l``; after the leaf the leaf repeats). ``X``: ``[n, d]`` float64."""
        n = X.shape[0]
        tree = torch.arange(self.d, device=X.device).expand(n, self.d)
        node = torch.zeros(n, self.d, dtype=torch.long, device=X.device)
        path = [node]
        for _ in range(self.max_depth):
            f = self.feature[tree, node]
            right = X.gather(1, f.clamp_min(0)) > self.threshold[tree, node]
            node = torch.where(f >= 0, 2 * node + 1 + right.long(), node)
            path.append(node)
        return torch.stack(path, -1)

    def walk(self, X: torch.Tensor, present: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        """Leaf reached by every ``(b, k, tree j)`` when the features with ``present[b, k]`` True
        are known: a split on a present feature follows ``X[b]``, a split on an absent feature
        goes right with probability ``visits[right] / (visits[left] + visits[right])`` (using
        ``u [B, K, d, max_depth]``). ``X [B, d]`` float64, ``present [B, K, d]`` bool.

        The per-node split feature, threshold and right-branch probability are looked up with
        one ``take`` each per level from flat ``[d N]`` tables."""
        b, k, d = present.shape
        n, top = self.n_nodes, self.n_nodes - 1
        left = (2 * torch.arange(n, device=X.device) + 1).clamp(max=top)
        vl, vr = self.visits[:, left], self.visits[:, (left + 1).clamp(max=top)]
        total = vl + vr
        p_right = torch.where(total > 0, vr / total.clamp_min(1e-300), 0.5).reshape(-1)
        feature, threshold = self.feature.reshape(-1), self.threshold.reshape(-1)
        base = (torch.arange(d, device=X.device) * n).expand(b, k, d)  # flat index of each root
        node = torch.zeros(b, k, d, dtype=torch.long, device=X.device)
        xs = X.unsqueeze(1).expand(b, k, d)
        for level in range(self.max_depth):
            at = base + node
            f = feature.take(at)
            fc = f.clamp_min(0)
            by_x = xs.gather(2, fc) > threshold.take(at)
            go_right = torch.where(present.gather(2, fc), by_x, u[..., level] < p_right.take(at))
            node = torch.where(f >= 0, 2 * node + 1 + go_right.long(), node)
        return node

    # ------------------------------------------------------------------ learning
    def learn(self, X: torch.Tensor, path: torch.Tensor, max_elements: int = 1 << 21) -> None:
        """Add the rows ``X [B, d]`` (float64, routed as ``path``) to the visit counts and to the
        statistics of the leaves they reach, then attempt the due splits."""
        b, d = X.shape
        n, q = self.n_nodes, self.q
        levels = torch.arange(self.max_depth + 1, device=X.device)
        valid = self.depth(path) == levels  # each node of the path once
        tree = torch.arange(d, device=X.device).view(1, d, 1).expand_as(path)
        keys = (tree * n + path)[valid]
        self.visits.view(-1).index_add_(0, keys, torch.ones_like(keys, dtype=F64))

        leaf = path[..., -1]  # [B, d]
        trees = torch.arange(d, device=X.device).expand(b, d)
        rows, cols = self.has_candidates[trees, leaf].nonzero(as_tuple=True)
        if rows.numel() == 0:
            return
        before = self.stat_n.clone()
        key = cols * n + leaf[rows, cols]
        target = X[rows, cols]
        self.stat_n.view(-1).index_add_(0, key, torch.ones_like(target))
        self.stat_sum.view(-1).index_add_(0, key, target)
        self.stat_sq.view(-1).index_add_(0, key, target * target)
        step = max(1, max_elements // (d * q))
        for start in range(0, key.numel(), step):
            sl = slice(start, start + step)
            k, t = key[sl], target[sl].view(-1, 1, 1)
            cand = self.candidates.view(d * n, d, q)[k]  # [P, d, Q]
            le = (X[rows[sl]].unsqueeze(-1) <= cand).to(F64)
            # flat 1-D accumulation: serial, deterministic and fast with repeated keys
            flat = (k.view(-1, 1) * (d * q) + torch.arange(d * q, device=k.device)).view(-1)
            self.le_n.view(-1).index_add_(0, flat, le.view(-1))
            self.le_sum.view(-1).index_add_(0, flat, (le * t).view(-1))
            self.le_sq.view(-1).index_add_(0, flat, (le * (t * t)).view(-1))
        g = float(self.grace_period)
        due = torch.floor(self.stat_n / g) > torch.floor(before / g)
        due &= self.is_leaf() & (self.node_depth < self.max_depth)
        if bool(due.any()):
            self._attempt_splits(*due.nonzero(as_tuple=True))

    def _attempt_splits(self, tree: torch.Tensor, node: torch.Tensor) -> None:
        if self.d < 2:  # nothing to split on
            return
        n = self.stat_n[tree, node].view(-1, 1, 1)
        s, sq = self.stat_sum[tree, node].view(-1, 1, 1), self.stat_sq[tree, node].view(-1, 1, 1)
        n_l, s_l, sq_l = (a[tree, node] for a in (self.le_n, self.le_sum, self.le_sq))
        n_r, s_r, sq_r = n - n_l, s - s_l, sq - sq_l
        sse = sq - s * s / n
        sse_l = torch.where(n_l > 0, sq_l - s_l * s_l / n_l.clamp_min(1), 0.0)
        sse_r = torch.where(n_r > 0, sq_r - s_r * s_r / n_r.clamp_min(1), 0.0)
        ok = (n_l > 0) & (n_r > 0) & (sse > 1e-9 * sq.abs().clamp_min(1e-300))
        merit = torch.where(ok, (sse - sse_l - sse_r) / sse.clamp_min(1e-300), 0.0)
        own = torch.arange(self.d, device=merit.device).view(1, -1) == tree.view(-1, 1)
        per_feature, best_q = merit.max(-1)  # [P, d]
        per_feature = per_feature.masked_fill(own, -math.inf)
        top = per_feature.topk(2, dim=-1)
        best, second = top.values[:, 0], top.values[:, 1].clamp_min(0.0)
        eps = torch.sqrt(math.log(1.0 / self.delta) / (2.0 * n.view(-1)))
        split = (best - second > eps) | ((eps < self.tau) & (best > eps))
        if not bool(split.any()):
            return
        tree, node = tree[split], node[split]
        k = top.indices[split, 0]
        qs = best_q[split].gather(1, k.view(-1, 1)).squeeze(1)
        self.feature[tree, node] = k
        self.threshold[tree, node] = self.candidates[tree, node, k, qs]
        counts = self.le_n[tree, node, k, qs]
        sides = ((2 * node + 1, counts), (2 * node + 2, self.stat_n[tree, node] - counts))
        for child, visits in sides:
            self.active[tree, child] = True
            self.feature[tree, child] = -1
            self.visits[tree, child] = visits
            self._clear(tree, child)
        self._clear(tree, node)

    def _clear(self, tree: torch.Tensor, node: torch.Tensor) -> None:
        self.has_candidates[tree, node] = False
        for key in ("stat_n", "stat_sum", "stat_sq", "le_n", "le_sum", "le_sq"):
            getattr(self, key)[tree, node] = 0.0

    def set_candidates(self, recent: torch.Tensor) -> None:
        """Give the leaves that can still split and have no candidate thresholds yet the
        quantiles of the ``recent [n, d]`` rows (float64) in their region, where at least
        ``Q + 1`` of them lie."""
        pending = self.is_leaf() & ~self.has_candidates & (self.node_depth < self.max_depth)
        if recent.shape[0] < self.q + 1 or not bool(pending.any()):
            return
        tree, node = pending.nonzero(as_tuple=True)
        path = self.route(recent)  # [n, d, R + 1]
        member = path.permute(1, 2, 0)[tree, self.depth(node)] == node.view(-1, 1)  # [P, n]
        count = member.sum(1)
        enough = count >= self.q + 1
        if not bool(enough.any()):
            return
        tree, node, member, count = tree[enough], node[enough], member[enough], count[enough]
        values = recent.t().unsqueeze(0).expand(tree.numel(), -1, -1)  # [P, d, n]
        values = values.masked_fill(~member.unsqueeze(1), math.inf).sort(-1).values
        n_quantiles = (self.q + 1) // 2  # the rest: equally spaced between min and max
        levels = torch.arange(1, n_quantiles + 1, device=self.device, dtype=F64)
        pos = (levels / (n_quantiles + 1)).view(1, -1) * (count.view(-1, 1) - 1).to(F64)
        lo, hi = pos.floor().long(), pos.ceil().long()
        frac = (pos - lo.to(F64)).unsqueeze(1)
        v_lo = values.gather(2, lo.unsqueeze(1).expand(-1, self.d, -1))
        v_hi = values.gather(2, hi.unsqueeze(1).expand(-1, self.d, -1))
        quantiles = v_lo + frac * (v_hi - v_lo)  # [P, d, Qq]
        low = values[:, :, :1]
        high = values.gather(2, (count - 1).view(-1, 1, 1).expand(-1, self.d, 1))
        n_even = self.q - n_quantiles
        steps = (torch.arange(n_even, device=self.device, dtype=F64) + 0.5) / max(n_even, 1)
        even = low + steps.view(1, 1, -1) * (high - low)  # [P, d, Qw]
        self.candidates[tree, node] = torch.cat([quantiles, even], -1)
        self.has_candidates[tree, node] = True

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        return {key: getattr(self, key).clone() for key in _STATE_KEYS}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        for key in _STATE_KEYS:
            own = getattr(self, key)
            value = torch.as_tensor(state[key])
            if value.shape != own.shape:
                raise ValueError(
                    f"state has {key} of shape {list(value.shape)}, this sampler {list(own.shape)}"
                )
            setattr(self, key, value.to(device=own.device, dtype=own.dtype).clone())
