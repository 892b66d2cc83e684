"""One Adam / AdamW step straight through torch's fused kernel.

At one row per step the update itself (one fused kernel over all parameters) is a small part of
``optimizer.step()``: the rest is the optimiser's per-call bookkeeping (state look-ups, grouping
the tensors by device and dtype, the grad-mode wrapper). :func:`fused_adam_step` gathers the same
tensors and calls the same kernel with the same hyper-parameters, so the result is the step
``optimizer.step()`` takes, bit for bit (Kingma & Ba, 2015, Algorithm 1; AdamW's decoupled
weight decay, Loshchilov & Hutter, 2019). It declines, changing nothing, whenever the optimiser
is anything else than a plain fused ``Adam`` / ``AdamW`` whose state exists already.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.optim import optimizer as torch_optimizer

__all__ = ["fused_adam_step"]

_FUSED_ADAM_TYPES: tuple[type[torch.optim.Optimizer], ...] = (torch.optim.Adam, torch.optim.AdamW)

# Tensor lists of one kernel call: params, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, steps.
_Lists = tuple[list[torch.Tensor], ...]


def _has_hooks(opt: torch.optim.Optimizer) -> bool:
    return bool(
        opt._optimizer_step_pre_hooks
        or opt._optimizer_step_post_hooks
        or getattr(torch_optimizer, "_global_optimizer_pre_hooks", None)
        or getattr(torch_optimizer, "_global_optimizer_post_hooks", None)
    )


def _group_lists(opt: torch.optim.Optimizer, group: dict[str, Any]) -> _Lists | None:
    """The kernel's tensor lists for one parameter group (its parameters with a gradient), or
    ``None`` when the direct call would not be the optimiser's own step."""
    if (
        group.get("fused") is not True
        or group.get("capturable")
        or group.get("differentiable")
        or "decoupled_weight_decay" not in group
        or isinstance(group["lr"], torch.Tensor)
        or any(isinstance(b, torch.Tensor) for b in group["betas"])
    ):
        return None
    amsgrad = bool(group["amsgrad"])
    params: list[torch.Tensor] = []
    grads: list[torch.Tensor] = []
    avgs: list[torch.Tensor] = []
    sqs: list[torch.Tensor] = []
    maxs: list[torch.Tensor] = []
    steps: list[torch.Tensor] = []
    device: torch.device | None = None
    dtype: torch.dtype | None = None
    state = opt.state
    for p in group["params"]:
        g = p.grad
        if g is None:
            continue
        s = state.get(p)
        if not s or g.is_sparse:  # state not created yet (the optimiser's first step)
            return None
        if device is None:
            device, dtype = p.device, p.dtype
        elif p.dtype != dtype or p.device != device:  # the optimiser groups these: its call
            return None
        params.append(p)
        grads.append(g)
        avgs.append(s["exp_avg"])
        sqs.append(s["exp_avg_sq"])
        if amsgrad:
            maxs.append(s["max_exp_avg_sq"])
        steps.append(s["step"])
    return params, grads, avgs, sqs, maxs, steps


def fused_adam_step(opt: torch.optim.Optimizer) -> bool:
    """Take ``opt``'s step through the fused kernel directly and return ``True``; return
    ``False``, having changed nothing, when ``opt`` is not exactly a fused ``Adam`` / ``AdamW``
    (without capturable or differentiable mode, tensor learning rates, gradient scaling or step
    hooks), when a parameter's state does not exist yet, or when its parameters span several
    devices or dtypes: the caller then calls ``opt.step()``."""
    if type(opt) not in _FUSED_ADAM_TYPES or _has_hooks(opt):
        return False
    if getattr(opt, "grad_scale", None) is not None or getattr(opt, "found_inf", None) is not None:
        return False
    calls = []
    for group in opt.param_groups:
        lists = _group_lists(opt, group)
        if lists is None:
            return False
        if lists[0]:
            calls.append((group, lists))
    with torch.no_grad():
        for group, (params, grads, avgs, sqs, maxs, steps) in calls:
            torch._foreach_add_(steps, 1)
            kernel = torch._fused_adamw_ if group["decoupled_weight_decay"] else torch._fused_adam_
            beta1, beta2 = group["betas"]
            kernel(
                params,
                grads,
                avgs,
                sqs,
                maxs,
                steps,
                amsgrad=group["amsgrad"],
                lr=group["lr"],
                beta1=beta1,
                beta2=beta2,
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=group["maximize"],
                grad_scale=None,
                found_inf=None,
            )
    return True
