"""Incremental permutation feature importance (iPFI) [PFI]_.

The importance of feature ``j`` for a model ``f`` and a loss ``l`` is the increase in expected
loss when ``x_j`` is replaced by an independent draw from its marginal distribution:

    phi_j = E[ l(f(x with x_j := x~_j), y) ] - E[ l(f(x), y) ].

iPFI estimates it online: every explained row contributes the loss increase for one (or the mean
over ``n_samples``) replacement values drawn from a storage of *past* rows, and an exponential
moving average forgets old contributions, so the estimate follows a changing model and drifting
data.

References
----------
.. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental permutation
   feature importance (iPFI): towards online explanations on data streams. *Machine Learning*
   112, 4863-4903.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import torch
from torch import nn

from torchstream.explain._base import LossExplainer, _acc_dtype
from torchstream.explain._compiled import CompiledPath
from torchstream.explain._fused import StepConfig, StepResult, compiled_step, loss_step_config
from torchstream.explain.storage._common import _Reservoir
from torchstream.losses import LossFn
from torchstream.typing import ModelFn, Storage

__all__ = ["IncrementalPFI"]


class IncrementalPFI(CompiledPath, LossExplainer):
    r"""Incremental permutation feature importance [PFI]_ for a model on a data stream.

    Algorithm (one call of :meth:`explain` with a batch of ``B`` rows; ``B = 1`` is Alg. 1 of
    [PFI]_ with ``K = n_samples`` replacement draws per feature, whose *losses* are averaged)::

        for b in 1..B:                                   # all rows of the batch at once
            base[b] = l(f(x_b), y_b)
            for j in 1..d, k in 1..K:
                r        = storage.sample()              # a row stored before this batch
                x_mod    = x_b with x_mod[j] = r[j]
                loss[k]  = l(f(x_mod), y_b)
            lambda[b, j] = mean_k loss[k] - base[b]
        phi = (1 - alpha)^B phi + sum_b alpha (1 - alpha)^(B - b) lambda[b]     # EMA, closed form
        storage.update(x_1..x_B)                         # after explaining
        return phi / (1 - (1 - alpha)^n)                 # debiased (n rows explained so far)

    All ``B * (1 + d * K)`` model evaluations of a batch go to ``model_fn`` in one call (or in
    chunks of ``chunk_size`` rows), under ``torch.no_grad()``, on the device of ``X``; ``X``,
    ``y`` and the model are not changed. Within a batch the model is fixed and every draw comes
    from the storage as it was before the batch, so with a storage that does not change within
    the batch the estimate equals ``B`` calls of one row each. A batch that meets an empty
    storage is only stored.

    Parameters
    ----------
    model_fn
        The model as a :data:`~torchstream.typing.ModelFn` (``[n, d] -> [n]`` values or
        ``[n, k]`` class probabilities); ``None`` for a plug-in that explains ``batch.learner``.
    loss
        A name from :data:`torchstream.losses.LOSSES` (``"mse"``, ``"cross_entropy"``, ...) or a
        per-row loss ``(y_pred, y_true) -> [B]``.
    n_features
        ``d``, the width of ``X``.
    alpha
        Smoothing factor in ``(0, 1]``; ``alpha = 2 / (N + 1)`` matches a window of ``N`` rows
        (:func:`~torchstream.explain.smoothing.alpha_for_window`).
    storage
        ``"geometric"`` (each new row replaces a random slot: recent rows, suited to drift),
        ``"uniform"`` (Vitter's reservoir: all past rows equally likely), or an object with
        ``sample(n)`` and ``update(X)`` (and ``state_dict`` for checkpoints). An object is asked
        for ``n = B d K`` rows per batch; row ``t = (b d + j) K + k`` of ``sample(n)`` replaces
        feature ``j`` of row ``b`` in draw ``k``.
    storage_size
        Rows kept by a named storage.
    n_samples
        ``K``, replacement draws per feature and row (their losses are averaged).
    feature_names
        Names of the ``d`` features (a sequence or a :class:`~torchstream.schema.Schema`);
        default ``"x0".."x{d-1}"``.
    init
        ``"zero"`` (EMA starts at 0, as in the theorems; :attr:`importance` is debiased) or
        ``"first"`` (starts at the first contribution).
    chunk_size
        At most this many rows per ``model_fn`` call (a memory cap); None: one call per batch.
    seed
        Seed of the explainer's CPU ``torch.Generator`` (a named storage is seeded from it).
    feature_groups
        ``{feature name: encoded column indices}`` (e.g.
        :meth:`~torchstream.schema.Schema.feature_groups`), every column in exactly one group: a
        draw replaces the whole block of a feature by the block of one stored row,
        :attr:`importance` is ``[G]`` and :attr:`feature_names` are the group names. A storage
        object is then asked for ``B G K`` rows, in the order (row, group, draw). None: every
        column is a feature.
    compile
        Run each batch's work after the random draws as one ``torch.compile``d step
        (:mod:`torchstream.explain._fused`); the estimates are the eager ones up to float
        rounding. Needs a torch module (``model_fn`` an ``nn.Module``, or a learner with a
        ``network``) and no ``chunk_size``; otherwise the eager path runs with a warning. The
        one-off compile time is :attr:`compile_seconds`.

    Examples
    --------
    A linear model ``f(x) = x0 + 2 x1`` (``x2`` unused) with squared loss; the true importances
    are ``2 beta_j^2 Var(x_j) = (2, 8, 0)``:

    >>> import torch
    >>> from torchstream.explain.ipfi import IncrementalPFI
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(20000, 3, generator=g, dtype=torch.float64)
    >>> beta = torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64)
    >>> y = X @ beta + 0.5 * torch.randn(20000, generator=g, dtype=torch.float64)
    >>> ipfi = IncrementalPFI(lambda Z: Z @ beta, "mse", 3, alpha=0.0005, seed=0)
    >>> for start in range(0, 20000, 50):
    ...     ipfi.explain(X[start:start + 50], y[start:start + 50])
    >>> {k: round(v, 2) for k, v in ipfi.as_dict().items()}
    {'x0': 2.0, 'x1': 7.9, 'x2': 0.0}
    >>> ipfi.n_explained  # the first batch only fills the storage
    19950

    References
    ----------
    .. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental
       permutation feature importance (iPFI): towards online explanations on data streams.
       *Machine Learning* 112, 4863-4903.
    """

    name = "ipfi"

    def __init__(
        self,
        model_fn: ModelFn | None,
        loss: str | LossFn,
        n_features: int,
        *,
        alpha: float = 0.001,
        storage: Literal["geometric", "uniform"] | Storage = "geometric",
        storage_size: int = 100,
        n_samples: int = 1,
        feature_names: Sequence[str] | None = None,
        init: Literal["zero", "first"] = "zero",
        chunk_size: int | None = None,
        seed: int | None = 0,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
        compile: bool = False,
    ) -> None:
        super().__init__(
            model_fn,
            loss,
            n_features,
            alpha=alpha,
            storage=storage,
            storage_size=storage_size,
            n_samples=n_samples,
            feature_names=feature_names,
            init=init,
            chunk_size=chunk_size,
            seed=seed,
            feature_groups=feature_groups,
        )
        self._plan_key: tuple[Any, ...] | None = None
        self._plan_cache: tuple[torch.Tensor, torch.Tensor, torch.Tensor]
        self._init_compiled(compile)
        self._step_fn: Callable[..., StepResult] | None = None
        self._fused_plans: dict[tuple[Any, ...], tuple[torch.Tensor, ...]] = {}
        if self.compile and chunk_size is not None:
            self._compile_off("chunk_size is set (the compiled step evaluates a batch in one call)")

    def _contributions(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> torch.Tensor:
        """``lambda [B, d]``: mean over ``K`` draws of ``l(f(x_b with x_j replaced), y_b)``
        minus ``l(f(x_b), y_b)``. Draws are taken row-major in ``(b, j, k)``.

        The model input is a reused buffer ``[1 + d K, B, d]`` (group-major: the batch itself,
        then one copy of it per ``(j, k)``): every copy is filled from ``X`` in one broadcast
        copy, and only the ``B d K`` replaced values are gathered from the storage and written
        at their precomputed positions."""
        if self.groups is not None:
            return self._group_contributions(X, y, model_fn)
        b, d = X.shape
        k = self.n_samples
        groups = 1 + d * k
        buf, pos, feat = self._plan(b, X)
        buf.copy_(X)  # [b, d] broadcast into every group
        flat = buf.view(-1)
        flat.index_copy_(0, pos, self._replacements(b * d * k, feat, X))
        out = self._forward(model_fn, buf.view(groups * b, d))
        self._check_output(out, y)
        losses = self._group_loss(
            out.view(groups, b, *out.shape[1:]), y, _acc_dtype(out.device)
        )  # [1 + d K, B]
        diff = (losses[1:] - losses[0]).view(d, k, b)
        lam = diff[:, 0] if k == 1 else diff.mean(1)  # mean of differences: 0 for a null feature
        return lam.t()

    def _group_contributions(
        self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn
    ) -> torch.Tensor:
        """``lambda [B, G]`` with ``feature_groups``: the whole block of group ``g`` is replaced
        by the block of ONE stored row per draw. Draw ``t`` of the ``B G K`` stored rows fills
        ``(b, g, k)`` row-major; the model input is group-major ``[1 + G K, B, d]``."""
        assert self.groups is not None
        b, d = X.shape
        k = self.n_samples
        n_groups = self.groups.n_groups
        n = b * n_groups * k
        storage = self.storage
        data = getattr(storage, "_data", None) if isinstance(storage, _Reservoir) else None
        if data is not None:  # the same random numbers as sample(n), only slot indices
            rows = data.index_select(0, storage.sample_indices(n).to(data.device))
        else:
            rows = self._sample_rows(n, X)
        rows = rows.to(device=X.device, dtype=X.dtype).view(b, n_groups, k, d).permute(1, 2, 0, 3)
        member = self.groups.member_mask().to(X.device).view(n_groups, 1, 1, d)
        replaced = torch.where(member, rows, X)  # [G, K, B, d]
        Z = torch.cat([X.unsqueeze(0), replaced.reshape(n_groups * k, b, d)])
        out = self._forward(model_fn, Z.view(-1, d))
        self._check_output(out, y)
        losses = self._group_loss(
            out.view(1 + n_groups * k, b, *out.shape[1:]), y, _acc_dtype(out.device)
        )  # [1 + G K, B]
        diff = (losses[1:] - losses[0]).view(n_groups, k, b)
        lam = diff[:, 0] if k == 1 else diff.mean(1)
        return lam.t()

    def _plan(self, b: int, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Cached per ``(B, dtype, device)``: the input buffer ``[1 + d K, B, d]``, the flat
        positions in it of the ``B d K`` replaced values (in draw order ``(b, j, k)``) and the
        feature index of each draw."""
        key = (b, X.dtype, X.device)
        if self._plan_key != key:
            d, k = self.n_features, self.n_samples
            bi = torch.arange(b).view(b, 1, 1)
            j = torch.arange(d).view(1, d, 1)
            kk = torch.arange(k).view(1, 1, k)
            pos = ((1 + j * k + kk) * b + bi) * d + j  # group 1 + j k + kk, row bi, column j
            feat = j.expand(b, d, k)
            self._plan_cache = (
                torch.empty(1 + d * k, b, d, dtype=X.dtype, device=X.device),
                pos.reshape(-1).to(X.device),
                feat.reshape(-1).to(X.device),
            )
            self._plan_key = key
        return self._plan_cache

    def _replacements(self, n: int, feat: torch.Tensor, X: torch.Tensor) -> torch.Tensor:
        """The ``n`` replacement values ``[n]``: draw ``t`` takes feature ``feat[t]`` of a stored
        row. A reservoir is asked for slot indices only (the same random numbers as
        ``sample(n)``) and only the needed values are gathered; another storage gives ``n``
        full rows."""
        storage = self.storage
        data = getattr(storage, "_data", None) if isinstance(storage, _Reservoir) else None
        if data is not None:
            idx = storage.sample_indices(n)
            if feat.device != data.device:
                feat = feat.to(data.device)
            values = data.view(-1).take(torch.add(feat, idx, alpha=self.n_features))
        else:
            rows = self._sample_rows(n, X)
            values = rows.take(  # take() reads any layout as row-major
                torch.add(feat, torch.arange(n, device=X.device), alpha=self.n_features)
            )
        if values.dtype != X.dtype or values.device != X.device:
            values = values.to(device=X.device, dtype=X.dtype)
        return values

    # ------------------------------------------------------------------ compiled path
    def _step_config(self, b: int, dtype: torch.dtype) -> StepConfig:
        return loss_step_config(self, b, dtype)

    def _fused_plan(self, b: int, X: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Cached per ``(B, device)``: the feature of each draw ``[B d K]`` (order
        ``(b, j, k)``), the draw numbers ``0..n-1`` (rows of a storage's sample) and, with
        groups, the member mask ``[G, d]``."""
        key = (b, X.device)
        plan = self._fused_plans.get(key)
        if plan is None:
            f = self.n_explained_features
            n = b * f * self.n_samples
            feat = torch.arange(self.n_features).view(1, -1, 1)
            feat = feat.expand(b, self.n_features, self.n_samples).reshape(-1).to(X.device)
            member = (
                torch.zeros(0) if self.groups is None else self.groups.member_mask()
            ).to(X.device)
            plan = self._fused_plans[key] = (feat, torch.arange(n, device=X.device), member)
        return plan

    def _fused_explain(self, X: torch.Tensor, y: torch.Tensor, module: nn.Module) -> bool:
        """One batch through the compiled step; False where this batch must run eagerly (then
        nothing has changed)."""
        X, y = self._check_batch(X, y)
        smoother = self.smoother
        if not self._checked or smoother.n == 0 or self._storage_size() == 0:
            return False  # the first explained batch checks the model's output eagerly
        self._place(X)
        b = X.shape[0]
        acc = _acc_dtype(X.device)
        cfg = self._step_config(b, acc)
        feat, draws, member = self._fused_plan(b, X)
        n = b * self.n_explained_features * self.n_samples
        saved = self._save_generators(self._generators())
        storage = self.storage
        data = getattr(storage, "_data", None) if isinstance(storage, _Reservoir) else None
        try:
            if data is not None:  # the same random numbers as sample(n), only slot indices
                source, idx = data, storage.sample_indices(n)
            else:
                source, idx = self._sample_rows(n, X), draws
        except BaseException:
            self._restore_generators(saved)
            raise
        rn, plan = self._ema_inputs(smoother, b, cfg.ema)
        key = (b, X.dtype, y.dtype, X.device, tuple(source.shape), source.dtype, cfg.ema)
        if self._step_fn is None:
            self._step_fn = compiled_step()
        step_fn = self._step_fn
        res = self._call_compiled(key, lambda: step_fn(
            module, X, y, source, idx, feat, None if self.groups is None else member,
            smoother.raw, smoother.sq_dev, rn, plan, cfg,
        ), saved)
        if res is None or not self._passed(res.ok, saved):
            return False
        self._fold_step(smoother, cfg.ema, res.raw, res.sq_dev, lambda: res.lam, b)
        self.n_batches += 1
        if data is not None:
            storage._update_finite(X)  # X was checked by the flag
        else:
            storage.update(X)
        return True
