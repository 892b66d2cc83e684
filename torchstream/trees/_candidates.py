"""The bounded store of split candidates of one Dynamic Model Tree node (paper §V-D).

A candidate is a (feature, value) pair: a numeric feature sends ``x_j <= v`` left, a categorical
one sends ``x_j == v`` left. For every stored candidate the node keeps cumulative
sums per side (left, right): row count, log-likelihood and gradient of the log-likelihood of the
node model, each row's term taken with the parameters in effect after the update of its batch.
The tree may fade them (:meth:`CandidateStore.fade`, its ``loss_window`` / ``candidate_window``);
otherwise they are never decayed, as in the paper.

Per batch, for all the nodes the batch reaches at once (:func:`update_stores`: vectorised over
the candidates of all the nodes; per node only its new values, its mask ``[n, K]`` and its matrix
products):

1. add the batch to the statistics of every stored candidate;
2. build the new candidates of the batch: the unique values of every numeric feature rounded to
   2 decimals, the unique raw values of every categorical feature, without those already stored
   and without those that leave a side empty; score them on the batch alone;
3. fill free slots with the best new candidates; then the worst ``ceil(K p)`` stored candidates
   are replaceable and the best of (replaceable + remaining new) keep those slots. The reference
   code lets the new candidates, in turn, replace the best replaceable candidate worse than
   themselves; keeping the best of the pool is the same rule without its dependence on the order
   in which new candidates are visited.

Ranking [own choice]: the paper's gain ``lr (||g_C||^2 / n_C + ||g_notC||^2 / n_notC)`` always
contains ``lr ||g_C + g_notC||^2 / (n_C + n_notC)``, the gain of one more step of the node model
itself, without any split. Summed over a candidate's lifetime it carries the node model's misfit
from the time the candidate entered, so early entrants outrank later ones whatever their split is
worth. Candidates are therefore ranked (kept, replaced and chosen) by the *score* = gain minus
that term, ``lr n_C n_notC / n ||g_C / n_C - g_notC / n_notC||^2`` (a score test of the
difference between the sides). The AIC test of the chosen candidate uses the paper's gain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from torchstream.trees._gains import candidate_gains_and_scores

__all__ = ["CandidateStore", "update_stores"]

_FIELDS = ("feat", "val", "cnt", "ll", "grad", "gain", "score")


def left_masks(
    X: torch.Tensor, feat: torch.Tensor, val: torch.Tensor, categorical: torch.Tensor | None
) -> torch.Tensor:
    """``[n, K]`` booleans: does row ``i`` go left for candidate ``k``? (``categorical``:
    ``[m]`` flags of the equality features, ``None`` when there are none). The columns are
    gathered as rows of ``X.T`` (contiguous), which is faster; the result is its transpose."""
    xv = X.T.contiguous().index_select(0, feat)  # [K, n]
    v = val[:, None]
    if categorical is None:
        return (xv <= v).T
    return torch.where(categorical[feat][:, None], xv == v, xv <= v).T


class CandidateStore:
    """Up to ``capacity`` split candidates of one node with their per-side statistics."""

    def __init__(self, n_params: int, device: torch.device | str = "cpu") -> None:
        f64 = {"dtype": torch.float64, "device": device}
        self.feat = torch.zeros(0, dtype=torch.long, device=device)
        self.val = torch.zeros(0, **f64)
        self.cnt = torch.zeros(0, 2, **f64)
        self.ll = torch.zeros(0, 2, **f64)
        self.grad = torch.zeros(0, 2, n_params, **f64)
        self.gain = torch.zeros(0, **f64)
        self.score = torch.zeros(0, **f64)

    def __len__(self) -> int:
        return int(self.feat.shape[0])

    # ------------------------------------------------------------------ update
    def update(
        self,
        X: torch.Tensor,
        ll: torch.Tensor,
        G: torch.Tensor,
        categorical: torch.Tensor | None,
        *,
        lr: float,
        capacity: int,
        p_replaceable: float,
    ) -> None:
        """Add one batch of the node's rows (:func:`update_stores` for one node)."""
        update_stores(
            [self], X, ll, G, [X.shape[0]], categorical,
            lr=lr, capacity=capacity, p_replaceable=p_replaceable,
        )  # fmt: skip

    def fade(self, loss_factor: float, stat_factor: float) -> None:
        """Multiply the log-likelihood sums by ``loss_factor`` and the counts and gradient sums
        by ``stat_factor`` (exponential forgetting); the gains and scores scale exactly with
        ``stat_factor`` (``||f g||^2 / (f n) = f ||g||^2 / n``)."""
        self.ll *= loss_factor
        self.cnt *= stat_factor
        self.grad *= stat_factor
        self.gain *= stat_factor
        self.score *= stat_factor

    # ------------------------------------------------------------------ queries
    def best(self) -> int | None:
        """Index of the stored candidate with the largest gain (``None`` if there is none)."""
        if not len(self) or not bool(torch.isfinite(self.score).any()):
            return None
        return int(torch.argmax(self.score))

    def pad(
        self, n_features_before: int, add_features: int, classes_before: int, add_classes: int
    ) -> None:
        """Grow the gradient sums for new features / classes (zeros: those weights had zero
        gradient while the feature was absent, i.e. 0, or the class column did not exist)."""
        K = len(self)
        g = self.grad.reshape(K, 2, n_features_before + 1, classes_before)
        g = torch.nn.functional.pad(g, (0, add_classes, 0, add_features))
        self.grad = g.reshape(
            K, 2, (n_features_before + add_features + 1) * (classes_before + add_classes)
        )

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, object]:
        return {k: getattr(self, k).clone() for k in _FIELDS}

    @classmethod
    def from_state(cls, state: Mapping[str, torch.Tensor], device: torch.device) -> CandidateStore:
        store = cls(0, device)
        for k, v in state.items():
            setattr(store, k, v.to(device).clone())
        return store


def update_stores(
    stores: Sequence[CandidateStore],
    X: torch.Tensor,
    ll: torch.Tensor,
    G: torch.Tensor,
    counts: Sequence[int],
    categorical: torch.Tensor | None,
    *,
    lr: float,
    capacity: int,
    p_replaceable: float,
) -> None:
    """Add one batch to the stores of several nodes at once: ``X [n, m]`` (float64), per-row
    log-likelihoods ``ll [n]`` and gradients ``G [n, P]``, the rows grouped by node, the first
    ``counts[0]`` for ``stores[0]`` and so on; ``categorical [m]`` flags the equality features
    (``None``: there are none).

    The stored candidates of a node (first) and its new ones are scored together. The new
    values, the masks and their products are computed node by node (a BLAS product's rounding
    may depend on its shape, so every sum is the product of one node's rows and either its
    stored or its new candidates, exactly as for a node alone); the statistics, gains, scores
    and the stores' new contents are one set of tensor operations for all the nodes, and only
    the choice of the survivors loops over the nodes again."""
    dev = X.device
    K = [len(s) for s in stores]
    counts = list(counts)
    Xs, lls, Gs = (t.split_with_sizes(counts) for t in (X, ll, G))
    feats: list[torch.Tensor] = []
    vals: list[torch.Tensor] = []
    cnts_l: list[torch.Tensor] = []
    lls_l: list[torch.Tensor] = []
    gs_l: list[torch.Tensor] = []
    n_new: list[int] = []
    for i, store in enumerate(stores):
        f, v = store.feat, store.val
        if capacity > 0:
            new_f, new_v = _new_candidates(store, Xs[i], categorical)
            f, v = torch.cat([f, new_f]), torch.cat([v, new_v])
        feats.append(f)
        vals.append(v)
        n_new.append(int(f.shape[0]) - K[i])
        Mf = left_masks(Xs[i], f, v, categorical).to(
            torch.float64, memory_format=torch.contiguous_format
        )
        cnts_l.append(Mf.sum(0))
        lls_l.append(Mf.T @ lls[i])
        parts = [Mf[:, : K[i]], Mf[:, K[i] :]] if 0 < K[i] < Mf.shape[1] else [Mf]
        gs_l += [part.T @ Gs[i] for part in parts]
    sizes = [k + n for k, n in zip(K, n_new)]
    rep = torch.tensor(sizes, device=dev)
    n_tot = torch.tensor(counts, dtype=torch.float64, device=dev).repeat_interleave(rep)
    ll_tot = torch.stack([x.sum() for x in lls]).repeat_interleave(rep)
    g_tot = torch.cat([g.sum(0, keepdim=True) for g in Gs]).repeat_interleave(rep, 0)
    cnt_l, ll_l, g_l = torch.cat(cnts_l), torch.cat(lls_l), torch.cat(gs_l)
    cnt = torch.stack([cnt_l, n_tot - cnt_l], 1)
    lls_ = torch.stack([ll_l, ll_tot - ll_l], 1)
    grads = torch.stack([g_l, g_tot - g_l], 1)
    starts = [sum(sizes[:i]) for i in range(len(sizes))]
    for start, k, store in zip(starts, K, stores):  # the stored ones' cumulative statistics
        if k:
            cnt[start : start + k] += store.cnt
            lls_[start : start + k] += store.ll
            grads[start : start + k] += store.grad
    gain, score = candidate_gains_and_scores(grads, cnt, lr)
    keep = [
        _survivors(g, s, k, capacity, p_replaceable)
        for g, s, k in zip(gain.split_with_sizes(sizes), score.split_with_sizes(sizes), K)
    ]
    index = torch.cat(
        [
            torch.arange(start, start + k, device=dev) if kp is None else kp + start
            for start, k, kp in zip(starts, K, keep)
        ]
    )
    kept = [k if kp is None else int(kp.shape[0]) for k, kp in zip(K, keep)]
    full = {"feat": torch.cat(feats), "val": torch.cat(vals), "cnt": cnt, "ll": lls_,
            "grad": grads, "gain": gain, "score": score}  # fmt: skip
    for name in _FIELDS:
        for store, t in zip(stores, full[name].index_select(0, index).split_with_sizes(kept)):
            setattr(store, name, t)


def _new_candidates(
    store: CandidateStore, X: torch.Tensor, categorical: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch's candidates of a node not yet in its store, feature by feature in increasing
    value: the unique 2-decimal roundings of the numeric features, the unique raw values of the
    categorical ones (one sort of all columns)."""
    keys = torch.round(X * 100) / 100
    if categorical is not None:
        keys = torch.where(categorical, X, keys)
    v = keys.T.sort(dim=1).values  # [m, n]
    first = torch.ones_like(v, dtype=torch.bool)
    first[:, 1:] = v[:, 1:] != v[:, :-1]
    feat, val = first.nonzero()[:, 0], v[first]
    if len(store):
        stored = (feat[:, None] == store.feat) & (val[:, None] == store.val)
        new = ~stored.any(1)
        feat, val = feat[new], val[new]
    return feat, val


def _survivors(
    gain: torch.Tensor, score: torch.Tensor, K: int, capacity: int, p_replaceable: float
) -> torch.Tensor | None:
    """Indices into one node's stored (first ``K``) and new candidates of its store after this
    batch: free slots take the best new candidates; then the worst ``ceil(K p)`` stored ones
    and the remaining new ones compete for the slots of the former, the best keep them.
    ``None``: the stored ones, unchanged (no new candidate that splits the rows)."""
    valid = torch.isfinite(gain[K:])
    n_valid = int(valid.sum())
    if n_valid == 0:
        return None
    # the valid new candidates, best first (a stable sort keeps ties in their order)
    ranked = torch.sort(score[K:].masked_fill(~valid, -math.inf), descending=True, stable=True)
    new = ranked.indices[:n_valid] + K
    keep = torch.arange(K, device=score.device)
    free = capacity - K
    if free > 0:
        keep, new = torch.cat([keep, new[:free]]), new[free:]
    n_repl = min(math.ceil(capacity * p_replaceable), keep.numel())
    if new.numel() and n_repl:
        slots = torch.sort(score[keep], stable=True).indices[:n_repl]  # the worst stored
        pool = torch.cat([keep[slots], new])
        best = torch.sort(score[pool], descending=True, stable=True).indices[:n_repl]
        keep[slots] = pool[best]
    return keep
