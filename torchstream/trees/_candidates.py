"""The bounded store of split candidates of one Dynamic Model Tree node (paper §V-D).

A candidate is a (feature, value) pair: a numeric feature sends ``x_j <= v`` left, a categorical
one sends ``x_j == v`` left. For every stored candidate the node keeps cumulative
sums per side (left, right): row count, log-likelihood and gradient of the log-likelihood of the
node model, each row's term taken with the parameters in effect after the update of its batch.
The tree may fade them (:meth:`CandidateStore.fade`, its ``loss_window`` / ``candidate_window``);
otherwise they are never decayed, as in the paper.

Per batch (vectorised over candidates, one mask ``[n, K]`` and one matrix product):

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
from collections.abc import Mapping

import torch

from torchstream.trees._gains import candidate_gain

__all__ = ["CandidateStore"]

_FIELDS = ("feat", "val", "cnt", "ll", "grad", "gain", "score")


def left_masks(
    X: torch.Tensor, feat: torch.Tensor, val: torch.Tensor, categorical: torch.Tensor
) -> torch.Tensor:
    """``[n, K]`` booleans: does row ``i`` go left for candidate ``k``?"""
    xv = X[:, feat]
    return torch.where(categorical[feat], xv == val, xv <= val)


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
    @staticmethod
    def _side_stats(
        M: torch.Tensor, ll: torch.Tensor, G: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        Mf = M.to(G.dtype)
        cnt_l = Mf.sum(0)
        ll_l = Mf.T @ ll
        g_l = Mf.T @ G
        cnt = torch.stack([cnt_l, M.shape[0] - cnt_l], 1)
        lls = torch.stack([ll_l, ll.sum() - ll_l], 1)
        grads = torch.stack([g_l, G.sum(0, keepdim=True) - g_l], 1)
        return cnt, lls, grads

    def update(
        self,
        X: torch.Tensor,
        ll: torch.Tensor,
        G: torch.Tensor,
        categorical: torch.Tensor,
        *,
        lr: float,
        capacity: int,
        p_replaceable: float,
    ) -> None:
        """Add one batch of the node's rows: ``X [n, m]`` (float64), per-row log-likelihoods
        ``ll [n]`` and gradients ``G [n, P]``; ``categorical [m]`` flags the equality features."""
        if len(self):
            cnt, lls, grads = self._side_stats(
                left_masks(X, self.feat, self.val, categorical), ll, G
            )
            self.cnt += cnt
            self.ll += lls
            self.grad += grads
        self.gain, self.score = self._gains(self.grad, self.cnt, lr)
        if capacity <= 0:
            return
        # new candidates of this batch
        keys = torch.where(categorical, X, torch.round(X * 100) / 100)
        uniq = [torch.unique(keys[:, j]) for j in range(X.shape[1])]  # a loop over features
        feat = torch.cat(
            [
                torch.full((u.numel(),), j, dtype=torch.long, device=X.device)
                for j, u in enumerate(uniq)
            ]
        )
        val = torch.cat(uniq)
        if len(self):
            stored = (feat[:, None] == self.feat[None]) & (val[:, None] == self.val[None])
            keep = ~stored.any(1)
            feat, val = feat[keep], val[keep]
        if feat.numel() == 0:
            return
        cnt, lls, grads = self._side_stats(left_masks(X, feat, val, categorical), ll, G)
        gain, score = self._gains(grads, cnt, lr)
        valid = torch.isfinite(gain)
        order = torch.sort(score[valid], descending=True, stable=True).indices
        new = {
            "feat": feat[valid][order],
            "val": val[valid][order],
            "cnt": cnt[valid][order],
            "ll": lls[valid][order],
            "grad": grads[valid][order],
            "gain": gain[valid][order],
            "score": score[valid][order],
        }
        n_new = int(new["feat"].shape[0])
        if n_new == 0:
            return
        free = capacity - len(self)
        if free > 0:
            self._append({k: v[:free] for k, v in new.items()})
            new = {k: v[free:] for k, v in new.items()}
            n_new -= min(free, n_new)
        if n_new == 0:
            return
        n_repl = min(math.ceil(capacity * p_replaceable), len(self))
        if n_repl == 0:
            return
        slots = torch.sort(self.score, stable=True).indices[:n_repl]  # the worst stored
        pool = torch.cat([self.score[slots], new["score"]])
        best = torch.sort(pool, descending=True, stable=True).indices[:n_repl]
        for name in _FIELDS:
            t = getattr(self, name)
            t[slots] = torch.cat([t[slots], new[name]])[best]

    def _append(self, new: Mapping[str, torch.Tensor]) -> None:
        for name in _FIELDS:
            setattr(self, name, torch.cat([getattr(self, name), new[name]]))

    @staticmethod
    def _gains(
        grad: torch.Tensor, cnt: torch.Tensor, lr: float
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Paper gains and ranking scores (gain minus the no-split term, see module doc)."""
        gain = candidate_gain(grad[:, 0], grad[:, 1], cnt[:, 0], cnt[:, 1], lr)
        whole = (
            lr * grad.sum(1).square().sum(-1) / cnt.sum(1).clamp_min(torch.finfo(cnt.dtype).tiny)
        )
        return gain, gain - whole

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
