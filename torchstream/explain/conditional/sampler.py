"""The conditional (observational) sampler of iSAGE: one incremental tree per feature with a
geometric reservoir at every node ([SAGE]_ §3.2.2, App. B.2, Alg. 3-4).

References
----------
.. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an incremental
   version of SAGE for online explanation on data streams. *ECML PKDD 2023*, LNCS 14171,
   428-445.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from torchstream.checkpoint import check_settings
from torchstream.explain.conditional._trees import TreeBank
from torchstream.explain.groups import FeatureGroups, check_feature_groups
from torchstream.explain.storage import GeometricReservoir

if TYPE_CHECKING:
    from typing_extensions import Self

__all__ = ["ConditionalTreeSampler"]

F64 = torch.float64


def _int(value: Any, argument: str, minimum: int) -> int:
    try:
        number = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        number = None
    if number is None or number < minimum:
        raise ValueError(f"{argument} must be an integer >= {minimum}, got {value!r}")
    return number


def _real(value: Any, argument: str, low: float, high: float, *, open_high: bool) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    ok = (
        ok
        and not math.isnan(value)
        and low < value
        and (value < high or (not open_high and value == high))
    )
    if not ok:
        bracket = ")" if open_high else "]"
        raise ValueError(f"{argument} must be in ({low}, {high}{bracket}, got {value!r}")
    return float(value)


class ConditionalTreeSampler:
    r"""Conditional sampler ``x~_j ~ Q(x_j | x_S)`` from one incremental regression tree per
    feature with geometric reservoirs at the nodes (observational iSAGE, [SAGE]_ §3.2.2).

    Tree ``h_j`` predicts feature ``j`` from the other features (Hoeffding-style growth on
    variance reduction, see :mod:`torchstream.explain.conditional._trees`; binary splits
    ``x_k <= t``, depth at most ``max_depth``). Every node keeps a geometric reservoir of the
    last values of feature ``j`` that passed through it (length ``leaf_reservoir_length``,
    insertion probability ``insert_prob``) and counts its visitors.

    **Sampling** (Alg. 4 of [SAGE]_), for each removed feature ``j`` separately::

        node = root of h_j
        while node splits on feature k:
            if k is present: node = child chosen by x_k         # follow the row
            else:            node = random child, P(child) = visits(child) / visits(node's children)
        x~_j = uniform draw from node's reservoir

    Removed features are drawn independently of each other given ``x_S`` (a product of the
    per-feature conditionals; dependence *among* removed features is not kept, as in the paper).
    If features are independent, the trees do not split (or split without effect) and the
    sampler reduces to a marginal one. **Empty reservoirs:** a leaf created by a split holds no
    value until a row reaches it; a draw that ends in such a leaf comes from its nearest ancestor
    with data. Every node on a row's path is updated (not only the leaf), so that fallback holds
    recent values too.

    **Updating** (Alg. 3), ``update(X)`` after explaining: each row is routed through every tree
    (the trees are held fixed within the batch), the visit counts, the reservoirs of the nodes on
    its path and the statistics of the leaf it reaches are updated, then the due split attempts
    run. A batch of rows gives the same state as one row at a time as long as no split becomes
    due inside the batch. New leaves take their candidate thresholds from a geometric reservoir
    of ``candidate_rows`` recent full rows.

    **Drift.** The reservoirs are geometric: a draw returns a value of age ``a`` with probability
    about ``p (1 - p)^a`` (``p = insert_prob / L`` among the rows reaching that node), so the
    conditionals follow recent data. The tree structure is not pruned: a split learned before a
    drift stays (its leaves' reservoirs still follow the data, but the partition may become
    uninformative), a leaf keeps the candidate thresholds it took when it was created, and
    visit counts are totals since a node's creation. (The paper's Hoeffding
    *Adaptive* Tree replaces subtrees whose error grows; that is not done here.)

    **Memory:** ``d (2^(R + 1) - 1)`` nodes, each with a reservoir of ``L`` values and, for the
    split statistics, ``4 d Q`` floats (``R = max_depth``, ``Q = n_thresholds``).

    Parameters
    ----------
    n_features
        ``d``, the width of a row.
    max_depth
        Largest depth of a tree (the root has depth 0).
    leaf_reservoir_length
        ``L``, the values kept per node.
    grace_period
        Rows a leaf collects between two split attempts.
    n_thresholds
        Candidate thresholds per feature and leaf (half quantiles of the recent rows in its
        region, half equally spaced between their minimum and maximum).
    delta
        Confidence of the Hoeffding bound, in ``(0, 1)``.
    tau
        Tie threshold: split on the best candidate once the bound is below ``tau``.
    insert_prob
        Probability in ``(0, 1]`` that a row enters a full node reservoir (1: the paper).
    candidate_rows
        Size of the geometric reservoir of recent rows that supplies candidate thresholds.
    seed
        Seed of the sampler's CPU generator (``None``: drawn from the operating system).
    feature_groups
        ``{feature name: column indices}`` covering the ``d`` columns (e.g. the one-hot block
        of a categorical feature). A removed group is then drawn as a whole: the tree of the
        group's first column is walked as above, and the *whole block* is copied from the row
        whose value sits in the drawn slot of the reached node's reservoir (every node then also
        keeps the full rows of its values, ``d`` times the reservoir memory), so a block is
        always one that was seen. Groups must be wholly present or wholly absent in a mask.
    device
        Where the trees live; ``None``: the device of the first ``X`` passed to :meth:`update`.

    Examples
    --------
    ``x1`` is ``x0 > 0.5`` plus a little noise; the tree for ``x1`` splits on ``x0``, so a draw
    of ``x1`` given ``x0`` comes from the right regime, and a draw with ``x0`` removed too picks
    a side in proportion to the rows seen there (about half):

    >>> import torch
    >>> g = torch.Generator().manual_seed(0)
    >>> x0 = torch.rand(3000, generator=g, dtype=torch.float64)
    >>> X = torch.stack([x0, (x0 > 0.5) + 0.01 * torch.randn(3000, generator=g)], 1)
    >>> sampler = ConditionalTreeSampler(2, seed=0)
    >>> for start in range(0, 3000, 100):
    ...     sampler.update(X[start:start + 100])
    >>> tree = sampler.tree(1)  # its splits (feature, threshold): all on x0, around 0.5
    >>> [(f, round(t, 2)) for f, t in zip(tree["feature"], tree["threshold"]) if f >= 0]
    [(0, 0.54), (0, 0.5), (0, 0.47)]
    >>> rows = torch.tensor([[0.2, 9.0], [0.8, 9.0]], dtype=torch.float64)
    >>> given_x0 = torch.tensor([True, False])
    >>> (sampler.sample(rows, given_x0, n=4)[:, :, 1] > 0.5).int().tolist()
    [[0, 0, 0, 0], [1, 1, 1, 1]]
    >>> nothing = torch.tensor([False, False])
    >>> (sampler.sample(rows, nothing, n=2000)[:, :, 1] > 0.5).double().mean().item()
    0.513

    References
    ----------
    .. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an
       incremental version of SAGE for online explanation on data streams. *ECML PKDD 2023*,
       LNCS 14171, 428-445.
    """

    def __init__(
        self,
        n_features: int,
        *,
        max_depth: int = 5,
        leaf_reservoir_length: int = 10,
        grace_period: int = 200,
        n_thresholds: int = 16,
        delta: float = 1e-7,
        tau: float = 0.05,
        insert_prob: float = 1.0,
        candidate_rows: int = 500,
        seed: int | None = 0,
        device: torch.device | str | None = None,
        feature_groups: Mapping[str, Sequence[int]] | FeatureGroups | None = None,
    ) -> None:
        self.n_features = _int(n_features, "n_features", 1)
        self.max_depth = _int(max_depth, "max_depth", 1)
        if self.max_depth > 16:
            raise ValueError(f"max_depth must be at most 16 (heap-layout trees), got {max_depth}")
        self.leaf_reservoir_length = _int(leaf_reservoir_length, "leaf_reservoir_length", 1)
        self.grace_period = _int(grace_period, "grace_period", 1)
        self.n_thresholds = _int(n_thresholds, "n_thresholds", 1)
        self.delta = _real(delta, "delta", 0.0, 1.0, open_high=True)
        self.tau = _real(tau, "tau", 0.0, 1.0, open_high=False)
        self.insert_prob = _real(insert_prob, "insert_prob", 0.0, 1.0, open_high=False)
        self.candidate_rows = _int(candidate_rows, "candidate_rows", 1)
        self.generator = torch.Generator()
        if seed is None:
            self.generator.seed()
        else:
            try:
                value = None if isinstance(seed, bool) else operator.index(seed)
                if value is None:
                    raise TypeError
                self.generator.manual_seed(value)
            except (TypeError, ValueError, RuntimeError, OverflowError):
                raise ValueError(
                    f"seed must be None or an integer in [-2**63, 2**64), got {seed!r}"
                ) from None
        self.seed = self.generator.initial_seed()
        self._device_set = device is not None
        dev = torch.device(device) if device is not None else torch.device("cpu")
        recent_seed = int(torch.randint(0, 2**62, (1,), generator=self.generator))
        self.recent = GeometricReservoir(
            self.candidate_rows, self.n_features, seed=recent_seed, device=dev
        )
        self.trees = TreeBank(
            self.n_features,
            self.max_depth,
            self.n_thresholds,
            self.grace_period,
            self.delta,
            self.tau,
            device=dev,
        )
        n_nodes = self.trees.n_nodes
        #: Values of feature ``j`` stored at each node, ``[d, N, L]`` (first ``res_len`` valid).
        self.res_values = torch.zeros(
            self.n_features, n_nodes, self.leaf_reservoir_length, dtype=F64, device=dev
        )
        self.res_len = torch.zeros(self.n_features, n_nodes, dtype=torch.long, device=dev)
        self.n_seen = 0
        #: The validated groups (None: every column is drawn from its own tree).
        self.groups: FeatureGroups | None = (
            feature_groups if isinstance(feature_groups, FeatureGroups) or feature_groups is None
            else check_feature_groups(feature_groups, self.n_features)
        )
        if self.groups is not None and self.groups.column_group.numel() != self.n_features:
            raise ValueError(
                f"feature_groups cover {self.groups.column_group.numel()} columns, "
                f"n_features is {self.n_features}"
            )
        #: With groups: the full rows behind ``res_values``, ``[d, N, L, d]``.
        self.res_rows: torch.Tensor | None = None
        if self.groups is not None:
            self.res_rows = torch.zeros(
                *self.res_values.shape, self.n_features, dtype=F64, device=dev
            )
            lead = torch.tensor([members[0] for members in self.groups.members])
            self._lead = lead[self.groups.column_group]  # [d]: the first column of j's group

    # ------------------------------------------------------------------ basics
    @property
    def device(self) -> torch.device:
        return self.res_len.device

    def __len__(self) -> int:
        """Rows seen so far (0: nothing to sample from yet)."""
        return self.n_seen

    @property
    def dtype(self) -> torch.dtype:
        """Of the stored values and statistics: always float64 (samples take ``X``'s dtype)."""
        return F64

    def to(self, device: torch.device | str, dtype: torch.dtype | None = None) -> Self:
        """Move the trees and reservoirs to ``device`` (the generator stays on the CPU).
        ``dtype`` is accepted for the storage protocol and ignored: the values stay float64."""
        self.trees.to(device)
        self.recent.to(device)
        self.res_values, self.res_len = self.res_values.to(device), self.res_len.to(device)
        if self.res_rows is not None:
            self.res_rows = self.res_rows.to(device)
        self._device_set = True
        return self

    @property
    def n_leaves(self) -> torch.Tensor:
        """Number of leaves of each tree ``[d]``."""
        return self.trees.is_leaf().sum(1).cpu()

    def tree(self, j: int) -> dict[str, list[Any]]:
        """Tree ``j`` as plain lists over its nodes (heap indices ``node``; children of ``k`` are
        ``2k + 1`` for ``x <= threshold`` and ``2k + 2``): ``feature`` (-1: leaf), ``threshold``,
        ``visits``, ``depth`` and ``n_values`` (values in the node's reservoir)."""
        j = _int(j, "j", 0)
        if j >= self.n_features:
            raise ValueError(f"j must be < n_features={self.n_features}, got {j}")
        nodes = self.trees.active[j].nonzero().squeeze(1)
        return {
            "node": nodes.tolist(),
            "feature": self.trees.feature[j, nodes].tolist(),
            "threshold": self.trees.threshold[j, nodes].tolist(),
            "visits": self.trees.visits[j, nodes].tolist(),
            "depth": self.trees.depth(nodes).tolist(),
            "n_values": self.res_len[j, nodes].tolist(),
        }

    def _rows(self, X: Any, argument: str) -> torch.Tensor:
        if not isinstance(X, torch.Tensor):
            raise TypeError(f"{argument} must be a tensor [B, d], got {type(X).__name__}")
        if X.dim() != 2 or X.shape[1] != self.n_features or X.shape[0] < 1:
            raise ValueError(
                f"{argument} must have shape [B >= 1, n_features={self.n_features}], "
                f"got {list(X.shape)}"
            )
        if not X.is_floating_point():
            X = X.to(F64)
        if not bool(torch.isfinite(X).all()):
            bad = (~torch.isfinite(X)).nonzero()[0].tolist()
            raise ValueError(f"{argument} must be finite; row {bad[0]}, column {bad[1]} is not")
        return X

    # ------------------------------------------------------------------ update
    def update(self, X: torch.Tensor) -> None:
        """Learn from the rows ``X [B, d]`` (in time order; call after explaining them)."""
        X = self._rows(X, "X")
        if not self._device_set:
            self.to(X.device)
        Xd = X.detach().to(self.device, F64)
        trees = self.trees
        path = trees.route(Xd)  # [B, d, R + 1]
        levels = torch.arange(self.max_depth + 1, device=self.device)
        valid = trees.depth(path) == levels
        n_nodes = trees.n_nodes
        tree = torch.arange(self.n_features, device=self.device).view(1, -1, 1).expand_as(path)
        keys = (tree * n_nodes + path)[valid]  # row-major: time order within every node
        values = Xd.unsqueeze(-1).expand_as(path)[valid]
        row = torch.arange(X.shape[0], device=self.device).view(-1, 1, 1).expand_as(path)[valid]
        self._store(keys, values, Xd, row)
        trees.learn(Xd, path)
        self.recent.update(Xd)
        trees.set_candidates(self.recent.rows)
        self.n_seen += X.shape[0]

    def _store(
        self, keys: torch.Tensor, values: torch.Tensor, X: torch.Tensor, row: torch.Tensor
    ) -> None:
        """Geometric-reservoir update of the nodes ``keys`` (flat ``tree * N + node``, in time
        order per node) with ``values``: fill first, then each value enters with probability
        ``insert_prob`` and replaces a uniform slot; the last write to a slot wins. One uniform
        number per ``(row, node)`` pair, drawn in one call."""
        size, m = self.leaf_reservoir_length, keys.numel()
        u = torch.rand(m, dtype=F64, generator=self.generator).to(self.device)
        order = torch.sort(keys, stable=True).indices
        sorted_keys = keys[order]
        first = torch.searchsorted(sorted_keys, sorted_keys, right=False)
        rank = torch.empty_like(keys)
        rank[order] = torch.arange(m, device=self.device) - first
        lengths = self.res_len.view(-1)
        pos = lengths[keys] + rank
        q = self.insert_prob
        drawn = torch.floor(u / q * size).long().clamp_(max=size - 1)
        slot = torch.where(pos < size, pos, torch.where(u < q, drawn, -1))
        entered = (slot >= 0).nonzero().squeeze(1)
        flat = self.res_values.view(-1)
        if entered.numel():
            cell = keys[entered] * size + slot[entered]
            last = torch.full((flat.numel(),), -1, dtype=torch.long, device=self.device)
            last.scatter_reduce_(0, cell, entered, reduce="amax")
            written = (last >= 0).nonzero().squeeze(1)
            flat[written] = values[last[written]]
            if self.res_rows is not None:  # the full row of every stored value
                self.res_rows.view(-1, X.shape[1])[written] = X[row[last[written]]]
        counts = torch.bincount(keys, minlength=lengths.numel())
        lengths.copy_((lengths + counts).clamp_(max=size))

    # ------------------------------------------------------------------ sampling
    def _masks(self, X: torch.Tensor, present: Any, n: int) -> tuple[torch.Tensor, bool]:
        b, d = X.shape
        if not isinstance(present, torch.Tensor) or present.dtype != torch.bool:
            raise ValueError(
                f"present must be a bool tensor (True = feature known), got "
                f"{present.dtype if isinstance(present, torch.Tensor) else type(present).__name__}"
            )
        if present.dim() == 1 and present.shape[0] == d:
            present = present.expand(b, d)
        flat = present.dim() == 2
        if present.dim() not in (2, 3) or present.shape[0] != b or present.shape[-1] != d:
            raise ValueError(
                f"present must have shape [d={d}], [B={b}, d={d}] or [B={b}, R, d={d}], got "
                f"{list(present.shape)}"
            )
        mask = present.unsqueeze(1) if flat else present
        return mask.to(self.device).repeat_interleave(n, dim=1), flat

    def _draw(self, X: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(node, value)`` ``[B, K, d]`` for every feature (used where ``mask`` is False)."""
        if self.n_seen == 0:
            raise ValueError("ConditionalTreeSampler is empty: update it before sampling")
        b, k, d = mask.shape
        u = torch.rand(b, k, d, self.max_depth + 1, dtype=F64, generator=self.generator)
        u = u.to(self.device)
        Xd = X.detach().to(self.device, F64)
        node = self.trees.walk(Xd, mask, u)
        tree = torch.arange(d, device=self.device).expand(b, k, d)
        for _ in range(self.max_depth):  # nearest ancestor with data
            empty = (self.res_len[tree, node] == 0) & (node > 0)
            node = torch.where(empty, (node - 1) // 2, node)
        length = self.res_len[tree, node]
        slot = torch.floor(u[..., -1] * length).long().clamp(max=self.leaf_reservoir_length - 1)
        if self.res_rows is not None:  # a group's block: one stored row of its first column
            lead = self._lead.to(self.device).expand(b, k, d)
            lead_node, lead_slot = node.gather(2, lead), slot.gather(2, lead)
            column = torch.arange(d, device=self.device).expand(b, k, d)
            return lead_node, self.res_rows[lead, lead_node, lead_slot, column]
        return node, self.res_values[tree, node, slot]

    def sample(self, X: torch.Tensor, present: torch.Tensor, n: int = 1) -> torch.Tensor:
        """``n`` draws per row (and mask): the features with ``present`` True are taken from
        ``X``, every other feature ``j`` is drawn from tree ``j`` given the present ones.

        ``X``: ``[B, d]``; ``present``: bool ``[d]`` (the same for every row) or ``[B, d]``
        (result ``[B, n, d]``), or ``[B, R, d]`` (result ``[B, R, n, d]``). The result has
        ``X``'s device and dtype."""
        X = self._rows(X, "X")
        n = _int(n, "n", 1)
        mask, flat = self._masks(X, present, n)
        _, values = self._draw(X, mask)
        out = torch.where(mask, X.detach().to(self.device, F64).unsqueeze(1), values)
        out = out.to(device=X.device, dtype=X.dtype)
        b, d = X.shape
        return out if flat else out.view(b, -1, n, d)

    def traverse(self, X: torch.Tensor, present: torch.Tensor) -> torch.Tensor:
        """The node (heap index) whose reservoir a draw of each removed feature comes from,
        ``[B, d]`` or ``[B, R, d]`` like ``present`` (-1 for present features); consumes the
        same random numbers as :meth:`sample` with ``n = 1``."""
        X = self._rows(X, "X")
        mask, flat = self._masks(X, present, 1)
        node, _ = self._draw(X, mask)
        node = torch.where(mask, -1, node).to(X.device)
        return node.squeeze(1) if flat else node

    def impute(self, x: torch.Tensor, mask: torch.Tensor, storage: Any = None) -> torch.Tensor:
        """The imputer protocol of the explainers: rows ``[B, R, d]`` equal to ``x`` where
        ``mask [B, R, d]`` is True, conditional draws elsewhere (one per ``(b, r)``).
        ``storage`` is ignored (the sampler is its own storage)."""
        x = self._rows(x, "x")
        if not isinstance(mask, torch.Tensor) or mask.dim() != 3:
            raise ValueError(f"mask must have shape [B, R, d], got {getattr(mask, 'shape', mask)}")
        b, r, d = mask.shape
        return self.sample(x, mask, 1).view(b, r, d)

    # ------------------------------------------------------------------ state
    def _config(self) -> dict[str, object]:
        return {
            "kind": type(self).__name__,
            "n_features": self.n_features,
            "max_depth": self.max_depth,
            "leaf_reservoir_length": self.leaf_reservoir_length,
            "grace_period": self.grace_period,
            "n_thresholds": self.n_thresholds,
            "delta": self.delta,
            "tau": self.tau,
            "insert_prob": self.insert_prob,
            "candidate_rows": self.candidate_rows,
            **({} if self.groups is None
               else {"feature_groups": [list(m) for m in self.groups.members]}),
        }

    def state_dict(self) -> dict[str, object]:
        """Settings, trees, reservoirs, counters and generator states (exact resume)."""
        return {
            **self._config(),
            "trees": self.trees.state_dict(),
            "res_values": self.res_values.clone(),
            "res_len": self.res_len.clone(),
            "recent": self.recent.state_dict(),
            "n_seen": self.n_seen,
            **({} if self.res_rows is None else {"res_rows": self.res_rows.clone()}),
            "seed": self.seed,
            "generator": self.generator.get_state(),
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_settings(state, self._config(), "sampler")
        self.trees.load_state_dict(state["trees"])
        self.res_values = torch.as_tensor(state["res_values"]).to(self.device, F64).clone()
        self.res_len = torch.as_tensor(state["res_len"]).to(self.device, torch.long).clone()
        self.recent.load_state_dict(state["recent"])
        self.n_seen = int(state["n_seen"])
        if self.res_rows is not None:
            self.res_rows = torch.as_tensor(state["res_rows"]).to(self.device, F64).clone()
        self.seed = int(state["seed"])
        self.generator.set_state(torch.as_tensor(state["generator"]).cpu().clone())

    def __repr__(self) -> str:
        return (
            f"ConditionalTreeSampler(n_features={self.n_features}, max_depth={self.max_depth}, "
            f"leaf_reservoir_length={self.leaf_reservoir_length}, n_seen={self.n_seen}, "
            f"n_leaves={self.n_leaves.tolist()})"
        )
