"""Incremental SAGE (iSAGE) [SAGE]_: Shapley values of the loss explained by feature subsets.

SAGE (Covert et al. 2020) distributes the loss reduction a model achieves over its mean
prediction, ``nu(D) = E[l(y_mean, Y)] - E[l(f(X), Y)]``, among the features as the Shapley
values of the game ``nu(S) = E[l(y_mean, Y)] - E[l(f_S(X), Y)]``, where ``f_S`` is the model
with the features outside ``S`` removed: *interventionally* (imputed from the marginal
distribution, ``f_S(x) = E[f(x_S, X_notS)]``) or *observationally* (drawn from the conditional
distribution given the present features, ``f_S(x) = E[f(x_S, X_notS) | X_S = x_S]``, with one
incremental tree per feature, :class:`~torchstream.explain.conditional.ConditionalTreeSampler`).
iSAGE estimates these values online: one random permutation per row, the coalition chain along
it evaluated with ``m`` imputed rows per coalition, and an exponential moving average of the
per-row marginal contributions.

References
----------
.. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an incremental
   version of SAGE for online explanation on data streams. *ECML PKDD 2023*, LNCS 14171,
   428-445.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

import torch
from torch import nn

from torchstream.devices import to_device
from torchstream.explain._base import (
    LossExplainer,
    _acc_dtype,
    _ema_weights,
    ema_prefix,
)
from torchstream.explain._compiled import CompiledPath
from torchstream.explain._fused import loss_step_config
from torchstream.explain._fused_isage import SageConfig, SageResult, compiled_isage_step
from torchstream.explain.conditional import ConditionalTreeSampler
from torchstream.explain.imputers import MarginalImputer
from torchstream.explain.storage._common import _Reservoir
from torchstream.losses import LossFn
from torchstream.typing import Imputer, ModelFn, Sampler, Storage

__all__ = ["CHUNK_BYTES", "COMPILED_BYTES", "IncrementalSAGE"]

#: Memory budget of one chunk of the expanded model input on the CPU when ``chunk_size`` is
#: None: chunks of ``CHUNK_BYTES // (d * itemsize)`` rows (4 MiB: 1,048 rows of 1,000 float32
#: features, a size the CPU's caches hold while the chunk is built and read).
CHUNK_BYTES = 4 * 2**20
#: The budget of one chunk on another device (a GPU, where every extra model call is another
#: round of kernel launches and memory is ample), and the most bytes of model input the
#: compiled step (``compile=True``) builds at once, a whole batch in one graph (a larger batch
#: is explained eagerly, chunk by chunk).
COMPILED_BYTES = 256 * 2**20
#: Integer dtypes that view float values of each width bit for bit (the bitwise select).
_BIT_VIEWS = {2: torch.int16, 4: torch.int32, 8: torch.int64}
#: Chunks of fewer values select with a comparison and ``torch.where`` (fewer operations).
_BITWISE_MIN = 2**16


class IncrementalSAGE(CompiledPath, LossExplainer):
    r"""Incremental SAGE [SAGE]_ with interventional or observational feature removal.

    Algorithm (one call of :meth:`explain` with a batch of ``B`` rows; ``B = 1`` is Alg. 1 of
    [SAGE]_ with ``m = n_samples`` inner samples, whose *predictions* are averaged)::

        for b in 1..B:                                   # all rows of the batch at once
            pi     = random permutation of 1..d          # one per row
            y_full = f(x_b)
            if empty_prediction == "ema":                # mean prediction, updated FIRST
                y_empty = (1 - alpha) y_empty + alpha y_full      # starts at the first output
            else:  # "imputed"
                y_empty = mean_k f(x~_k)                 # all d features from m stored rows
            prev = l(y_empty, y_b);  S = {}
            for p in 1..d:
                S = S + {pi_p}
                y_S = y_full if S == D else mean_{k=1..m} f(x_b on S, x~_k off S)
                delta[b, pi_p] = prev - l(y_S, y_b);  prev = l(y_S, y_b)
        phi = EMA of delta[1..B] (closed form)
        storage.update(x_1..x_B)                         # after explaining
        return phi / (1 - (1 - alpha)^n)                 # debiased

    ``x~_k`` are imputed rows: with ``removal="interventional"`` drawn from the storage
    through the imputer, for the game ``f_S(x) = E[f(x_S, X_notS)]``; with
    ``removal="observational"`` every removed feature is drawn from a
    :class:`~torchstream.explain.conditional.ConditionalTreeSampler` given the present features
    ([SAGE]_ Alg. 4), for ``f_S(x) = E[f(x_S, X_notS) | X_S = x_S]`` (the conditional
    approximated by the trees and by a product over the removed features). Each coalition gets
    fresh draws. The ``B * (1 + (d - 1) m)`` model evaluations of a batch (``B * (1 + d m)``
    with ``empty_prediction="imputed"``) go to ``model_fn`` under ``torch.no_grad()``, on the
    device of ``X``, in chunks of at most ``chunk_size`` rows (the estimates do not depend on
    it). Within a batch the model, the storage and the sampler's trees are fixed (``y_empty``
    still moves row by row); the batch enters them after explaining. A batch that meets an
    empty storage is only stored. For every row the contributions telescope,
    ``sum_i delta[b, i] = l(y_empty, y_b) - l(f(x_b), y_b)`` (efficiency).

    **Which game is estimated.** SAGE takes the loss of the *average* of ``m`` imputed
    predictions, so with finite ``m`` the estimates are the Shapley values of a finite-``m``
    game, not of ``nu`` (spec §3.6.4); with ``W(S) = E Var(f(X_S, X~_{not S}))`` under the
    removal's distribution of ``x~`` and ``V = Var f(X)``:

    * ``empty_prediction="ema"`` (the paper) estimates ``nu_m(S) = E[l(y_mean, Y)] -
      E[l(f_m(X, S), Y)]`` with ``f_m`` the ``m``-sample average (``nu_m(D) = nu(D)``). For
      squared loss ``nu_m(S) = nu(S) - W(S) / m`` for ``S`` other than the empty and full set.
      If ``E[Y | X] = f(X)`` and the features are independent (or ``f`` is linear and removal
      joint), ``W(S) = V - nu(S)``, so ``E[delta_i] = (1 + 1/m) phi_i - V / (m d)``: a feature
      the model ignores gets ``-V / (m d)`` (the null-player property fails).
    * ``empty_prediction="imputed"`` also averages ``m`` imputed predictions for the empty
      coalition: a feature the model ignores gets expectation exactly 0 at every position, for
      any loss and feature distribution. For squared loss the game is ``nu(S) + (W(empty) -
      W(S)) / m``, under the conditions above ``(1 + 1/m) nu(S)``: ``E[delta_i] = (1 + 1/m)
      phi_i``, and ``m / (m + 1)`` times the estimate is SAGE. Efficiency reads ``sum_i phi_i
      = E[l(f_m(X, {}), Y)] - E[l(f(X), Y)]``.

    Both hold in expectation over the permutations and imputations (the EMA of ``y_empty`` adds
    an ``O(alpha)`` term), for either removal; with an exact conditional sampler and ``E[Y | X]
    = f(X)``, ``W(S) = V - nu(S)`` holds observationally whatever the feature dependence.

    Parameters
    ----------
    model_fn
        The model as a :data:`~torchstream.typing.ModelFn` (``[n, d] -> [n]`` values or
        ``[n, k]`` class probabilities); ``None`` for a plug-in that explains ``batch.learner``.
    loss
        A name from :data:`torchstream.losses.LOSSES` or a per-row loss ``(y_pred, y) -> [B]``.
    n_features
        ``d``, the width of ``X``.
    alpha
        Smoothing factor in ``(0, 1]`` of the importance and of ``y_empty``.
    removal
        ``"interventional"`` (marginal imputation from ``storage`` through ``imputer``),
        ``"observational"`` (a
        :class:`~torchstream.explain.conditional.ConditionalTreeSampler` with its defaults,
        seeded from the explainer's generator) or a conditional sampler object with
        ``impute(x [B, d], mask [B, R, d], storage) -> [B, R, d]`` and ``update(X)`` (and
        ``__len__`` / ``state_dict`` / ``load_state_dict`` if it has them), used as imputer
        and storage. Observational removal uses none of ``storage``, ``storage_size`` and
        ``imputer`` (``storage`` / ``imputer`` must keep their defaults).
    imputer
        ``"joint"`` (all removed features from one stored row per inner sample, the default),
        ``"product"`` (each removed feature from its own stored row), or an object with
        ``impute(x [B, d], mask [B, R, d], storage) -> [B, R, d]`` (``mask`` True = keep ``x``).
    storage, storage_size
        As for :class:`~torchstream.explain.ipfi.IncrementalPFI` (default: a geometric reservoir
        of 100 rows).
    n_samples
        ``m``, imputed rows per coalition (their predictions are averaged).
    empty_prediction
        ``"ema"`` or ``"imputed"`` (see above).
    feature_names, init, seed
        As for :class:`~torchstream.explain.ipfi.IncrementalPFI`; the permutations come from
        the explainer's generator (``torch.rand(B, d).argsort(1)``).
    chunk_size
        Rows of the expanded model input per ``model_fn`` call (and per chunk of imputed rows
        built at once). ``None``: as many as fit in :data:`CHUNK_BYTES` on the CPU, in
        :data:`COMPILED_BYTES` on another device. A custom imputer or sampler still gets the
        whole mask ``[B, G m, d]`` in one ``impute`` call.
    feature_groups
        ``{feature name: encoded column indices}`` (e.g.
        :meth:`~torchstream.schema.Schema.feature_groups`), every column in exactly one group:
        the players are the ``G`` groups and a removed group's block is imputed whole from one
        stored row (per removed group with ``"product"``; observationally from the reservoir
        the group's first column's tree leads to). A custom imputer must keep blocks whole
        itself, a custom sampler carry the same ``groups``. :attr:`importance` is ``[G]``,
        :attr:`feature_names` the group names.
    compile
        Run each batch's work after the random draws as one ``torch.compile``d step
        (:mod:`torchstream.explain._fused_isage`); the estimates are the eager ones up to float
        rounding. Covers interventional removal with a built-in imputer and reservoir, with or
        without groups, either ``empty_prediction``, on a torch module (``model_fn`` an
        ``nn.Module``, or a learner with a ``network``) without ``chunk_size``; otherwise the
        eager path runs with a warning. The one-off compile time is :attr:`compile_seconds`.

    Examples
    --------
    A linear model ``f(x) = x0 + 2 x1`` (``x2`` unused), independent standard normal features,
    squared loss. SAGE is ``beta_j^2 Var(x_j) = (1, 4, 0)``; with ``m = 1`` the paper's
    estimator targets ``2 phi - V / 3 = (0.33, 6.33, -1.67)`` and the ``"imputed"`` variant
    ``2 phi = (2, 8, 0)`` (one run each; :meth:`half_width` at ``delta = 0.05`` is about 0.7
    and 0.9 here):

    >>> import torch
    >>> from torchstream.explain.isage import IncrementalSAGE
    >>> g = torch.Generator().manual_seed(0)
    >>> X = torch.randn(20000, 3, generator=g, dtype=torch.float64)
    >>> beta = torch.tensor([1.0, 2.0, 0.0], dtype=torch.float64)
    >>> y = X @ beta + 0.5 * torch.randn(20000, generator=g, dtype=torch.float64)
    >>> for empty in ("ema", "imputed"):
    ...     isage = IncrementalSAGE(lambda Z: Z @ beta, "mse", 3, alpha=0.0005,
    ...                             empty_prediction=empty, seed=0)
    ...     for start in range(0, 20000, 50):
    ...         isage.explain(X[start:start + 50], y[start:start + 50])
    ...     print(empty, [round(v, 2) for v in isage.importance.tolist()])
    ema [0.62, 6.17, -1.9]
    imputed [1.77, 8.17, 0.51]

    References
    ----------
    .. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an
       incremental version of SAGE for online explanation on data streams. *ECML PKDD 2023*,
       LNCS 14171, 428-445.
    """

    name = "isage"

    def __init__(
        self,
        model_fn: ModelFn | None,
        loss: str | LossFn,
        n_features: int,
        *,
        alpha: float = 0.001,
        removal: Literal["interventional", "observational"] | Sampler = "interventional",
        imputer: Literal["joint", "product"] | Imputer = "joint",
        storage: Literal["geometric", "uniform"] | Storage = "geometric",
        storage_size: int = 100,
        n_samples: int = 1,
        empty_prediction: Literal["ema", "imputed"] = "ema",
        feature_names: Sequence[str] | None = None,
        init: Literal["zero", "first"] = "zero",
        chunk_size: int | None = None,
        seed: int | None = 0,
        feature_groups: Mapping[str, Sequence[int]] | None = None,
        compile: bool = False,
    ) -> None:
        sampler: Sampler | None = None
        if not isinstance(removal, str):
            needs = ("impute", "update")
            if not all(callable(getattr(removal, method, None)) for method in needs):
                raise TypeError(
                    f"removal must be 'interventional', 'observational' or a sampler object with "
                    f"impute(x, mask, storage) and update(X), got {type(removal).__name__}"
                )
            sampler, removal = removal, "observational"
        elif removal not in ("interventional", "observational"):
            raise ValueError(
                f"removal must be 'interventional', 'observational' or a sampler object, got "
                f"{removal!r}"
            )
        if removal == "observational" and (
            not (isinstance(storage, str) and storage == "geometric")
            or not (isinstance(imputer, str) and imputer == "joint")
        ):
            raise ValueError(
                "storage and imputer belong to removal='interventional'; with observational "
                "removal the conditional sampler is both (pass removal=<sampler> to configure it)"
            )
        if empty_prediction not in ("ema", "imputed"):
            raise ValueError(
                f"empty_prediction must be 'ema' or 'imputed', got {empty_prediction!r}"
            )
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
        self.removal = removal
        self.empty_prediction = empty_prediction
        if removal == "observational":
            if sampler is None:
                # the seed the interventional reservoir got from the explainer's generator
                sampler = ConditionalTreeSampler(
                    self.n_features, seed=self.storage.seed, feature_groups=self.groups
                )
            elif self.groups is not None:
                theirs = getattr(sampler, "groups", None)
                if getattr(theirs, "members", None) != self.groups.members:
                    raise ValueError(
                        "removal: with feature_groups the sampler must draw whole groups: build "
                        "it with the same feature_groups"
                    )
            width = getattr(sampler, "n_features", self.n_features)
            if width != self.n_features:
                raise ValueError(
                    f"removal: the sampler has n_features={width}, the explainer "
                    f"n_features={self.n_features}"
                )
            self.storage = sampler  # updated after explaining, saved in state_dict()
            self.imputer: Imputer = sampler
        elif isinstance(imputer, str):
            if imputer not in ("joint", "product"):
                raise ValueError(
                    f"imputer must be 'joint', 'product' or an imputer object, got {imputer!r}"
                )
            self.imputer = MarginalImputer(imputer, self.groups)
        elif callable(getattr(imputer, "impute", None)):
            self.imputer = imputer
        else:
            raise TypeError(
                f"imputer must be 'joint', 'product' or an object with impute(x, mask, storage), "
                f"got {type(imputer).__name__}"
            )
        #: The mean-prediction EMA (``[]`` or ``[k]``, float64 on the device of the model
        #: outputs; float32 on MPS); None before the first row.
        self.y_empty: torch.Tensor | None = None
        self._plan_key: tuple[Any, ...] | None = None
        self._plan_cache: tuple[torch.Tensor, torch.Tensor]
        self._buf: torch.Tensor | None = None  # the reused model-input buffer (one chunk)
        self._scratch_buf: torch.Tensor | None = None  # the reused mask of one chunk
        self._init_compiled(compile)
        self._said_too_big = False
        self._step_fn: Callable[..., SageResult] | None = None
        self._column_groups: dict[torch.device, torch.Tensor] = {}
        if self.compile:
            reason = self._uncovered()
            if reason is not None:
                self._compile_off(reason)

    def _contributions(self, X: torch.Tensor, y: torch.Tensor, model_fn: ModelFn) -> torch.Tensor:
        """``delta [B, d]`` along one permutation per row (see the class docstring).

        The model outputs are group-major, ``[1 + G m, B]``: the batch itself, then one group of
        ``B`` rows per (coalition size, inner sample), ``G`` the number of imputed coalition
        sizes (:meth:`_evaluate_chain`)."""
        b, d = X.shape
        p = self.n_explained_features  # players: the columns, or the groups
        m = self.n_samples
        imputed_empty = self.empty_prediction == "imputed"
        first = 0 if imputed_empty else 1  # smallest coalition size that is imputed
        g = p - first  # imputed coalition sizes first..p-1
        rows = g * m
        sizes, ranks = self._plan(b, X)
        # the uniforms come from the CPU generator (the same permutations on every device);
        # they are sorted where the batch is (stable: ties, rare in float32, break alike)
        u = to_device(torch.rand(b, p, generator=self.generator), X.device)
        perm = u.argsort(dim=1, stable=True)
        # rank[b, j]: position of feature j in row b's permutation (the inverse permutation)
        rank = torch.empty_like(perm).scatter_(1, perm, ranks)
        if rows:
            fg = self.groups
            # every column takes its group's position: a group is present or absent as a whole
            col_rank = rank if fg is None else rank[:, fg.column_group.to(rank.device)]
            with torch.no_grad():  # also the imputed rows (X or the storage may need grad)
                out = self._evaluate_chain(model_fn, X, col_rank, sizes)
        else:  # d = 1 with the EMA empty prediction: only the batch itself
            out = self._forward(model_fn, X)
        self._check_output(out, y)
        acc = _acc_dtype(out.device)
        k_shape = tuple(out.shape[1:])
        out = out.view(1 + rows, b, *k_shape)
        y_full = out[0].to(acc)
        if m == 1:
            coalitions = out[1:]  # [G, B, *k]; cat() below widens it exactly
        else:  # mean()'s summation order follows the memory layout: average in the row-major
            # layout [B, G, m, *k], so the rounding does not depend on the group-major buffer
            groups = out[1:].view(g, m, b, *k_shape).movedim(2, 0)
            coalitions = groups.to(acc, memory_format=torch.contiguous_format).mean(2).movedim(0, 1)
        if imputed_empty:
            chain = torch.cat([coalitions, y_full.unsqueeze(0)])
            y_empty = None
        else:
            prev = self.y_empty
            if prev is None:
                prev = y_full[0]
            elif tuple(prev.shape) != k_shape:
                raise ValueError(
                    f"model_fn output per row changed from {list(prev.shape)} to {list(k_shape)}"
                )
            elif prev.device != y_full.device or prev.dtype != acc:
                prev = prev.to(device=y_full.device, dtype=acc)
            empties = ema_prefix(y_full, prev, self.alpha)  # y_empty after each row's update
            chain = torch.cat([empties.unsqueeze(0), coalitions, y_full.unsqueeze(0)])
            y_empty = empties[-1]
        losses = self._group_loss(chain, y, acc)  # [d + 1, B], by position in the chain
        by_position = losses[:-1] - losses[1:]  # [d, B]
        delta = by_position.t().gather(1, rank)  # delta[b, j] = by_position[rank[b, j], b]
        if y_empty is not None:
            self.y_empty = y_empty  # stays on the device of the outputs
        return delta

    # ------------------------------------------------------------------ compiled path
    def _uncovered(self) -> str | None:
        """Why the compiled step cannot run this configuration (None: it can)."""
        if self.chunk_size is not None:
            return "chunk_size is set (the compiled step evaluates a batch in one call)"
        if self.removal == "observational":
            return (
                "observational removal is not covered (the conditional sampler draws "
                "outside the compiled step)"
            )
        if type(self.imputer) is not MarginalImputer:
            return f"the imputer ({type(self.imputer).__name__}) is not the built-in one"
        if not isinstance(self.storage, _Reservoir):
            return f"the storage ({type(self.storage).__name__}) is not a built-in reservoir"
        return None

    def _step_config(self, b: int, dtype: torch.dtype) -> SageConfig:
        product = cast(MarginalImputer, self.imputer).mode == "product"
        return SageConfig(loss_step_config(self, b, dtype), product,
                          self.empty_prediction == "imputed")

    def _column_group(self, device: torch.device) -> torch.Tensor | None:
        """The group of every column on ``device`` (cached); None without groups."""
        if self.groups is None:
            return None
        hit = self._column_groups.get(device)
        if hit is None:
            hit = self._column_groups[device] = self.groups.column_group.to(device)
        return hit

    def _prefix_blocks(
        self, b: int, dtype: torch.dtype, device: torch.device
    ) -> tuple[tuple[torch.Tensor, torch.Tensor], ...]:
        """The weights of :func:`~torchstream.explain._base.ema_prefix` for ``b`` rows, per
        block of 128 rows (none for one row)."""
        if b == 1:
            return ()
        return tuple(
            _ema_weights(min(128, b - start), self.alpha, dtype, device)
            for start in range(0, b, 128)
        )

    def _fused_explain(self, X: torch.Tensor, y: torch.Tensor, module: nn.Module) -> bool:
        """One batch through the compiled step; False where this batch must run eagerly (then
        nothing has changed)."""
        X, y = self._check_batch(X, y)
        smoother = self.smoother
        imputed_empty = self.empty_prediction == "imputed"
        if (
            not self._checked
            or smoother.n == 0
            or self._storage_size() == 0
            or (not imputed_empty and self.y_empty is None)
        ):
            return False  # the first explained batch checks the model's output eagerly
        self._place(X)
        b, d = X.shape
        sizes, positions = self._plan(b, X)
        rows = sizes.shape[0]
        if (1 + rows) * b * d * X.element_size() > COMPILED_BYTES:
            if not self._said_too_big:
                self._said_too_big = True
                warnings.warn(
                    f"IncrementalSAGE(compile=True): a batch of {b} rows needs "
                    f"{(1 + rows) * b:,} model-input rows of {d} features, more than "
                    f"COMPILED_BYTES ({COMPILED_BYTES // 2**20} MiB) at once: batches this "
                    f"large are explained eagerly, chunk by chunk",
                    RuntimeWarning,
                    stacklevel=4,
                )
            return False
        acc = _acc_dtype(X.device)
        cfg = self._step_config(b, acc)
        storage = self.storage
        data = storage._data
        if data.device != X.device:
            self._compile_off(f"the storage is on {data.device}, the batch on {X.device}")
            return False
        per_row = 1 if not cfg.product else self.n_explained_features
        saved = self._save_generators(self._generators())
        try:  # the draws of the eager path, in its order
            u = to_device(torch.rand(b, self.n_explained_features, generator=self.generator),
                          X.device)
            idx = storage.sample_indices(b * rows * per_row) if rows else None
        except BaseException:
            self._restore_generators(saved)
            raise
        rn, plan = self._ema_inputs(smoother, b, cfg.step.ema)
        blocks = () if imputed_empty else self._prefix_blocks(b, acc, X.device)
        key = (b, X.dtype, y.dtype, X.device, tuple(data.shape), data.dtype, cfg.step.ema)
        if self._step_fn is None:
            self._step_fn = compiled_isage_step()
        step_fn = self._step_fn
        column_group = self._column_group(X.device)
        y_empty = self.y_empty
        res = self._call_compiled(key, lambda: step_fn(
            module, X, y, u, data, idx, sizes, positions, column_group, y_empty, blocks,
            smoother.raw, smoother.sq_dev, rn, plan, cfg,
        ), saved)
        if res is None or not self._passed(res.ok, saved):
            return False
        self._fold_step(smoother, cfg.step.ema, res.raw, res.sq_dev, lambda: res.delta, b)
        if not imputed_empty:
            self.y_empty = res.y_empty
        self.n_batches += 1
        storage._update_finite(X)  # X was checked by the flag
        return True

    def _generators(self) -> list[torch.Generator]:
        """The permutations' generator and the storage's / imputer's (restored if the batch
        fails)."""
        out = [self.generator]
        for source in (self.storage, self.imputer):
            g = getattr(source, "generator", None)
            if isinstance(g, torch.Generator) and all(g is not h for h in out):
                out.append(g)
        return out

    def _plan(self, b: int, X: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Cached per ``(B, device)``: the coalition size of every imputed row ``r`` as
        ``[G m]`` and the positions ``0..d-1`` as ``[B, d]`` (for the inverse permutation), on
        ``X``'s device."""
        key = (b, X.device)
        if self._plan_key != key:
            m = self.n_samples
            p = self.n_explained_features
            first = 0 if self.empty_prediction == "imputed" else 1
            sizes = torch.arange(first, p).repeat_interleave(m)
            self._plan_cache = (sizes.to(X.device), torch.arange(p, device=X.device).expand(b, p))
            self._plan_key = key
        return self._plan_cache

    def chunk_rows(self, X: torch.Tensor) -> int:
        """Rows of the expanded model input per ``model_fn`` call: ``chunk_size``, or (``None``)
        as many rows of ``X``'s width and dtype as fit in :data:`CHUNK_BYTES` on the CPU,
        :data:`COMPILED_BYTES` on another device."""
        if self.chunk_size is not None:
            return self.chunk_size
        budget = CHUNK_BYTES if X.device.type == "cpu" else COMPILED_BYTES
        return max(1, budget // (X.shape[1] * X.element_size()))

    def _buffer(self, n: int, X: torch.Tensor) -> torch.Tensor:
        """A reused input buffer of at least ``n`` rows of ``X``'s width, dtype and device."""
        buf = self._buf
        if buf is None or buf.shape[0] < n or buf.dtype != X.dtype or buf.device != X.device:
            buf = self._buf = torch.empty(n, X.shape[1], dtype=X.dtype, device=X.device)
        return buf[:n]

    def _evaluate_chain(
        self, model_fn: ModelFn, X: torch.Tensor, rank: torch.Tensor, sizes: torch.Tensor
    ) -> torch.Tensor:
        """The model outputs ``[(1 + G m) B, *k]``, group-major: the batch, then for every
        imputed row ``r`` the ``B`` rows that keep the features ``j`` with ``rank[b, j] <
        sizes[r]`` of batch row ``b`` and impute the others.

        When the batch and all its imputed rows fit in one chunk of :meth:`chunk_rows` rows,
        they go to the model in one call, built in one buffer (:meth:`_impute_into`).
        Otherwise the batch goes first, then the imputed rows in chunks built just before
        their call (:meth:`_chunk_filler`), so the memory is that of one chunk, not
        ``O(B G m d)``; the chunks are consecutive ranges of ``(b, r)`` in row-major order and
        the outputs are put back in group-major order. The imputed values are the same
        whatever the chunk size (see :meth:`_chunk_filler`)."""
        b, d = X.shape
        rows = sizes.shape[0]
        chunk = self.chunk_rows(X)
        if (1 + rows) * b <= chunk:  # everything in one call
            buf = self._buffer((1 + rows) * b, X).view(1 + rows, b, d)
            self._impute_into(buf[1:], X, rank, sizes.view(rows, 1, 1))
            buf[0].copy_(X)
            return self._forward(model_fn, buf.view((1 + rows) * b, d))
        n = b * rows
        fill = self._chunk_filler(X, rank, sizes)
        y_out = self._forward(model_fn, X)
        k_shape = tuple(y_out.shape[1:])
        out = y_out.new_empty((1 + rows, b, *k_shape))
        out[0] = y_out
        by_row = out[1:].transpose(0, 1)  # [B, G m, *k]: row-major (b, r) view
        buf = self._buffer(min(chunk, n), X)
        for start in range(0, n, chunk):
            part = buf[: min(chunk, n - start)]
            fill(part, start)
            res = self._forward(model_fn, part)
            if tuple(res.shape[1:]) != k_shape:
                widths = sorted({k_shape, tuple(res.shape[1:])})
                raise ValueError(
                    f"model_fn returned outputs of different widths across chunks at step "
                    f"{self.n_batches}: {widths}"
                )
            self._scatter_rows(by_row, res, start)
        return out.view((1 + rows) * b, *k_shape)

    @staticmethod
    def _scatter_rows(by_row: torch.Tensor, res: torch.Tensor, start: int) -> None:
        """Write the outputs ``res`` of the row-major rows ``start ..`` into ``by_row [B, R,
        *k]`` (a partial batch row, whole batch rows, a partial batch row)."""
        rows = by_row.shape[1]
        pos, stop, at = start, start + res.shape[0], 0
        while pos < stop:
            b0, r0 = divmod(pos, rows)
            if r0 == 0 and stop - pos >= rows:
                nb = (stop - pos) // rows
                by_row[b0 : b0 + nb] = res[at : at + nb * rows].view(nb, rows, *res.shape[1:])
                step = nb * rows
            else:
                step = min(rows - r0, stop - pos)
                by_row[b0, r0 : r0 + step] = res[at : at + step]
            pos += step
            at += step

    def _scratch(self, n: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A reused flat integer buffer of at least ``n`` elements (the mask of a block)."""
        buf = self._scratch_buf
        if buf is None or buf.numel() < n or buf.dtype != dtype or buf.device != device:
            buf = self._scratch_buf = torch.empty(n, dtype=dtype, device=device)
        return buf[:n]

    def _chunk_filler(
        self, X: torch.Tensor, rank: torch.Tensor, sizes: torch.Tensor
    ) -> Callable[[torch.Tensor, int], None]:
        """A function writing the imputed rows ``start .. start + len(out) - 1`` (row-major
        ``(b, r)``, ``[B, G m]`` in all) into ``out``.

        The built-in marginal imputer on a reservoir draws chunk by chunk
        (:meth:`_reservoir_filler`); ``torch.randint`` on the CPU generator is sequential, so
        the draws equal those for the whole batch at once, whatever the chunk size. A custom
        imputer or sampler gets the whole mask ``[B, G m, d]`` in one call (its protocol, and
        the order of its draws is its own) and the chunks are copied from its result."""
        fill = self._reservoir_filler(X, rank, sizes)
        if fill is not None:
            return fill
        b, d = X.shape
        rows = sizes.shape[0]
        mask = rank.view(b, 1, d) < sizes.view(1, rows, 1)  # [B, G m, d]
        if self._pending is not None:  # a sampler checks and reads x itself: the batch first
            self._resolve_pending([])
        imputed = self.imputer.impute(X, mask, self.storage)
        if imputed.shape != (b, rows, d):
            raise ValueError(f"imputer returned {list(imputed.shape)}, expected [{b}, {rows}, {d}]")
        flat = imputed.reshape(b * rows, d)

        def copy(out: torch.Tensor, start: int) -> None:
            out.copy_(flat[start : start + out.shape[0]])

        return copy

    def _reservoir_filler(
        self, X: torch.Tensor, rank: torch.Tensor, sizes: torch.Tensor
    ) -> Callable[[torch.Tensor, int], None] | None:
        """For the built-in marginal imputer on a reservoir: the function of
        :meth:`_chunk_filler`; None otherwise.

        The draws are those of :class:`~torchstream.explain.imputers.MarginalImputer` for the
        whole mask ``[B, G m, d]``: ``"joint"`` one slot per ``(b, r)``, ``"product"`` one per
        ``(b, r, j)`` (per ``(b, r, group)`` with groups), in that order, drawn here range by
        range and gathered straight from the reservoir's rows into ``out``; the present
        features are then copied from ``X`` (:meth:`_keep_present`)."""
        storage = self.storage
        imputer = self.imputer
        # the exact built-in class only: a subclass may override impute()
        if type(imputer) is not MarginalImputer or not isinstance(storage, _Reservoir):
            return None
        data = storage._data
        d = X.shape[1]
        rows = sizes.shape[0]
        joint = imputer.mode == "joint"
        fg = self.groups
        column_group = None if fg is None or joint else fg.column_group.to(data.device)
        per_row = 1 if joint else d if fg is None else fg.n_groups  # draws per (b, r)
        feature = None if joint else torch.arange(d, device=data.device)
        flat_data = data.view(-1)
        direct = data.dtype == X.dtype and data.device == X.device  # gather straight into out
        X3 = X.contiguous().unsqueeze(1)  # [B, 1, d]
        rank3 = rank.unsqueeze(1)  # [B, 1, d]
        sizes3 = sizes.view(1, -1, 1)  # [1, G m, 1]

        def rect(out: torch.Tensor, b0: int, nb: int, r0: int, rc: int) -> None:
            """Rows ``(b0 .. b0 + nb - 1) x (r0 .. r0 + rc - 1)`` into ``out [nb, rc, d]``."""
            idx = storage.sample_indices(nb * rc * per_row)
            if feature is None:  # joint
                if direct:
                    torch.index_select(data, 0, idx, out=out.view(nb * rc, d))
                else:
                    out.copy_(data.index_select(0, idx).view(nb, rc, d))
            else:
                idx = idx.view(nb, rc, per_row)
                if column_group is not None:  # every column from its group's row
                    idx = idx[..., column_group]
                where = torch.add(feature, idx, alpha=d)
                if direct:
                    torch.take(flat_data, where, out=out)
                else:
                    out.copy_(flat_data.take(where))
            self._keep_present(out, X3[b0 : b0 + nb], rank3[b0 : b0 + nb],
                               sizes3[:, r0 : r0 + rc])

        def fill(out: torch.Tensor, start: int) -> None:
            pos, stop = start, start + out.shape[0]
            while pos < stop:  # a partial batch row, whole batch rows, a partial batch row
                b0, r0 = divmod(pos, rows)
                if r0 == 0 and stop - pos >= rows:
                    nb, rc = (stop - pos) // rows, rows
                else:
                    nb, rc = 1, min(rows - r0, stop - pos)
                at = pos - start
                rect(out[at : at + nb * rc].view(nb, rc, d), b0, nb, r0, rc)
                pos += nb * rc

        return fill

    def _keep_present(
        self, out: torch.Tensor, x: torch.Tensor, rank: torch.Tensor, sizes: torch.Tensor
    ) -> None:
        """In place: ``out`` takes ``x`` where ``rank < sizes`` (the present features; all four
        broadcast to ``out``'s shape, ``x`` contiguous along its last dimension).

        Large blocks select on the values' bit patterns (exact, signed zeros and all):
        ``out = x ^ ((x ^ out) & absent)`` with the mask ``absent = (sizes - 1 - rank) >>
        (bits - 1)`` (all ones where ``rank >= sizes``), a few vectorised passes instead of a
        comparison and a ``where``; small blocks (fewer operations) use the latter."""
        bits = _BIT_VIEWS.get(out.element_size()) if out.is_floating_point() else None
        if (
            bits is None
            or out.numel() < _BITWISE_MIN
            or self.n_explained_features >= torch.iinfo(bits).max
        ):
            torch.where(rank < sizes, x, out, out=out)
            return
        absent = self._scratch(out.numel(), bits, out.device).view(out.shape)
        torch.sub((sizes - 1).to(bits), rank.to(bits), out=absent)
        absent.bitwise_right_shift_(8 * out.element_size() - 1)  # all ones where absent
        x_bits = x.view(bits)
        out.view(bits).bitwise_xor_(x_bits).bitwise_and_(absent).bitwise_xor_(x_bits)

    def _impute_into(
        self, out: torch.Tensor, X: torch.Tensor, rank: torch.Tensor, sizes: torch.Tensor
    ) -> None:
        """Write the imputed rows, group-major ``[G m, B, d]``, into ``out``: group ``r`` of row
        ``b`` keeps the features ``j`` with ``rank[b, j] < sizes[r]``.

        The imputer gets ``mask [B, G m, d]`` and its draws fill ``(b, r)`` in that order. For
        the built-in marginal imputer on a reservoir the same draws (the same slot indices, the
        same random numbers) are gathered straight into group-major order instead."""
        b, d = X.shape
        rows = out.shape[0]
        storage = self.storage
        imputer = self.imputer
        data = None
        # the exact built-in class only: a subclass may override impute()
        if type(imputer) is MarginalImputer and isinstance(storage, _Reservoir):
            data = storage._data
        if data is not None:
            direct = data.dtype == X.dtype and data.device == X.device  # gather into out
            # draw t fills (b, r) = divmod(t, G m)
            if cast(MarginalImputer, imputer).mode == "joint":
                idx = storage.sample_indices(b * rows).view(b, rows).t().reshape(-1)
                if direct:
                    torch.index_select(data, 0, idx, out=out.view(rows * b, d))
                else:
                    out.copy_(data.index_select(0, idx).view(rows, b, d))
            else:
                if self.groups is not None:  # product by group: draw t fills (b, r, group)
                    n_groups = self.groups.n_groups
                    idx = storage.sample_indices(b * rows * n_groups).view(b, rows, n_groups)
                    idx = idx[..., self.groups.column_group.to(idx.device)].transpose(0, 1)
                else:  # product: draw t fills (b, r, j) in that order, feature j of its row
                    idx = storage.sample_indices(b * rows * d).view(b, rows, d).transpose(0, 1)
                feature = torch.arange(d, device=idx.device)
                where = torch.add(feature, idx, alpha=d)
                if direct:
                    torch.take(data.view(-1), where, out=out)
                else:
                    out.copy_(data.view(-1).take(where))
            self._keep_present(out, X.contiguous().view(1, b, d), rank.view(1, b, d), sizes)
            return
        mask = rank.view(b, 1, d) < sizes.view(1, rows, 1)  # [B, G m, d]
        if self._pending is not None:  # a sampler checks and reads x itself: the batch first
            self._resolve_pending([])
        imputed = imputer.impute(X, mask, storage)
        if imputed.shape != (b, rows, d):
            raise ValueError(f"imputer returned {list(imputed.shape)}, expected [{b}, {rows}, {d}]")
        out.copy_(imputed.transpose(0, 1))

    def _extra_state(self) -> dict[str, object]:
        return {
            "y_empty": None if self.y_empty is None else self.y_empty.clone(),
            "empty_prediction": self.empty_prediction,
            "removal": self.removal,
        }

    def _load_extra_state(self, state: Mapping[str, Any]) -> None:
        for key in ("empty_prediction", "removal"):
            value = state.get(key, "interventional") if key == "removal" else state[key]
            if value != getattr(self, key):
                raise ValueError(
                    f"state has {key}={value!r}, this explainer {getattr(self, key)!r}"
                )
        y_empty = state["y_empty"]
        self.y_empty = None if y_empty is None else y_empty.clone()
