"""One iSAGE step as a pure tensor function, for ``torch.compile`` (``compile=True`` of
:class:`~torchstream.explain.isage.IncrementalSAGE`).

:func:`isage_step` does the whole per-batch work of interventional iSAGE with the built-in
marginal imputer on a reservoir, after the random draws: it turns the uniforms into one
permutation per row, gathers the imputed rows of every coalition of the chain (``"joint"``: all
removed features of a row from one stored row, ``"product"``: every removed feature, or group,
from its own), builds the model input ``[1 + G m, B, d]``, calls the module, averages the ``m``
imputed predictions per coalition, updates the mean prediction ``y_empty`` row by row (or uses
the imputed empty coalition), scores the chain's losses and takes the marginal contributions
along each row's permutation (Alg. 1 of [SAGE]_), folds them into the exponential moving
average and computes one flag that says whether the batch and the outputs passed the trust
checks (finite ``X``, ``y`` and outputs; labels in the model's range). The draws themselves (the
uniforms of the permutations and the reservoir slots) are made outside with the explainer's
generators, exactly as the eager path makes them, so both paths give the same estimates under a
fixed seed.

:func:`compiled_isage_step` wraps a private copy of :func:`isage_step` in
``torch.compile(dynamic=False, fullgraph=True)``, as :func:`~torchstream.explain._fused.
compiled_step` does for iPFI.

.. [SAGE] M. Muschalik, F. Fumagalli, B. Hammer, E. Hüllermeier (2023). iSAGE: an incremental
   version of SAGE for online explanation on data streams. *ECML PKDD 2023*, LNCS 14171,
   428-445.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

from torchstream.compiling import compile_private
from torchstream.explain._fused import StepConfig, _checks, _ema, _label_rows, _losses

__all__ = ["SageConfig", "SageResult", "compiled_isage_step", "isage_step"]

#: ``(w [n, n], decay [n, 1])`` per block of the ``y_empty`` prefix (see
#: :func:`~torchstream.explain._base.ema_prefix`); empty for one row.
PrefixBlocks = tuple[tuple[torch.Tensor, torch.Tensor], ...]


class SageConfig(NamedTuple):
    """The constants of an iSAGE step (hashable): ``step`` those shared with iPFI
    (:class:`~torchstream.explain._fused.StepConfig`: ``n_samples`` is ``m``, ``n_groups`` is
    ``G`` with feature groups, else 0), ``product`` the imputer's mode (``"product"`` rather
    than ``"joint"``) and ``imputed_empty`` the empty prediction (``"imputed"`` rather than the
    EMA of the outputs)."""

    step: StepConfig
    product: bool
    imputed_empty: bool


class SageResult(NamedTuple):
    """``delta [B, P]``, the new raw EMA and EMA of squared deviations (the old ones when the
    EMA is not folded here), the new ``y_empty`` (the old one with the imputed empty
    prediction) and ``ok``, a 0-d bool: every check passed."""

    delta: torch.Tensor
    raw: torch.Tensor
    sq_dev: torch.Tensor
    y_empty: torch.Tensor | None
    ok: torch.Tensor


def _drawn(
    data: torch.Tensor, idx: torch.Tensor, b: int, rows: int,
    column_group: torch.Tensor | None, cfg: SageConfig,
) -> torch.Tensor:
    """The stored values ``[R, B, d]`` (group-major) the removed features take: the slots
    ``idx`` fill ``(b, r)`` row-major (``"joint"``), or ``(b, r, j)`` (``"product"``; ``(b, r,
    group)`` with groups, every column then from its group's slot)."""
    d = data.shape[1]
    if not cfg.product:
        return data.index_select(0, idx).view(b, rows, d).transpose(0, 1)
    per_row = cfg.step.n_groups or d
    slots = idx.view(b, rows, per_row)
    if column_group is not None:
        slots = slots[..., column_group]
    feature = torch.arange(d, device=idx.device)
    return data.reshape(-1).take(slots * d + feature).transpose(0, 1)


def _prefix(
    values: torch.Tensor, prev: torch.Tensor, blocks: PrefixBlocks, alpha: float
) -> torch.Tensor:
    """The EMA after each row of ``values [B, *k]`` from ``prev [*k]``, in the closed form of
    :func:`~torchstream.explain._base.ema_prefix` (its blocks' weights are ``blocks``)."""
    if not blocks:  # one row
        return torch.lerp(prev.to(values.dtype), values[0], alpha).unsqueeze(0)
    flat = values.reshape(values.shape[0], -1)
    state = prev.reshape(1, -1).to(flat.dtype)
    out = []
    start = 0
    for w, decay in blocks:
        n = w.shape[0]
        chunk = w @ flat[start : start + n] + decay * state
        out.append(chunk)
        state = chunk[-1:]
        start += n
    return (out[0] if len(out) == 1 else torch.cat(out)).reshape(values.shape)


def isage_step(
    module: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    u: torch.Tensor,
    data: torch.Tensor,
    idx: torch.Tensor | None,
    sizes: torch.Tensor,
    positions: torch.Tensor,
    column_group: torch.Tensor | None,
    y_empty: torch.Tensor | None,
    blocks: PrefixBlocks,
    raw: torch.Tensor,
    sq_dev: torch.Tensor,
    rn: torch.Tensor,
    plan: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    cfg: SageConfig,
) -> SageResult:
    """One iSAGE step on the batch ``X [B, d]``, ``y [B]`` (see the module docstring).

    ``u [B, P]`` are the uniforms of the permutations (``P`` players: the columns, or the
    groups, whose columns ``column_group [d]`` maps to them), ``data`` the reservoir's slots and
    ``idx`` the slots drawn for the imputed rows (None when no coalition is imputed);
    ``sizes [R]`` is the coalition size of every imputed row ``r`` (``R = G m``), ``positions
    [B, P]`` the positions ``0..P-1`` per row; ``y_empty`` the mean prediction before the batch
    (None with the imputed empty prediction) and ``blocks`` the weights of its prefix;
    ``raw``, ``sq_dev`` and ``rn`` are the smoother's state and ``plan`` its prefix weights for
    ``B > 1``."""
    step = cfg.step
    b, d = X.shape
    m = step.n_samples
    rows = sizes.shape[0]
    g = rows // m
    perm = u.argsort(dim=1, stable=True)
    rank = torch.zeros_like(perm).scatter(1, perm, positions)  # the inverse permutation
    if idx is not None:
        col_rank = rank if column_group is None else rank[:, column_group]
        drawn = _drawn(data, idx, b, rows, column_group, cfg).to(X.dtype)
        keep = col_rank.unsqueeze(0) < sizes.view(rows, 1, 1)  # the present features
        imputed = torch.where(keep, X.unsqueeze(0), drawn)  # [R, B, d]
        Z = torch.cat([X.unsqueeze(0), imputed]).view(-1, d)
    else:  # d = 1 with the EMA empty prediction: only the batch itself
        Z = X
    out = module(Z)
    if out.dim() == 2 and out.shape[1] == 1:
        out = out.reshape(-1)
    k_shape = out.shape[1:]
    ok = _checks(X, y, out, step)
    if not cfg.imputed_empty and (y_empty is None or tuple(y_empty.shape) != tuple(k_shape)):
        # the output width changed: the batch is redone eagerly, which raises
        return SageResult(torch.zeros_like(u, dtype=raw.dtype), raw, sq_dev, y_empty,
                          torch.zeros((), dtype=torch.bool, device=ok.device))
    label_ok = _label_rows(y, out, step)  # a label out of range is scored as class 0, flagged
    y_loss = y if label_ok is None else torch.where(label_ok, y, torch.zeros_like(y))
    acc = step.acc_dtype
    grid = out.view(1 + rows, b, *k_shape)
    y_full = grid[0].to(acc)
    if m == 1:
        coalitions = grid[1:].to(acc)  # [G, B, *k]
    else:  # the mean over the m samples, in the row-major layout of the eager path
        samples = grid[1:].view(g, m, b, *k_shape).movedim(2, 0).to(acc)
        coalitions = samples.contiguous().mean(2).movedim(0, 1)
    if cfg.imputed_empty:
        chain = torch.cat([coalitions, y_full.unsqueeze(0)])
        new_empty = y_empty
    else:
        assert y_empty is not None
        empties = _prefix(y_full, y_empty.to(acc), blocks, step.alpha)  # after each row
        chain = torch.cat([empties.unsqueeze(0), coalitions, y_full.unsqueeze(0)])
        new_empty = empties[-1]
    losses = _losses(chain, y_loss, step)  # [P + 1, B], by position in the chain
    by_position = losses[:-1] - losses[1:]
    delta = by_position.t().gather(1, rank)  # delta[b, j] = by_position[rank[b, j], b]
    if not step.ema:
        return SageResult(delta, raw, sq_dev, new_empty, ok)
    new_raw, new_sq = _ema(delta, raw, sq_dev, rn, plan, step.alpha, step.decay)
    return SageResult(delta, new_raw, new_sq, new_empty, ok)


def compiled_isage_step() -> Callable[..., SageResult]:
    """:func:`isage_step` compiled on a private copy (:func:`~torchstream.compiling.
    compile_private`)."""
    return compile_private(isage_step)
