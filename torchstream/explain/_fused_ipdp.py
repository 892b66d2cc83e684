"""One iPDP step as a pure tensor function, for ``torch.compile`` (``compile=True`` of
:class:`~torchstream.explain.ipdp.IncrementalPDP`).

:func:`ipdp_step` does the per-batch work of :class:`~torchstream.explain.ipdp.IncrementalPDP`
that touches the model: it builds the ICE inputs (every row of the batch once per evaluation
point, the explained feature set to that point: a value, a one-hot category, or a nullable
numeric's value with its missing indicator), calls the model once, picks the explained output
(a class column or the value), folds the ICE curves and the evaluation points into the
exponential moving averages of the PD plot (Alg. 1 of [iPDP]_, in closed form for a batch) and
computes one flag that says whether the batch passed the trust checks (finite ``X`` and
outputs, a model output of an accepted shape, a one-hot block or a missing indicator of valid
values). What depends on the data in ways a static graph cannot express (the evaluation points
from the range storage, the running mean a missing cell becomes, the storage update) is done
outside, exactly as on the eager path, and passed in as tensors.

:func:`compiled_ipdp_step` wraps a private copy of :func:`ipdp_step` (its own code object,
hence its own cache of compiled graphs: one per batch shape and number of points) in
``torch.compile(dynamic=False, fullgraph=True)``.

.. [iPDP] M. Muschalik, F. Fumagalli, R. Jagtani, B. Hammer, E. Hüllermeier (2023). iPDP: On
   Partial Dependence Plots in Dynamic Modeling Scenarios. xAI 2023, CCIS 1901, 177-194.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from torchstream.compiling import compile_private
from torchstream.explain._fused import _ema
from torchstream.typing import ModelFn

__all__ = ["IpdpConfig", "IpdpResult", "compiled_ipdp_step", "ipdp_step"]


class IpdpConfig(NamedTuple):
    """The constants of a step (hashable: the compiled graph is specialised on them).

    ``kind`` is ``"numeric"``, ``"categorical"`` or ``"nullable"``; ``feature`` the value
    column (a one-hot block's first column), ``indicator`` a nullable numeric's missing
    indicator column (-1 otherwise), ``block`` the explained columns; ``grid_size`` is ``m``
    (the categories of a one-hot block) and ``n_extra`` 1 for the "missing" point of a nullable
    numeric, else 0; ``output_index`` as in :func:`~torchstream.explain.pdp_grid._evaluate`;
    ``acc_dtype`` the dtype of the EMAs; ``ema`` whether the EMA is folded here (``decay`` is
    ``(1 - alpha)^B``), else only the ICE values and the points are returned."""

    kind: str
    feature: int
    indicator: int
    block: tuple[int, ...]
    grid_size: int
    n_extra: int
    output_index: int | None
    acc_dtype: torch.dtype
    alpha: float
    ema: bool
    decay: float


class IpdpResult(NamedTuple):
    """``ice [B, m + n_extra]`` and the points ``[m + n_extra]`` as folded (``acc_dtype``; a
    one-point range repeated ``m`` times), the new raw EMA and EMA of squared deviations
    ``[2, m + n_extra]`` (the old ones when the EMA is not folded here) and ``ok``, a 0-d
    bool: every check passed."""

    ice: torch.Tensor
    points: torch.Tensor
    raw: torch.Tensor
    sq_dev: torch.Tensor
    ok: torch.Tensor


def _ice_input(X: torch.Tensor, z: torch.Tensor, cfg: IpdpConfig) -> torch.Tensor:
    """The model input ``[B (n + n_extra), d]``, row-major in (batch row, point): row ``b`` with
    the feature set to point ``z[k]`` (``n = len(z) - n_extra`` numeric points, or the
    one-hot row of category ``k``), then, for a nullable numeric, the value ``z[n]`` with the
    missing indicator 1 (the numeric points have it 0)."""
    b, d = X.shape
    rows = z.shape[0]
    n = rows - cfg.n_extra
    Z = X.unsqueeze(1).expand(b, rows, d).clone()
    if cfg.kind == "categorical":
        block = torch.tensor(cfg.block, device=X.device)
        Z[:, :, block] = torch.eye(cfg.grid_size, dtype=X.dtype, device=X.device)
    else:
        Z[:, :n, cfg.feature] = z[:n]
    if cfg.n_extra:
        Z[:, :n, cfg.indicator] = 0.0
        Z[:, n, cfg.feature] = z[n]
        Z[:, n, cfg.indicator] = 1.0
    return Z.view(b * rows, d)


def _explained_output(out: object, n: int, cfg: IpdpConfig) -> torch.Tensor | None:
    """The explained output ``[n]`` of the model's output ``out``, or None where ``out`` is not
    a tensor ``[n]`` or ``[n, k]`` fitting ``output_index`` (decided when the graph is built:
    the shapes are static)."""
    if not isinstance(out, torch.Tensor) or out.dim() not in (1, 2) or out.shape[0] != n:
        return None
    if out.dim() == 1:
        return out if cfg.output_index is None else None
    k = out.shape[1]
    index = cfg.output_index if cfg.output_index is not None else (1 if k >= 2 else 0)
    return out[:, index] if index < k else None


def _checks(X: torch.Tensor, ice: torch.Tensor, cfg: IpdpConfig) -> torch.Tensor:
    """0-d bool: ``X`` and the ICE values are finite; a one-hot block has exactly one 1 and
    zeros in every row; a missing indicator is 0 or 1."""
    ok = torch.isfinite(X).all() & torch.isfinite(ice).all()
    if cfg.kind == "categorical":
        block = X[:, list(cfg.block)]
        bad = ((block != 0) & (block != 1)).any(1) | (block.sum(1) != 1)
        ok = ok & ~bad.any()
    elif cfg.kind == "nullable":
        indicator = X[:, cfg.indicator]
        ok = ok & ((indicator == 0) | (indicator == 1)).all()
    return ok


def ipdp_step(
    model: ModelFn,
    X: torch.Tensor,
    z: torch.Tensor,
    raw: torch.Tensor,
    sq_dev: torch.Tensor,
    rn: torch.Tensor,
    plan: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    cfg: IpdpConfig,
) -> IpdpResult:
    """One iPDP step on the batch ``X [B, d]`` (see the module docstring).

    ``z`` holds the evaluation points in ``X``'s dtype (``m`` points, one for a one-point
    range, the category indices of a one-hot block; for a nullable numeric followed by the
    value of its "missing" point); ``raw``, ``sq_dev`` ``[2, m + n_extra]`` and ``rn`` are the
    smoother's state and ``plan`` its prefix weights for ``B > 1``."""
    b = X.shape[0]
    rows = z.shape[0]
    n = rows - cfg.n_extra
    m = cfg.grid_size
    picked = _explained_output(model(_ice_input(X, z, cfg)), b * rows, cfg)
    shape_ok = picked is not None
    if picked is None:  # the eager redo names the problem
        picked = X.new_zeros(b * rows)
    ice = picked.to(cfg.acc_dtype).view(b, rows)
    ok = _checks(X, ice, cfg) & shape_ok
    points = z.to(cfg.acc_dtype)
    if n != m:  # one point: its ICE value in all m numeric columns of the EMA
        ice = torch.cat([ice[:, :1].expand(b, m), ice[:, 1:]], 1)
        points = torch.cat([points[:1].expand(m), points[1:]])
    if not cfg.ema:
        return IpdpResult(ice, points, raw, sq_dev, ok)
    values = torch.stack([points.expand(b, m + cfg.n_extra), ice], 1)
    new_raw, new_sq = _ema(values, raw, sq_dev, rn, plan, cfg.alpha, cfg.decay)
    return IpdpResult(ice, points, new_raw, new_sq, ok)


def compiled_ipdp_step() -> Callable[..., IpdpResult]:
    """:func:`ipdp_step` compiled on a private copy (:func:`~torchstream.compiling.
    compile_private`)."""
    return compile_private(ipdp_step)
