"""One iPFI step as a pure tensor function, for ``torch.compile`` (``compile=True`` of
:class:`~torchstream.explain.ipfi.IncrementalPFI`).

:func:`ipfi_step` does the whole per-batch work of :class:`~torchstream.explain.ipfi.IncrementalPFI`
after the random draws: it gathers the replacement values, builds the model input
``[1 + d K, B, d]``, calls the module, scores the losses, takes the differences (Alg. 1 of
[PFI]_), folds them into the exponential moving average and computes one flag that says whether
the batch and the outputs passed the trust checks (finite ``X``, ``y`` and outputs; labels in
the model's range). The draws themselves (slot indices of the reservoir, or rows of another
storage) are made outside with the explainer's generators, exactly as the eager path makes
them, so both paths give the same estimates under a fixed seed.

:func:`compiled_step` wraps a private copy of :func:`ipfi_step` (its own code object, hence its
own cache of compiled graphs: one per batch shape) in ``torch.compile(dynamic=False,
fullgraph=True)``; :func:`loss_step_config` gives the constants of a batch. Compiled kernels
are also kept in torch inductor's on-disk cache (the ``torchinductor_<user>`` folder of the
system's temporary directory, or ``$TORCHINDUCTOR_CACHE_DIR``), so a later process compiles the
same step in a few seconds.

.. [PFI] F. Fumagalli, M. Muschalik, E. Hüllermeier, B. Hammer (2023). Incremental permutation
   feature importance (iPFI). *Machine Learning* 112, 4863-4903.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch
from torch import nn

from torchstream.explain._base import _CLASS_LOSSES, _REGRESSION_LOSSES, LossExplainer
from torchstream.compiling import compile_private
from torchstream.losses import BroadcastLossFn, LossFn

__all__ = ["StepConfig", "StepResult", "compiled_step", "ipfi_step", "loss_step_config"]


class StepConfig(NamedTuple):
    """The constants of a step (hashable: the compiled graph is specialised on them).

    ``broadcast_loss`` (a named loss) or ``loss_fn`` (a callable) scores the outputs in
    ``acc_dtype``; ``labels`` says which label checks apply: ``"class"`` (integers in the
    model's range, for a class loss), ``"onehot"`` (the same, only for an ``[n, k]`` output of
    a regression loss) or ``"none"``; ``ema`` whether the EMA is folded here (``decay`` is
    ``(1 - alpha)^B``), else only the contributions are returned; ``n_groups`` is ``G`` with
    feature groups (the member mask is then an input), 0 without."""

    n_features: int
    n_samples: int
    broadcast_loss: BroadcastLossFn | None
    loss_fn: LossFn
    acc_dtype: torch.dtype
    labels: str
    alpha: float
    ema: bool
    decay: float
    n_groups: int


class StepResult(NamedTuple):
    """``lam [B, d]`` (or ``[B, G]``), the new raw EMA and EMA of squared deviations (the old
    ones when the EMA is not folded here) and ``ok``, a 0-d bool: every check passed."""

    lam: torch.Tensor
    raw: torch.Tensor
    sq_dev: torch.Tensor
    ok: torch.Tensor


def _model_input(
    X: torch.Tensor, source: torch.Tensor, idx: torch.Tensor, feat: torch.Tensor,
    member: torch.Tensor | None, cfg: StepConfig,
) -> torch.Tensor:
    """The model input ``[(1 + F K) B, d]``, group-major: the batch, then one copy per
    ``(feature, draw)`` in which the feature holds the value of the stored row ``idx[t]`` of
    ``source`` (draw ``t`` fills ``(b, j, k)`` row-major)."""
    b, d = X.shape
    k = cfg.n_samples
    if member is None:
        values = source.reshape(-1).take(idx * d + feat).to(X.dtype)  # [B d K], order (b, j, k)
        copies = 1 + d * k
        flat = X.unsqueeze(0).expand(copies, b, d).reshape(-1)
        bi = torch.arange(b, device=X.device).view(b, 1, 1)
        j = torch.arange(d, device=X.device).view(1, d, 1)
        kk = torch.arange(k, device=X.device).view(1, 1, k)
        pos = (((1 + j * k + kk) * b + bi) * d + j).reshape(-1)  # copy 1 + j k + kk, row bi, col j
        return flat.index_put((pos,), values).view(copies * b, d)
    g = cfg.n_groups
    rows = source.index_select(0, idx).to(X.dtype).view(b, g, k, d).permute(1, 2, 0, 3)
    replaced = torch.where(member.view(g, 1, 1, d), rows, X)  # [G, K, B, d]
    return torch.cat([X.unsqueeze(0), replaced.reshape(g * k, b, d)]).view(-1, d)


def _losses(out: torch.Tensor, y: torch.Tensor, cfg: StepConfig) -> torch.Tensor:
    """Losses ``[1 + F K, B]`` of the group-major outputs against ``y``."""
    lead = out.shape[:2]
    if cfg.broadcast_loss is not None:
        return cfg.broadcast_loss(out, y, out.dim() > 2, cfg.acc_dtype)
    flat = out.to(cfg.acc_dtype).reshape(-1, *out.shape[2:])
    return cfg.loss_fn(flat, y.expand(lead).reshape(-1)).to(cfg.acc_dtype).reshape(lead)


def _label_rows(y: torch.Tensor, out: torch.Tensor, cfg: StepConfig) -> torch.Tensor | None:
    """``[B]`` bool: the label of each row is an integer in ``0..k-1`` (``k`` the output width,
    2 for ``[n]``), where the loss reads the labels as classes; None where it does not."""
    if not (cfg.labels == "class" or (cfg.labels == "onehot" and out.dim() == 2)):
        return None
    k = out.shape[1] if out.dim() == 2 else 2
    yv = y.to(torch.float64)
    return (yv == yv.round()) & (yv >= 0) & (yv < k)


def _checks(X: torch.Tensor, y: torch.Tensor, out: torch.Tensor, cfg: StepConfig) -> torch.Tensor:
    """0-d bool: ``X``, a floating ``y`` and the outputs are finite, and the labels fit the
    outputs (:func:`_label_rows`)."""
    ok = torch.isfinite(X).all() & torch.isfinite(out).all()
    if y.is_floating_point():
        ok = ok & torch.isfinite(y).all()
    rows = _label_rows(y, out, cfg)
    return ok if rows is None else ok & rows.all()


def _ema(
    values: torch.Tensor, raw: torch.Tensor, sq_dev: torch.Tensor, rn: torch.Tensor,
    plan: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None, alpha: float, decay: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The EMA after the rows of ``values [B, *raw.shape]`` (:class:`~torchstream.explain.
    smoothing.ExponentialSmoother` with at least one value seen; ``rn = (1 - alpha)^n``,
    ``decay = (1 - alpha)^B``, ``plan`` its prefix weights for ``B > 1``): the raw value and
    the EMA of squared deviations from the debiased estimate before each row."""
    u = values.to(raw.dtype)
    if plan is None:  # one row
        u = u.view(raw.shape)
        diff = u - raw * (1.0 / (1.0 - rn))
        return raw * (1.0 - alpha) + alpha * u, sq_dev * (1.0 - alpha) + alpha * diff * diff
    m, ri, w = plan
    flat = u.reshape(u.shape[0], -1)
    raw_row = raw.reshape(1, -1)
    before = ri * raw_row + m @ flat  # the raw EMA just before each row
    dev = (flat - before * (1.0 / (1.0 - rn * ri))).square()
    new_raw = (decay * raw_row + w @ flat).view(raw.shape)
    new_sq = (decay * sq_dev.reshape(1, -1) + w @ dev).view(raw.shape)
    return new_raw, new_sq


def ipfi_step(
    module: nn.Module,
    X: torch.Tensor,
    y: torch.Tensor,
    source: torch.Tensor,
    idx: torch.Tensor,
    feat: torch.Tensor,
    member: torch.Tensor | None,
    raw: torch.Tensor,
    sq_dev: torch.Tensor,
    rn: torch.Tensor,
    plan: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None,
    cfg: StepConfig,
) -> StepResult:
    """One iPFI step on the batch ``X [B, d]``, ``y [B]`` (see the module docstring).

    ``source`` holds the stored rows, ``idx`` the row of ``source`` of each of the ``B F K``
    draws and ``feat`` the feature of each draw (``F = d``; with groups, ``member [G, d]`` marks
    the columns of each group and ``feat`` is unused); ``raw``, ``sq_dev`` and ``rn`` are the
    smoother's state and ``plan`` its prefix weights for ``B > 1``."""
    b = X.shape[0]
    f = cfg.n_groups or cfg.n_features
    k = cfg.n_samples
    out = module(_model_input(X, source, idx, feat, member, cfg))
    if out.dim() == 2 and out.shape[1] == 1:
        out = out.reshape(-1)
    rows = _label_rows(y, out, cfg)  # a label out of range is scored as class 0, flagged
    y_loss = y if rows is None else torch.where(rows, y, torch.zeros_like(y))
    losses = _losses(out.view(1 + f * k, b, *out.shape[1:]), y_loss, cfg)  # [1 + F K, B]
    diff = (losses[1:] - losses[0]).view(f, k, b)
    lam = (diff[:, 0] if k == 1 else diff.mean(1)).t()
    ok = _checks(X, y, out, cfg)
    if not cfg.ema:
        return StepResult(lam, raw, sq_dev, ok)
    new_raw, new_sq = _ema(lam, raw, sq_dev, rn, plan, cfg.alpha, cfg.decay)
    return StepResult(lam, new_raw, new_sq, ok)


def compiled_step() -> Callable[..., StepResult]:
    """:func:`ipfi_step` compiled on a private copy (:func:`~torchstream.compiling.
    compile_private`)."""
    return compile_private(ipfi_step)


def loss_step_config(exp: LossExplainer, b: int, dtype: torch.dtype) -> StepConfig:
    """The :class:`StepConfig` of a batch of ``b`` rows of the loss explainer ``exp``, losses
    accumulated in ``dtype``."""
    name = exp.loss_name
    labels = (
        "class" if name in _CLASS_LOSSES else "onehot" if name in _REGRESSION_LOSSES else "none"
    )
    ema = b <= exp.smoother._BLOCK
    return StepConfig(
        n_features=exp.n_features,
        n_samples=exp.n_samples,
        broadcast_loss=exp._broadcast_loss,
        loss_fn=exp.loss_fn,
        acc_dtype=dtype,
        labels=labels,
        alpha=exp.alpha,
        ema=ema,
        decay=(1.0 - exp.alpha) ** b if ema else 1.0,
        n_groups=0 if exp.groups is None else exp.groups.n_groups,
    )
