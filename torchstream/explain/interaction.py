"""Incremental pairwise SAGE interactions: which features act *together* on a stream.

SAGE (:mod:`torchstream.explain.isage`) gives every feature its share of the loss reduction
of the game ``v(S) = E[l(f_{})] - E[l(f_S(X), Y)]``, ``f_S`` the model with the features
outside ``S`` removed. The order-2 Shapley interaction index (SII, Grabisch & Roubens 1999) of a
pair ``{i, j}`` in that game is the weighted mean of its discrete second derivative,

    SII_ij = sum_{T in N \\ {i, j}} |T|! (d - |T| - 2)! / (d - 1)!  D_ij(T),
    D_ij(T) = v(T + i + j) - v(T + i) - v(T + j) + v(T)
            = l(T + i) + l(T + j) - l(T) - l(T + i + j)   (l(S): expected loss of f_S),

positive where the pair reduces the loss by more than its two features do on their own (the
model uses ``x_i * x_j``), negative where they carry the same information. The weights are a
distribution over ``T``: the predecessors of ``i`` in a uniformly random order of the players
other than ``j``. :class:`IncrementalInteraction` estimates the SII of chosen pairs on the
stream from the same coalition chain as iSAGE (and iSAGE's values beside them), with iSAGE's
removal, storage, smoothing and bounds.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import torch

from torchstream.base import ExplainerBase, PluginBase
from torchstream.checkpoint import check_settings
from torchstream.devices import to_device
from torchstream.explain._base import _acc_dtype, check_positive_int
from torchstream.explain.isage import IncrementalSAGE
from torchstream.losses import LossFn
from torchstream.typing import BatchView, Imputer, ModelFn, Sampler, Storage

__all__ = ["IncrementalInteraction"]

#: Named losses the variance correction applies to (the squared error, summed over classes).
_SQUARED_LOSSES = ("mse", "squared")


class _PairChain(IncrementalSAGE):
    """iSAGE's explainer (removal, storage, checks, smoothing of the SAGE values) whose batch
    also evaluates the two toggled coalitions of every chosen pair, in the same model call.

    Before a batch the owner sets :attr:`pair_a`, :attr:`pair_c` (the pairs ``a < c``, ``[P]``
    player indices, ``a`` the anchor); after it :attr:`pair_delta` holds the pairs' per-row
    second derivatives ``[B, P]`` (None when the batch was only stored)."""

    name = "interactions"

    def __init__(self, *args: Any, variance_correction: bool, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.variance_correction = variance_correction
        self.pair_a = torch.zeros(0, dtype=torch.long)
        self.pair_c = torch.zeros(0, dtype=torch.long)
        self.pair_delta: torch.Tensor | None = None

    def _contributions(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> torch.Tensor:
        """The SAGE values' ``delta [B, p]`` along one permutation per row (as iSAGE with the
        imputed empty prediction) and, into :attr:`pair_delta`, the pairs' ``D [B, P]``.

        Model input, group-major ``[1 + R, B, d]``: the batch, the chain ``C_0 .. C_{p-1}``
        (``C_t``: the players of rank ``< t``) with ``m`` imputed rows each, then for every
        pair ``(a, c)`` the chain coalitions ``C_r`` and ``C_{r+1}`` (``r`` the rank of ``a``)
        with ``c`` toggled, ``m`` rows each."""
        b, d = X.shape
        p = self.n_explained_features
        m = self.n_samples
        a_idx = self.pair_a.to(X.device)
        c_idx = self.pair_c.to(X.device)
        n_pairs = a_idx.shape[0]
        sizes, positions = self._plan(b, X)  # sizes 0..p-1, each m times
        u = to_device(torch.rand(b, p, generator=self.generator), X.device)
        perm = u.argsort(dim=1, stable=True)
        rank = torch.empty_like(perm).scatter_(1, perm, positions)  # [B, p]
        rank3 = rank.unsqueeze(1)  # [B, 1, p]
        chain = rank3 < sizes.view(1, -1, 1)  # [B, p m, p]
        masks = [chain]
        r = rank[:, a_idx]  # [B, P]: the anchor's rank
        if n_pairs:
            toggle = torch.nn.functional.one_hot(c_idx, p).bool().unsqueeze(0)  # [1, P, p]
            r3 = r.unsqueeze(2)  # [B, P, 1]
            extra = torch.stack([(rank3 < r3) ^ toggle, (rank3 <= r3) ^ toggle], 1)
            masks.append(extra.unsqueeze(3).expand(b, 2, n_pairs, m, p).reshape(b, -1, p))
        present = torch.cat(masks, 1)  # [B, R, p]
        if self.groups is not None:  # every column as its group: present or absent as a whole
            present = present[..., self.groups.column_group.to(present.device)]
        rows = present.shape[1]
        if self._pending is not None:  # a sampler checks and reads x itself: the batch first
            self._resolve_pending([])
        with torch.no_grad():
            imputed = self.imputer.impute(X, present, self.storage)
            if imputed.shape != (b, rows, d):
                raise ValueError(
                    f"imputer returned {list(imputed.shape)}, expected [{b}, {rows}, {d}]"
                )
            Z = torch.cat([X.unsqueeze(0), imputed.to(X.dtype).transpose(0, 1)])
            out = self._forward(model_fn, Z.reshape((1 + rows) * b, d))
        self._check_output(out, y)
        acc = _acc_dtype(out.device)
        k_shape = tuple(out.shape[1:])
        out = out.view(1 + rows, b, *k_shape).to(acc)
        y_full = out[0]
        losses = self._coalition_losses(out[1:].view(-1, m, b, *k_shape), y, acc)  # [p + 2P, B]
        chain_losses = torch.cat([losses[:p], self._group_loss(y_full.unsqueeze(0), y, acc)])
        by_position = chain_losses[:-1] - chain_losses[1:]  # [p, B]
        delta = by_position.t().gather(1, rank)  # delta[b, j] = by_position[rank[b, j], b]
        if n_pairs:
            by_row = chain_losses.t()  # [B, p + 1]: l(C_t) of row b
            a0, a1 = by_row.gather(1, r), by_row.gather(1, r + 1)
            e0, e1 = losses[p:].view(2, n_pairs, b).transpose(1, 2)  # [B, P] each
            sign = torch.where(rank[:, c_idx] > r, 1.0, -1.0).to(acc)
            self.pair_delta = sign * (a1 - a0 - e1 + e0)
        else:
            self.pair_delta = torch.zeros(b, 0, dtype=acc, device=out.device)
        return delta

    def _coalition_losses(self, out: torch.Tensor, y: torch.Tensor, dtype: torch.dtype
                          ) -> torch.Tensor:
        """``[G, B]``: the loss of each coalition's mean prediction over its ``m`` imputed rows
        (``out [G, m, B, *k]``); with the variance correction minus the sample variance of the
        ``m`` predictions over ``m`` (summed over classes), so that it estimates the loss of the
        *expected* prediction without bias."""
        m = out.shape[1]
        mean = out[:, 0] if m == 1 else out.mean(1)
        losses = self._group_loss(mean, y, dtype)
        if self.variance_correction:
            spread = out.var(1, correction=1) / m  # [G, B, *k]
            if spread.dim() == 3:
                spread = spread.sum(2)
            losses = losses - spread
        return losses


class IncrementalInteraction(ExplainerBase, PluginBase):
    r"""Incremental pairwise SAGE interactions: the order-2 Shapley interaction index (SII) of
    the SAGE game, estimated on a stream, for the pairs among the ``top_k`` features by running
    SAGE values (estimated alongside) or for all pairs.

    Algorithm (one call of :meth:`explain` with a batch of ``B`` rows, ``p`` players: the
    features, or the groups of ``feature_groups``)::

        K = top_k players by the running SAGE values phi, or all (pairs among K: a < c)
        for b in 1..B:                                   # all rows of the batch at once
            pi   = random permutation of the p players;  C_t = first t players of pi
            l[t] = l(mean_{k=1..m} f(x_b on C_t, x~_k off C_t), y_b)   t = 0..p-1
            l[p] = l(f(x_b), y_b)
            delta[b, pi_t] = l[t - 1] - l[t]             # iSAGE, imputed empty prediction
            for each pair (a, c) in K:                   # r = position of a in pi
                e0 = l(C_r  xor {c}),  e1 = l(C_{r+1} xor {c})        # m imputed rows each
                s  = +1 if c comes after a in pi else -1
                D[b, (a, c)] = s (l[r + 1] - l[r] - e1 + e0)
        phi       <- EMA of delta[1..B]                  # as iSAGE
        SII[a, c] <- EMA of D[1..B, (a, c)] over the rows on which (a, c) was explained
        storage.update(x_1..x_B)                         # after explaining

    ``T = C_r \ {c}`` is the set of the players before ``a`` among all but ``c``: uniformly
    random in size ``0..p-2`` and uniform given its size, which are exactly the SII weights;
    two of the four coalitions of ``D`` come from the chain, so a batch costs ``B (1 + p m +
    2 P m)`` model evaluations (``P`` pairs), in one call to ``model_fn`` (or in chunks of
    ``chunk_size`` rows), under ``torch.no_grad()``. The imputed rows of the batch are built at
    once (``B (p + 2 P) m`` rows of ``d`` values; iSAGE builds its own chunk by chunk).

    **Which game.** Like iSAGE with ``empty_prediction="imputed"``, the loss of a coalition
    is that of the mean of ``m`` imputed predictions, so with finite ``m`` it estimates the
    game ``nu_m``; for squared loss ``nu_m(S) = nu(S) + (W({}) - W(S)) / m``, ``W(S) = E
    Var(f(X_S, X~_{not S}))``, and the interaction it estimates is ``SII(nu) - SII(W) / m``. If
    ``E[Y | X] = f(X)`` and the features are independent, ``W(S) = Var f(X) - nu(S)`` and every
    value (SII and SAGE) is ``(1 + 1/m)`` times SAGE's: **twice** it with the default ``m = 1``.
    A pair with a player the model ignores has expectation exactly 0 for any loss and feature
    distribution. With ``variance_correction=True`` (squared loss, ``m >= 2``) every coalition's
    loss is corrected by the sample variance of its ``m`` predictions, an unbiased estimate of
    the loss of the averaged prediction: the estimates are then SAGE's game itself (values and
    interactions), for any feature dependence, at ``m`` times the imputed rows.

    **Smoothing and bounds.** The SAGE values are iSAGE's (:attr:`importance`,
    :meth:`half_width`). A pair's estimate is the ratio of two EMAs with iSAGE's ``alpha`` (in
    row time, decayed also on the rows where the pair was not explained): of its ``D`` on the
    rows it was explained, and of the indicator of those rows. For a pair explained on every
    row this is iSAGE's debiased EMA; a pair that leaves ``K`` and comes back keeps its older
    rows at their (decayed) weights. :meth:`interaction_half_width` is the Chebyshev half-width
    of that weighted mean, ``sqrt(s^2 sum_t w_t^2 / (sum_t w_t)^2 / delta)``, ``s^2`` the
    weighted variance of the pair's ``D`` (``sum w^2 / (sum w)^2 -> alpha / (2 - alpha)``, as
    in iSAGE's bound): with probability ``>= 1 - delta`` the estimate is within it of its
    *expectation* if the ``D`` are independent. The expectation is the SII of the estimated
    game, ``nu_m`` above, not SAGE's (the bound does not cover that bias; the variance
    correction removes it), and of the imputation distribution: the storage's rows (a
    reservoir of ``L`` rows adds an ``O(1 / L)`` bias that no bound covers).

    **Pairs.** With ``top_k`` (default 5) the pairs are those among the ``top_k`` players with
    the largest SAGE values *before* the batch (ties to the lower column), chosen again for
    every batch, so a pair is explained while both its features rank high. The first explained
    batch only starts the SAGE values (no pair is explained on it) unless ``top_k >= p`` or
    ``top_k=None`` (all ``p (p - 1) / 2`` pairs from the first explained batch). The first
    batch that meets an empty storage is only stored.

    Parameters
    ----------
    model_fn
        The model as a :data:`~torchstream.typing.ModelFn` (``[n, d] -> [n]`` values or
        ``[n, k]`` class probabilities); ``None`` for a plug-in that explains ``batch.learner``.
    loss
        A name from :data:`torchstream.losses.LOSSES` or a per-row loss ``(y_pred, y) -> [B]``.
    n_features
        ``d``, the width of ``X``.
    top_k
        Pairs among the ``top_k >= 2`` highest-ranked players by running SAGE value; None: all
        pairs.
    alpha
        Smoothing factor in ``(0, 1]`` of the SAGE values and the interactions.
    removal, imputer, storage, storage_size, n_samples, feature_names, chunk_size, seed
        As for :class:`~torchstream.explain.isage.IncrementalSAGE` (``n_samples`` is ``m``);
        the permutations and the imputations come from its generators, and a custom imputer
        gets masks that are not prefixes of one permutation (every pair's toggled coalitions).
    variance_correction
        Subtract ``Var_m / m`` from each coalition's loss (squared-error loss ``"mse"`` /
        ``"squared"`` and ``n_samples >= 2`` only): estimate SAGE's game itself.
    feature_groups
        ``{feature name: encoded column indices}``: every group is one player (removed,
        ranked and paired as a whole); :attr:`interaction` is ``[G, G]``.

    Examples
    --------
    ``f(x) = x0 x1 + x2`` with independent standard normal features and squared loss: SAGE's
    game has SII(x0, x1) = 1, the other pairs 0 and SAGE values (0.5, 0.5, 1). With the
    default single imputation every value doubles; with two imputations and the variance
    correction the estimates are SAGE's (one run each, then the half-width of SII(x0, x1) at
    ``delta = 0.05``):

    >>> import torch
    >>> from torchstream.explain.interaction import IncrementalInteraction
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(30000, 3, generator=g, dtype=torch.float64)
    >>> f = lambda Z: Z[:, 0] * Z[:, 1] + Z[:, 2]
    >>> y = f(X)
    >>> for m, correct in ((1, False), (2, True)):
    ...     inter = IncrementalInteraction(f, "mse", 3, alpha=0.0005, n_samples=m,
    ...                                    variance_correction=correct, storage_size=500)
    ...     for start in range(0, 30000, 300):
    ...         inter.explain(X[start:start + 300], y[start:start + 300])
    ...     pairs = {k: round(v, 1) for k, v in inter.interaction_dict().items()}
    ...     print(pairs, [round(v, 1) for v in inter.importance.tolist()])
    ...     print(round(inter.interaction_half_width()[0, 1].item(), 1))
    {('x0', 'x1'): 1.8, ('x0', 'x2'): -0.2, ('x1', 'x2'): 0.2} [1.0, 1.0, 2.0]
    0.7
    {('x0', 'x1'): 0.9, ('x0', 'x2'): -0.1, ('x1', 'x2'): -0.0} [0.5, 0.4, 1.0]
    0.5
    >>> inter.interaction.shape, bool(inter.interaction[0, 0].isnan())
    (torch.Size([3, 3]), True)
    """

    name = "interactions"

    def __init__(
        self,
        model_fn: ModelFn | None,
        loss: str | LossFn,
        n_features: int,
        *,
        top_k: int | None = 5,
        alpha: float = 0.001,
        removal: Literal["interventional", "observational"] | Sampler = "interventional",
        imputer: Literal["joint", "product"] | Imputer = "joint",
        storage: Literal["geometric", "uniform"] | Storage = "geometric",
        storage_size: int = 100,
        n_samples: int = 1,
        variance_correction: bool = False,
        feature_names: Sequence[str] | None = None,
        chunk_size: int | None = None,
        seed: int | None = 0,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        if top_k is not None:
            top_k = check_positive_int(top_k, "top_k")
            if top_k < 2:
                raise ValueError(f"top_k must be >= 2 (a pair needs two features), got {top_k}")
        if not isinstance(variance_correction, bool):
            raise TypeError(f"variance_correction must be a bool, got {variance_correction!r}")
        self.engine = _PairChain(
            model_fn, loss, n_features, alpha=alpha, removal=removal, imputer=imputer,
            storage=storage, storage_size=storage_size, n_samples=n_samples,
            empty_prediction="imputed", feature_names=feature_names, chunk_size=chunk_size,
            seed=seed, feature_groups=feature_groups, variance_correction=variance_correction,
        )
        if variance_correction and (
            self.engine.loss_name not in _SQUARED_LOSSES or self.engine.n_samples < 2
        ):
            raise ValueError(
                f"variance_correction needs the squared-error loss ('mse' or 'squared') and "
                f"n_samples >= 2 (a sample variance per coalition); got loss "
                f"{self.engine.loss_name or 'a callable'!r}, n_samples={self.engine.n_samples}"
            )
        self.model_fn = model_fn
        self.top_k = top_k
        self.variance_correction = variance_correction
        self.alpha = self.engine.alpha
        self.n_features = self.engine.n_features
        #: The players' names: the features, or the groups of ``feature_groups``.
        self.feature_names = self.engine.feature_names
        p = self.engine.n_explained_features
        #: Number of players (the side of :attr:`interaction`).
        self.n_explained_features = p
        a, c = torch.triu_indices(p, p, 1)
        self._all_a, self._all_c = a, c  # pair q of all p (p - 1) / 2 is (a[q], c[q])
        n_all = a.shape[0]
        # per pair: EMA of D, of D^2, of the indicator (sum w) and of its squared weights
        self._sum_d = torch.zeros(n_all, dtype=torch.float64)
        self._sum_d2 = torch.zeros(n_all, dtype=torch.float64)
        self._sum_w = torch.zeros(n_all, dtype=torch.float64)
        self._sum_w2 = torch.zeros(n_all, dtype=torch.float64)
        self._rows = torch.zeros(n_all, dtype=torch.long)  # rows each pair was explained on
        #: Indices (into all pairs, column order) of the pairs explained on the last batch.
        self.explained_pairs = torch.zeros(0, dtype=torch.long)
        self._weights: dict[tuple[int, torch.device], torch.Tensor] = {}

    # ------------------------------------------------------------------ explaining
    def explain(self, X: torch.Tensor, y: torch.Tensor) -> None:
        """Explain the batch ``X [B, d]``, ``y [B]`` with the current model: the SAGE values
        (:attr:`importance`) and the chosen pairs (:attr:`interaction`). The checks and the
        errors are iSAGE's (a failed batch leaves the explainer unchanged)."""
        if self.model_fn is None:
            raise ValueError(
                "IncrementalInteraction was built with model_fn=None: pass model_fn= to use "
                "explain(), or use it as a plug-in (it then explains batch.learner)"
            )
        self._explain(X, y, self.model_fn)

    def _explain(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> None:
        engine = self.engine
        chosen = self._chosen()
        engine.pair_a, engine.pair_c = self._all_a[chosen], self._all_c[chosen]
        engine.pair_delta = None
        engine._explain(X, y, model_fn)
        values = engine.pair_delta
        if values is None:  # only stored (an empty storage)
            return
        engine.pair_delta = None
        self._fold(chosen, values)

    def _chosen(self) -> torch.Tensor:
        """Indices (into all pairs) of the pairs to explain on the next batch."""
        p = self.n_explained_features
        if self.top_k is None or self.top_k >= p:
            return torch.arange(self._all_a.shape[0])
        if self.engine.smoother.n == 0:  # no SAGE values yet: they start on this batch
            return torch.zeros(0, dtype=torch.long)
        phi = self.engine.smoother.debiased.cpu()
        top = torch.argsort(-phi, stable=True)[: self.top_k]
        inside = torch.zeros(p, dtype=torch.bool)
        inside[top] = True
        return (inside[self._all_a] & inside[self._all_c]).nonzero().view(-1)

    def _fold(self, chosen: torch.Tensor, values: torch.Tensor) -> None:
        """Decay every pair's sums by ``(1 - alpha)^B`` and add the batch's weighted values
        ``alpha (1 - alpha)^(B - 1 - b)`` of the chosen pairs."""
        b = values.shape[0]
        device = values.device
        if self._sum_d.device != device:
            for name in ("_sum_d", "_sum_d2", "_sum_w", "_sum_w2", "_rows"):
                setattr(self, name, getattr(self, name).to(device))
        w = self._batch_weights(b, device)
        decay = (1.0 - self.alpha) ** b
        self._sum_d.mul_(decay)
        self._sum_d2.mul_(decay)
        self._sum_w.mul_(decay)
        self._sum_w2.mul_(decay * decay)
        if chosen.numel():
            idx = chosen.to(device)
            v = values.to(torch.float64).t().contiguous()  # [P, B]: mv (a small vector @
            self._sum_d.index_add_(0, idx, torch.mv(v, w))  # matrix is slow on some BLAS)
            self._sum_d2.index_add_(0, idx, torch.mv(v.square(), w))
            self._sum_w[idx] += float(w.sum())
            self._sum_w2[idx] += float(w.square().sum())
            self._rows[idx] += b
        self.explained_pairs = chosen.clone()

    def _batch_weights(self, b: int, device: torch.device) -> torch.Tensor:
        """``alpha (1 - alpha)^(B - 1 - i)`` for the rows ``i = 0..B-1`` (cached)."""
        key = (b, device)
        w = self._weights.get(key)
        if w is None:
            age = torch.arange(b - 1, -1, -1, dtype=torch.float64)
            w = (self.alpha * (1.0 - self.alpha) ** age).to(device)
            if len(self._weights) >= 8:
                self._weights.clear()
            self._weights[key] = w
        return w

    # ------------------------------------------------------------------ results
    @property
    def importance(self) -> torch.Tensor:
        """The running SAGE values ``[p]`` (iSAGE's debiased estimate, the game of the class
        docstring) that rank the players for ``top_k``."""
        return self.engine.importance

    def half_width(self, delta: float = 0.05) -> torch.Tensor:
        """iSAGE's Chebyshev half-width ``[p]`` of the SAGE values."""
        return self.engine.half_width(delta)

    @property
    def n_explained(self) -> int:
        """Rows explained so far (SAGE values; a pair's own count is :meth:`pair_rows`)."""
        return self.engine.n_explained

    def as_dict(self) -> dict[str, float]:
        """``{feature name: SAGE value}``."""
        return self.engine.as_dict()

    def _matrix(self, flat: torch.Tensor) -> torch.Tensor:
        """``[p, p]`` symmetric, NaN off the pairs explained on the last batch (and on the
        diagonal), from one value per pair ``flat [p (p - 1) / 2]``."""
        p = self.n_explained_features
        out = torch.full((p, p), math.nan, dtype=torch.float64)
        q = self.explained_pairs
        a, c = self._all_a[q], self._all_c[q]
        values = flat.cpu()[q]
        out[a, c] = values
        out[c, a] = values
        return out

    def _means(self) -> torch.Tensor:
        w = self._sum_w.cpu()
        return torch.where(w > 0, self._sum_d.cpu() / w.clamp_min(1e-300), math.nan)

    @property
    def interaction(self) -> torch.Tensor:
        """The interactions ``[p, p]`` (float64, symmetric): the SII estimate of every pair
        explained on the last batch, NaN elsewhere (pairs outside the ``top_k``, the
        diagonal; all NaN before the first explained pair)."""
        return self._matrix(self._means())

    def interaction_half_width(self, delta: float = 0.05) -> torch.Tensor:
        """The Chebyshev half-width ``[p, p]`` at level ``1 - delta`` of :attr:`interaction`
        (see the class docstring; inf for a pair explained on one row, NaN where
        :attr:`interaction` is NaN)."""
        if not 0 < delta < 1:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        w, w2 = self._sum_w.cpu(), self._sum_w2.cpu()
        mean = self._means()
        var = (self._sum_d2.cpu() / w.clamp_min(1e-300) - mean.square()).clamp_min(0.0)
        half = torch.sqrt(var * w2 / w.clamp_min(1e-300).square() / delta)
        half = torch.where(self._rows.cpu() > 1, half, math.inf)
        return self._matrix(half)

    def pair_rows(self) -> torch.Tensor:
        """``[p, p]`` int64: on how many rows each pair was explained (0 on the diagonal)."""
        p = self.n_explained_features
        out = torch.zeros(p, p, dtype=torch.long)
        rows = self._rows.cpu()
        out[self._all_a, self._all_c] = rows
        out[self._all_c, self._all_a] = rows
        return out

    def interaction_dict(self) -> dict[tuple[str, str], float]:
        """``{(name_a, name_b): SII}`` of the pairs explained on the last batch, the names in
        column order, the pairs in column order."""
        values = self._means()
        names = self.feature_names
        return {
            (names[int(self._all_a[q])], names[int(self._all_c[q])]): float(values[q])
            for q in self.explained_pairs.tolist()
        }

    def ranked_pairs(self, delta: float = 0.05) -> list[tuple[str, str, float, float]]:
        """``(name_a, name_b, SII, half-width at 1 - delta)`` of the pairs explained on the
        last batch, largest ``|SII|`` first (ties in column order)."""
        values, bounds = self.interaction, self.interaction_half_width(delta)
        names = self.feature_names
        rows = [(names[a], names[c], float(values[a, c]), float(bounds[a, c]))
                for a, c in zip(self._all_a[self.explained_pairs].tolist(),
                                self._all_c[self.explained_pairs].tolist())]
        return sorted(rows, key=lambda row: -abs(row[2]))

    def pair_label(self, a: str, b: str) -> str:
        """How a pair is named in logged scalars: ``"(a, b)"``."""
        return f"({a}, {b})"

    # ------------------------------------------------------------------ plug-in
    def on_batch(self, batch: BatchView) -> None:
        """Plug-in hook: explain ``batch.X``, ``batch.y`` with ``model_fn`` (or
        ``batch.learner``); the runner records the pairs (:meth:`step_importance`)."""
        model_fn = self.model_fn if self.model_fn is not None else batch.learner
        self._explain(batch.X, batch.y, model_fn)

    def step_importance(self) -> dict[str, float]:
        """``{"(a, b)": SII}`` of the explained pairs (empty while none is): what a step
        record holds of this explainer."""
        return {self.pair_label(a, b): v for (a, b), v in self.interaction_dict().items()}

    def state_dict(self) -> dict[str, object]:
        """Everything needed to resume bit-exactly: iSAGE's state and the pairs' sums."""
        return {
            "class": type(self).__name__,
            "n_features": self.n_features,
            "top_k": self.top_k,
            "variance_correction": self.variance_correction,
            "sage": self.engine.state_dict(),
            "pairs": {
                "sum_d": self._sum_d.cpu().clone(),
                "sum_d2": self._sum_d2.cpu().clone(),
                "sum_w": self._sum_w.cpu().clone(),
                "sum_w2": self._sum_w2.cpu().clone(),
                "rows": self._rows.cpu().clone(),
                "explained": self.explained_pairs.cpu().clone(),
            },
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        check_settings(state, {"class": type(self).__name__, "n_features": self.n_features,
                               "top_k": self.top_k,
                               "variance_correction": self.variance_correction},
                       type(self).__name__)
        pairs = state["pairs"]
        n_all = self._all_a.shape[0]
        if pairs["sum_d"].shape != (n_all,):
            raise ValueError(
                f"state has {pairs['sum_d'].shape[0]} pairs, this explainer {n_all} "
                f"({self.n_explained_features} players)"
            )
        self.engine.load_state_dict(state["sage"])
        self._sum_d = pairs["sum_d"].to(torch.float64).clone()
        self._sum_d2 = pairs["sum_d2"].to(torch.float64).clone()
        self._sum_w = pairs["sum_w"].to(torch.float64).clone()
        self._sum_w2 = pairs["sum_w2"].to(torch.float64).clone()
        self._rows = pairs["rows"].to(torch.long).clone()
        self.explained_pairs = pairs["explained"].to(torch.long).clone()

    def __repr__(self) -> str:
        loss = self.engine.loss_name or getattr(self.engine.loss_fn, "__name__", "callable")
        return (
            f"{type(self).__name__}(n_features={self.n_features}, loss={loss!r}, "
            f"top_k={self.top_k}, alpha={self.alpha}, n_samples={self.engine.n_samples}, "
            f"n_explained={self.n_explained})"
        )
